// Group commit: writes that arrive together run in one transaction, so one commit (one fsync on
// SQLite with synchronous=FULL) serves them all. Each caller's promise settles only after the
// transaction holding its write has committed: a 200 still means "on disk".
//
// A transaction that fails before its COMMIT is sent has stored nothing, so its writes may run
// again. One whose COMMIT was sent but not answered (the connection dropped) may have been stored:
// running it again could store a donation twice. So every transaction also writes a token of its
// own, and after such a failure the database is asked whether the token is there: if it is, the
// writes were committed and their callers get their results; if it is not, nothing was; if the
// database cannot say, the callers get CommitOutcomeUnknownError and nothing is written again.
import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { isBusy, isDatabaseUnavailable } from './unavailable.js';

type Write<DB> = (trx: Transaction<DB>) => Promise<unknown>;

interface Pending<DB> {
  write: Write<DB>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Batch sizes, for whoever wants to watch them (metrics). */
export type BatchObserver = (size: number, seconds: number) => void;

/** Where each transaction leaves its token, and how to look one up afterwards. */
export interface CommitJournal<DB> {
  /** Writes `token` inside the transaction, so it is committed with the writes or not at all. */
  record(trx: Transaction<DB>, token: string): Promise<void>;
  /** Whether a transaction that wrote `token` was committed. */
  committed(token: string): Promise<boolean>;
}

/**
 * The COMMIT was sent, its answer was lost, and the database could not be asked whether it was
 * committed. The write was not acknowledged; it may or may not be stored, and it is not retried.
 */
export class CommitOutcomeUnknownError extends Error {
  readonly code = 'ALMONER_COMMIT_UNKNOWN';
  constructor(override readonly cause: unknown) {
    super(`the outcome of a commit is unknown: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** A transaction that failed before COMMIT was sent, or whose COMMIT was refused: nothing of it was stored. */
class NotCommitted extends Error {
  constructor(override readonly cause: unknown) {
    super('not committed');
  }
}

/** How long a batch keeps trying while another process holds SQLite's write lock: the README's 5 s. */
export const BUSY_DEADLINE_MS = 5000;

export class GroupCommit<DB> {
  private readonly queue: Pending<DB>[] = [];
  private running = 0;
  private scheduled = false;
  /** The last write that failed for want of a database (a full or read-only disk, a lost connection), until one succeeds. */
  private failing: { err: unknown; at: number } | undefined;

  private readonly concurrency: number;
  private readonly maxBatch: number;
  private readonly busyDeadlineMs: number;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly journal: CommitJournal<DB>,
    options: {
      /** Transactions at once: 1 for SQLite (one writer), the pool size for PostgreSQL. */
      concurrency: number;
      maxBatch?: number;
      busyDeadlineMs?: number;
    },
  ) {
    this.concurrency = options.concurrency;
    this.maxBatch = options.maxBatch ?? 256;
    this.busyDeadlineMs = options.busyDeadlineMs ?? BUSY_DEADLINE_MS;
  }

  /**
   * The error the last write failed with, if writes are failing: one failed within the last
   * `withinMs` and none has succeeded since. With no writes for that long, writes are given the
   * benefit of the doubt again (a readiness check that never let traffic back could never see them work).
   */
  writeFailure(withinMs = BUSY_DEADLINE_MS): unknown {
    return this.failing && performance.now() - this.failing.at < withinMs ? this.failing.err : undefined;
  }

  private observe: BatchObserver | undefined;

  /** Reports each batch's size and commit time (to metrics). */
  observeWith(observer: BatchObserver): void {
    this.observe = observer;
  }

  /** Runs `write` inside a shared transaction; resolves once that transaction has committed. */
  run<T>(write: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.running >= this.concurrency || this.queue.length === 0) return;
    this.scheduled = true;
    // One turn of the event loop lets the writes of requests arriving together join the batch.
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.running >= this.concurrency || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.running++;
    this.schedule(); // with spare concurrency, the next batch may start at once
    const started = performance.now();
    try {
      const results = await this.commit(batch.map((p) => p.write));
      this.failing = undefined;
      batch.forEach((p, i) => p.resolve(results[i]));
    } catch (err) {
      const cause = err instanceof NotCommitted ? err.cause : err;
      const unavailable = isDatabaseUnavailable(cause);
      if (unavailable) this.failing = { err: cause, at: performance.now() };
      // Retrying one by one helps only when one write is at fault and nothing was stored. A lost
      // database fails them all at once (a 503 now, not one timeout per write), and an unknown
      // outcome is never retried.
      if (!(err instanceof NotCommitted) || unavailable) {
        for (const p of batch) p.reject(cause);
      } else {
        for (const p of batch) {
          try {
            p.resolve((await this.commit([p.write]))[0]);
          } catch (one) {
            p.reject(one instanceof NotCommitted ? one.cause : one);
          }
        }
      }
    } finally {
      this.observe?.(batch.length, (performance.now() - started) / 1000);
      this.running--;
      this.schedule();
    }
  }

  /**
   * commitOnce, tried again while another process holds SQLite's write lock: each try waits only a
   * moment inside SQLite (busy_timeout), and the waits between tries leave the event loop free, so
   * other requests (GET /health, /me) are answered meanwhile. Past the deadline the lock's holder
   * wins and the writes fail with SQLITE_BUSY (a 503).
   */
  private async commit(writes: readonly Write<DB>[]): Promise<unknown[]> {
    const deadline = performance.now() + this.busyDeadlineMs;
    for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
      try {
        return await this.commitOnce(writes);
      } catch (err) {
        if (!(err instanceof NotCommitted && isBusy(err.cause)) || performance.now() + pause > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  /**
   * Runs the writes in one transaction with a token; their results once committed. Throws
   * NotCommitted when nothing was stored, CommitOutcomeUnknownError when that cannot be known.
   */
  private async commitOnce(writes: readonly Write<DB>[]): Promise<unknown[]> {
    const token = randomUUID();
    const values: unknown[] = [];
    let commitSent = false;
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const write of writes) values.push(await write(trx));
        await this.journal.record(trx, token);
        commitSent = true; // Kysely sends COMMIT when this returns
      });
      return values;
    } catch (err) {
      if (!commitSent) throw new NotCommitted(err);
      let committed: boolean;
      try {
        committed = await this.journal.committed(token);
      } catch {
        throw new CommitOutcomeUnknownError(err);
      }
      if (committed) return values;
      throw new NotCommitted(err);
    }
  }
}
