// Group commit: writes that arrive together are committed together (in one transaction on SQLite,
// by one statement on PostgreSQL), so one commit (one fsync on SQLite with synchronous=FULL) serves
// them all. Each caller's promise settles only after the commit holding its write: a 200 still
// means "on disk".
//
// A batch that fails before its commit is sent has stored no donation, so its writes may run again.
// One whose commit was sent but not answered (the connection dropped) may have been stored: running
// it again could store a donation twice. So every batch also writes a token of its own, and after
// such a failure the token is claimed (written, unless it is there): if it is there, the writes
// were committed and their callers get their results; if the claim took it, nothing was, and
// nothing can be later (a statement the database still runs fails on the token); if the database
// cannot say, the callers get CommitOutcomeUnknownError and nothing is written again.
//
// On PostgreSQL a batch needs no transaction: one statement writes every donation, their keys and
// the token, which PostgreSQL commits by itself (Together.ownCommit in statements.ts, made in
// donation-writes.ts). That statement is the commit: its answer lost, the token says what happened.
// A batch's first try takes its keys to be new, so under load (the donations' ids taken ahead) it
// is one round trip, keys or not. A key already stored (a replay, a key reused, an expired one)
// fails that statement whole, having stored nothing, and the batch is tried again whole, its
// writes now looking their keys up first (one round trip for them all, before the commit, plus
// one for each replay's read and each expired key's deletion); a batch of nothing but replays
// sends no commit. (For a second after a key is found stored, first tries look up too.)
//
// On SQLite the batch runs in one synchronous better-sqlite3 transaction: nothing awaits between
// its statements, no deadline can pass in the middle of it, and a COMMIT's answer cannot be lost
// (the database is in this process), so no token is needed. Its first try takes its keys to be new
// too: a key already stored fails the key's insert, which rolls the transaction back, and the batch
// is tried again whole, its writes looking their keys up first.
import { randomUUID } from 'node:crypto';
import type BetterSqlite3 from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { byDeadline, DATABASE_BUDGET_MS, DatabaseDeadlineError } from './budget.js';
import { finish, lastStatements, queryOn, runOnSqlite, runUntilLast, type WriteProgram } from './statements.js';
import { ioErrorCode, isBusy, isDatabaseUnavailable, isRefused } from './unavailable.js';
import { setDeadline } from '../time.js';

/**
 * A write, made afresh for each try (see statements.ts). `retry`: a try of this write has failed
 * before. A keyed create's first try takes its key to be new, and a retry looks it up first
 * (donation-writes.ts).
 */
type Write = (retry: boolean) => WriteProgram<unknown>;

interface Pending {
  write: Write;
  /** Tell the writer its result, or its error; whatever comes after the first is not said. */
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  /**
   * The writer has been told: by its batch, or at its deadline; or its deadline has come while its
   * batch's commit was unanswered, and it will be told by the claim of the batch's token (expire).
   * Either way it takes no further part in any batch.
   */
  told: boolean;
  /** Tells the writer, whether or not `told` is set already: for expire's late claim alone. */
  tell: { resolve: (value: unknown) => void; reject: (err: unknown) => void };
  /** Cuts the write short at its deadline. */
  timer: NodeJS.Timeout | undefined;
  /** The batch it is in, once it has left the queue. */
  batch?: Batch;
}

/**
 * Writes committed together. One that reaches its deadline before the commit is sent is told so
 * and left out of it (nothing of it is stored); after, it is told the outcome is unknown. Either
 * way the others go on to their own outcome.
 */
interface Batch {
  members: Pending[];
  /** Which try of its writes this is: their first, their batch's again whole, or a half of a batch that failed. */
  attempt: 'first' | 'whole' | 'half';
  /** Why the last try failed while trying again (another process holding SQLite's lock). */
  heldUpBy?: unknown;
  /**
   * PostgreSQL, once the commit is sent (none before): its token, the claim that settles it should
   * its answer not come (one per batch, whoever makes it), and each member's result should it be committed.
   */
  sent?: { token: string; claim: string; results: unknown[] };
  /** The claim made when a member's deadline came while the commit was unanswered (expire): committed or not, undefined if not known in time. */
  lateClaim?: Promise<boolean | undefined>;
}

/** Batch sizes, for whoever wants to watch them (metrics). */
export type BatchObserver = (size: number, seconds: number) => void;

/** How to find out afterwards whether a batch's commit, which wrote its token, went through. */
export interface CommitJournal {
  /**
   * Whether the statement that wrote `token` was committed. If it was not, it never will be: the
   * token is claimed, so that a statement the database is still running after its connection was
   * lost fails when it comes to write the token (PostgreSQL runs it on until it ends). `claim`
   * names this claim, the same on every try: a try whose own claim went through but whose answer was
   * lost must not make the next take that claim for the batch's commit.
   */
  committed(token: string, claim: string): Promise<boolean>;
}

/**
 * How long to wait before asking about a lost commit's token again, once a try on each of the
 * pool's connections has failed: the database is away (restarting, failing over), not just the
 * connections that died in the cut. Doubled each time up to the last; asked while anyone waits.
 */
const TOKEN_CHECK_PAUSES_MS = [25, 50, 100, 200, 400];

/**
 * How long a writer whose deadline came while its batch's commit was unanswered waits for the claim
 * of the batch's token (one round trip; longer only while the token's row is being written by the
 * statement itself, or the database has stalled): within the 0.5 s between the database's time
 * (DATABASE_BUDGET_MS) and the answer's.
 */
const LATE_CLAIM_MS = 250;

/**
 * The commit was sent, its answer was lost, and the database could not be asked whether it went
 * through. The write was not acknowledged; it may or may not be stored, and it is not retried.
 */
export class CommitOutcomeUnknownError extends Error {
  readonly code = 'ALMONER_COMMIT_UNKNOWN';
  constructor(override readonly cause: unknown) {
    const code = (cause as { code?: unknown } | null)?.code;
    const named = typeof code === 'string' && /^SQLITE_/.test(code) ? `${code}: ` : ''; // SQLite's message ("disk I/O error") does not name it
    super(`the outcome of a commit is unknown: ${named}${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** A batch that failed before its commit was sent, whose commit was refused, or whose lost answer was settled by claiming its token: none of its donations was stored. */
class NotCommitted extends Error {
  constructor(override readonly cause: unknown) {
    super('not committed');
  }
}

/**
 * Writes in one batch at most. SQLite has one writer, so a batch takes what is waiting: each commit
 * is an fsync. On PostgreSQL a batch mostly waits for its round trips, and if it held every create
 * waiting, the server would have nothing to do meanwhile: batches of at most 32 leave the next
 * creates to a batch of their own, made ready while the first waits, on another pooled connection.
 * Under the benchmark's 64 connections that gave 3 to 8% more creates a second, and 4 to 20% more
 * keyed ones (docs/performance.md); 8 gave 20% fewer.
 */
const MAX_BATCH = { sqlite: 256, postgres: 32 };

/** How long /health/ready remembers a write that failed for want of the database, unless one succeeds. */
const FAILURE_MEMORY_MS = 5000;

/**
 * The last write that failed for want of a database (a full or read-only disk, a lost connection),
 * until one succeeds: what /health/ready reports. Kept by whoever writes (GroupCommit, or under
 * WORKERS on SQLite the worker's CreatesByPrimary).
 */
export class WriteFailures {
  private last: { err: unknown; at: number } | undefined;

  failed(err: unknown): void {
    this.last = { err, at: performance.now() };
  }

  succeeded(): void {
    this.last = undefined;
  }

  /**
   * The error the last write failed with, if writes are failing: one failed within the last
   * `withinMs` and none has succeeded since. With no writes for that long, writes are given the
   * benefit of the doubt again (a readiness check that never let traffic back could never see them work).
   */
  current(withinMs = FAILURE_MEMORY_MS): unknown {
    return this.last && performance.now() - this.last.at < withinMs ? this.last.err : undefined;
  }
}

export class GroupCommit<DB> {
  private readonly queue: Pending[] = [];
  private running = 0;
  private scheduled = false;
  private readonly failures = new WriteFailures();

  private readonly concurrency: number;
  private readonly maxBatch: number;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly journal: CommitJournal,
    options: {
      /** Batches at once: 1 for SQLite (one writer); for PostgreSQL, the pool size but one (open.ts). */
      concurrency: number;
      /** SQLite: the connection under `db`, on which each batch runs synchronously. */
      sqlite?: BetterSqlite3.Database;
      /**
       * Whether a batch whose first try failed with `cause` (nothing stored) is tried again whole,
       * its writes told they are retried, rather than in halves: a key found stored
       * (donation-writes.ts). By default never.
       */
      againWhole?: (cause: unknown) => boolean;
    },
  ) {
    this.concurrency = options.concurrency;
    this.maxBatch = options.sqlite ? MAX_BATCH.sqlite : MAX_BATCH.postgres;
    this.sqlite = options.sqlite;
    this.againWhole = options.againWhole ?? (() => false);
  }

  private readonly sqlite: BetterSqlite3.Database | undefined;
  private readonly againWhole: (cause: unknown) => boolean;

  /** The error writes are failing with, if they are (WriteFailures.current). */
  writeFailure(withinMs?: number): unknown {
    return this.failures.current(withinMs);
  }

  private observe: BatchObserver | undefined;

  /** Reports each batch's size and commit time (to metrics). */
  observeWith(observer: BatchObserver): void {
    this.observe = observer;
  }

  /**
   * Runs `write` with the others of its batch; resolves once their commit has gone through. Past
   * `deadline` (performance.now()'s clock) it fails with DatabaseDeadlineError, and the write's
   * donation is not stored: it never started, or its batch is not committed (unless the commit
   * was already sent: then CommitOutcomeUnknownError).
   */
  run<T>(write: (retry: boolean) => WriteProgram<T>, deadline = performance.now() + DATABASE_BUDGET_MS): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const p: Pending = {
        write,
        resolve: (value) => {
          if (p.told) return;
          p.told = true;
          clearTimeout(p.timer);
          resolve(value as T);
        },
        reject: (err) => {
          if (p.told) return;
          p.told = true;
          clearTimeout(p.timer);
          reject(err);
        },
        told: false,
        tell: { resolve: resolve as (value: unknown) => void, reject },
        timer: undefined,
      };
      p.timer = setDeadline(() => this.expire(p), Math.max(0, deadline - performance.now())); // expire looks whether p was told meanwhile
      this.queue.push(p);
      this.schedule();
    });
  }

  /**
   * A write's deadline has come: out of the queue, or out of its batch. Its batch leaves it out of
   * the commit if that is not sent yet (commitOnce looks, last thing before it sends); once it is,
   * whether the write was stored is known only when the commit answers, too late for this writer.
   */
  private expire(p: Pending): void {
    const queued = this.queue.indexOf(p);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      p.reject(new DatabaseDeadlineError());
    } else if (p.batch && !p.told) {
      const batch = p.batch;
      const late = new DatabaseDeadlineError(batch.heldUpBy);
      if (!batch.sent) {
        this.failures.failed(late);
        return p.reject(late);
      }
      // The commit was sent and is not answered: waiting for a lock (another transaction's, a
      // migration's), or the database stalled. Its token is claimed now, at once: if the claim takes
      // it, the statement fails when it comes to write it, so nothing of it is stored, ever, and the
      // writer is told so, a plain 503 its retry may follow; if the token is there, it was committed.
      // Until 2026-11-29 the writer was told the outcome was unknown, and a statement held up by a
      // lock was then committed every time (a review: 16 of 16 such 503s stored).
      // Told now as far as the batch goes: should the statement fail (on the token the claim took), the
      // batch's writes tried again leave this one out, whose writer is told the claim's answer.
      p.told = true;
      const { sent } = batch;
      const i = batch.members.indexOf(p);
      // Not answered in time (or failing): undefined, the outcome unknown; the claim itself runs on, and still decides.
      batch.lateClaim ??= byDeadline(performance.now() + LATE_CLAIM_MS, this.journal.committed(sent.token, sent.claim)).catch(() => undefined);
      void batch.lateClaim.then((committed) => {
        if (committed === true) return p.tell.resolve(sent.results[i]);
        const err = committed === false ? late : new CommitOutcomeUnknownError(late);
        this.failures.failed(err);
        p.tell.reject(err);
      });
    }
  }

  private schedule(): void {
    if (this.scheduled || this.running >= this.concurrency || this.queue.length === 0) return;
    this.scheduled = true;
    // Two turns of the event loop before the batch leaves: the first lets the writes of the requests
    // read together join it; the second, one more look at the sockets (setImmediate's turn polls
    // without waiting), lets in the requests that arrived while those were being handled, which
    // would otherwise wait for this batch to be committed and answered and then for a batch of their
    // own: two cycles, the tail of the latency. On SQLite under the benchmark's create load, p99 was
    // lower with the second turn in 8 of 8 alternating pairs of runs (see docs/performance.md).
    setImmediate(() =>
      setImmediate(() => {
        this.scheduled = false;
        void this.flush();
      }),
    );
  }

  private async flush(): Promise<void> {
    if (this.running >= this.concurrency || this.queue.length === 0) return;
    const batch = this.batchOf(this.queue.splice(0, this.maxBatch), 'first');
    this.running++;
    this.schedule(); // with spare concurrency, the next batch may start at once
    const started = performance.now();
    try {
      await this.settle(batch);
    } finally {
      this.observe?.(batch.members.length, (performance.now() - started) / 1000);
      this.running--;
      this.schedule();
    }
  }

  /**
   * Commits the batch and tells its writers (those left out were told already). Trying again helps
   * only when nothing was stored and a write is at fault (a constraint, a key already stored). A
   * first try that failed on a key already stored, which may have taken its keys to be new
   * (donation-writes.ts), is tried again whole, its keys looked up first (againWhole): a replay
   * costs its batch one failed try, not a retry in halves. Any other such failure, or
   * one again, is tried in two halves, and a half that fails so again is halved again, down to the
   * write at fault, which gets its error alone. A lost database fails them all at once (a 503 now,
   * not one timeout per write), and an unknown outcome is never retried.
   */
  private async settle(batch: Batch): Promise<void> {
    try {
      const results = await this.commit(batch);
      this.failures.succeeded();
      batch.members.forEach((p, i) => p.resolve(results[i]));
    } catch (err) {
      if (everyoneTold(batch)) return; // at their deadlines
      const cause = err instanceof NotCommitted ? err.cause : err;
      const unavailable = isDatabaseUnavailable(cause);
      if (unavailable) this.failures.failed(cause);
      if (!(err instanceof NotCommitted) || unavailable) {
        for (const p of batch.members) p.reject(cause);
      } else if (batch.attempt === 'first' && this.againWhole(cause)) {
        await this.settle(this.batchOf(stillWaiting(batch), 'whole'));
      } else if (batch.members.length > 1 || batch.attempt !== 'half') {
        // A write of its own is tried once more, alone, in a half of its own (a key another instance held may be
        // committed by then); a part of a batch is halved again even when all but one were told meanwhile (at their
        // deadline, their commit sent): the one left gets a commit of its own, so whatever error it gets is its own,
        // not a neighbour's.
        await this.inHalves(batch);
      } else {
        for (const p of batch.members) p.reject(cause);
      }
    }
  }

  /**
   * The writes of a batch that failed because of one of them, in two halves (settle). One write at
   * fault in a batch of n costs about 2·log2(n) more commits (16 for 256), where trying each alone
   * cost n, and the others answered in the meantime wait that much less. Each half is made a batch at
   * once, so that a write whose deadline passes while it waits its turn is told that nothing of it was sent.
   */
  private async inHalves(batch: Batch): Promise<void> {
    const waiting = stillWaiting(batch);
    const middle = Math.ceil(waiting.length / 2);
    const halves = [waiting.slice(0, middle), waiting.slice(middle)].filter((half) => half.length > 0).map((half) => this.batchOf(half, 'half'));
    for (const half of halves) if (!everyoneTold(half)) await this.settle(half);
  }

  private batchOf(members: Pending[], attempt: Batch['attempt']): Batch {
    const batch: Batch = { members, attempt };
    for (const p of members) p.batch = batch;
    return batch;
  }

  /**
   * commitOnce, tried again while another process holds SQLite's write lock: each try waits only a
   * moment inside SQLite (busy_timeout), and the waits between tries leave the event loop free, so
   * other requests (GET /health, /me) are answered meanwhile. At the writes' deadline the lock's
   * holder wins and they fail with DatabaseDeadlineError (a 503), logged with the SQLITE_BUSY that held them.
   */
  private async commit(batch: Batch): Promise<unknown[]> {
    for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
      try {
        return await this.commitOnce(batch);
      } catch (err) {
        if (!(err instanceof NotCommitted && isBusy(err.cause)) || everyoneTold(batch)) throw err;
        batch.heldUpBy = err.cause;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  /**
   * Runs the batch's writes and commits them with a token; their results once committed, in the
   * members' order (undefined for one left out at its deadline). Throws NotCommitted when nothing
   * was stored, CommitOutcomeUnknownError when that cannot be known.
   */
  private async commitOnce(batch: Batch): Promise<unknown[]> {
    if (this.sqlite) return this.commitOnSqlite(this.sqlite, batch);
    const token = randomUUID();
    const stop = () => {
      if (everyoneTold(batch)) throw new DatabaseDeadlineError();
    };
    try {
      // On one connection, taken first: the deadline may pass while the pool is busy, and then nothing was sent.
      return await this.db.connection().execute(async (connection) => {
        const query = queryOn(connection, stop);
        // A writer told at its deadline is still run up to its last statement (those before it only read, or
        // make a change that is right whatever becomes of the write), and left out of the commit.
        const programs = batch.members.map(({ write }) => write(batch.attempt !== 'first'));
        const steps = await runUntilLast(query, programs);
        const waiting = (i: number) => !batch.members[i]!.told;
        for (let last = lastStatements(steps, waiting); ; ) {
          stop();
          if (!last) return steps.map((step) => (step.done ? step.value : undefined)); // nothing to write (replays, or every writer told)
          const { rows, commit } = await last.together.ownCommit(last.statements, query, token);
          const now = lastStatements(steps, waiting);
          if (now?.writes.length !== last.writes.length) {
            last = now; // one reached its deadline meanwhile: the commit is made again without it
            continue;
          }
          last.writes.forEach((i, j) => (steps[i] = { done: true, value: finish(programs[i]!, rows[j]!) }));
          // Known before the commit is sent, so that an answer settled by the token can still return them.
          const results = steps.map((step) => (step.done ? step.value : undefined));
          batch.sent = { token, claim: randomUUID(), results }; // this statement is the commit; from here to its sending, nothing awaits
          await connection.executeQuery(commit);
          return results;
        }
      });
    } catch (err) {
      // An error PostgreSQL answered (a key another instance stored, a deadlock) means the statement did not take effect.
      if (!batch.sent || isRefused(err)) throw new NotCommitted(err);
      if (everyoneTold(batch)) throw err; // nobody left to tell
      // Asked again when the asking fails: the cut that lost the commit's answer often killed the
      // pool's other connections too, and the pool hands those out until each has failed once
      // (asked once, 43 stored creates were answered 503 in a review's run, 2026-11-28). Every try
      // makes the same claim, so one whose claim went through but whose answer was lost is told
      // apart from the batch's commit by the next (a second review found a plain second claim
      // taking the first for the commit: a 200 for a donation never stored). While someone waits
      // for the answer (DATABASE_BUDGET_MS at most): at once until each of the pool's connections has
      // had a try (the dead ones fail at once), then after a pause, for a database that is away a moment.
      const claim = batch.sent.claim; // the late claim's too (expire): a claim is never taken for the batch's commit
      for (let failed = 0; ; ) {
        let committed: boolean;
        try {
          committed = await this.journal.committed(token, claim);
        } catch {
          failed++;
          const pause = failed <= this.concurrency + 1 ? 0 : TOKEN_CHECK_PAUSES_MS[Math.min(failed - this.concurrency - 2, TOKEN_CHECK_PAUSES_MS.length - 1)]!;
          if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
          if (everyoneTold(batch)) throw new CommitOutcomeUnknownError(err);
          continue;
        }
        if (committed) return batch.sent.results;
        throw new NotCommitted(err);
      }
    }
  }

  /**
   * The batch in one synchronous transaction, BEGIN IMMEDIATE so another process's lock is met at
   * once (and waited for in commit()). A transaction another caller opened on this connection
   * through Kysely (a migration, say) is waited for the same way: better-sqlite3 would nest the
   * batch inside it.
   */
  private commitOnSqlite(db: BetterSqlite3.Database, batch: Batch): unknown[] {
    if (everyoneTold(batch)) throw new NotCommitted(new DatabaseDeadlineError());
    if (db.inTransaction) throw new NotCommitted(Object.assign(new Error('SQLITE_BUSY: another transaction is open on this connection'), { code: 'SQLITE_BUSY' }));
    let committing = false;
    try {
      // Those told at their deadline (while another process held the lock) are left out.
      return db
        .transaction(() => {
          const results = batch.members.map(({ write, told }) => (told ? undefined : runOnSqlite(db, write(batch.attempt !== 'first'))));
          committing = true; // every write ran: what fails from here is the COMMIT
          return results;
        })
        .immediate();
    } catch (err) {
      // A COMMIT that met an I/O error (SQLITE_IOERR_FSYNC: the disk would not confirm the WAL's write) may
      // have left the batch's frames, its commit mark among them, in the WAL: this process never sees them,
      // and its next commit writes over them, but a process that stops before (a crash, a restart, a clean
      // stop whose checkpoint meets the same disk) leaves them to be read back by the next to open the
      // database, and the batch is stored. Its writers were told "stored nothing" until 2026-11-30 (a faults
      // review: an unkeyed retry then recorded the donation twice).
      if (committing && ioErrorCode(err)) throw new CommitOutcomeUnknownError(err);
      throw new NotCommitted(err); // rolled back, or never begun
    }
  }
}

/** The writers of the batch not yet told (at their deadline). */
const stillWaiting = (batch: Batch): Pending[] => batch.members.filter((p) => !p.told);

/** Every writer of the batch has been told (at its deadline): nothing of it is to be written. */
function everyoneTold(batch: Batch): boolean {
  return batch.members.every((p) => p.told);
}
