// WORKERS > 1 on SQLite: one writer for every worker. SQLite has one write lock per database, and
// workers that each wrote their own creates took turns at it, each with half the batch and so twice
// the commits (fsyncs), and slept inside SQLite while the other held it. So the primary writes them:
// each worker sends a turn's creates in one message, the primary runs them through its own group
// commit (creates from both workers that arrive together share a batch and its fsync), and answers
// each create once the commit holding it is on disk (those settled together in one answer, usually
// the whole message). A 200 still means committed.
//
// Each create carries when its request's time for the database ends, and the primary's group
// commit keeps that deadline as it does in one process (one read after it is written not at all): a create told at its deadline is answered
// then, not when the rest of its message is. Should the primary not answer at all (it
// is stuck; were it gone, the worker would be gone too) the worker gives up a moment later with
// CommitOutcomeUnknownError, a 503: its creates may or may not have been stored.
//
// The primary also tells every worker whether its writes are failing for want of the database (a
// full disk), whichever worker's create met it, so that each worker's GET /health/ready says so.
import cluster from 'node:cluster';
import { formerFingerprints } from '../http/idempotency.js';
import { DATABASE_BUDGET_MS, DatabaseBudget, DatabaseDeadlineError } from '../store/budget.js';
import { CommitOutcomeUnknownError, WriteFailures, type BatchObserver } from '../store/group-commit.js';
import { isDatabaseUnavailable } from '../store/unavailable.js';
import { KeyTakenError, type CreateWrites, type Store } from '../store/store.js';
import { loggable } from '../loggable.js';
import { setDeadline } from '../time.js';
import { isMessage, machineNow, PRIMARY_GRACE_MS, toPrimary, toWorker, type CreatesAnswer, type WireCreate, type WireError } from './ipc.js';

/** While the primary's writes fail, how often it tells the workers so again (they remember a failure for 5 s: WriteFailures). */
const WRITE_HEALTH_REMINDER_MS = 1000;

/** In the primary: writes the creates the workers send, through `store`'s group commit. */
export function writeCreatesForWorkers(store: Store): void {
  /** Batches committed and not yet reported: each goes out with the next answer, to whichever worker, so the summed metrics count it once. */
  const batches: [number, number][] = [];
  store.observeBatches((size, seconds) => batches.push([size, seconds]));
  /** What the workers were last told of the writes' health (WriteHealth), and when. */
  let told = { failing: false, at: 0 };
  const tellWriteHealth = () => {
    const failure = store.writeFailure();
    const failing = failure !== undefined;
    if (failing === told.failing && (!failing || performance.now() - told.at < WRITE_HEALTH_REMINDER_MS)) return;
    told = { failing, at: performance.now() };
    const message = { type: 'almoner:write-health', failure: failing ? toWire(failure) : undefined } as const;
    for (const worker of Object.values(cluster.workers ?? {})) if (worker) toWorker(worker, message);
  };
  cluster.on('message', (from, m: unknown) => {
    if (!isMessage(m, 'almoner:creates')) return;
    let settled: CreatesAnswer['outcomes'] = [];
    const answer = () => {
      // The worker is gone, and its requests' clients with it (as when one process dies after a commit);
      // the batches stay for the next answer, to another worker.
      if (!from.isConnected()) return;
      toWorker(from, { type: 'almoner:created', id: m.id, outcomes: settled, batches: batches.splice(0) });
      settled = [];
      tellWriteHealth();
    };
    m.creates.forEach((c, i) => {
      void record(store, c)
        .then(
          (value) => ({ value }),
          (err: unknown) => ({ error: toWire(err) }),
        )
        .then((outcome) => {
          // Those settled by one commit (or one deadline) go in one answer: nextTick comes once every promise reaction is done.
          if (settled.length === 0) process.nextTick(answer);
          settled.push([i, outcome]);
        });
    });
  });
}

function record(store: Store, { charityId, donation, key, until }: WireCreate) {
  const ms = until - machineNow();
  // Read after its time ran out (this process was stuck): its worker has answered it 503 or is about to, so nothing is written.
  if (ms <= 0) return Promise.reject(new DatabaseDeadlineError());
  const budget = new DatabaseBudget(ms);
  if (!key) return store.recordDonation(charityId, donation, { budget });
  return store.recordKeyedDonation(charityId, donation, { ...key, formerFingerprints: () => formerFingerprints(donation) }, budget);
}

interface Waiting {
  resolve: (value: never) => void;
  reject: (err: unknown) => void;
}

/** In a worker: its creates, written by the primary. */
export class CreatesByPrimary implements CreateWrites {
  private queue: { create: WireCreate; waiting: Waiting }[] = [];
  /** Messages sent and not wholly answered: each create waiting for its outcome, until told. */
  private readonly sent = new Map<number, { waiting: (Waiting | undefined)[]; timer: NodeJS.Timeout }>();
  private nextId = 0;
  private scheduled = false;
  private observe: BatchObserver | undefined;
  private readonly failures = new WriteFailures();

  constructor(private readonly graceMs = PRIMARY_GRACE_MS) {
    process.on('message', (m: unknown) => {
      if (isMessage(m, 'almoner:created')) this.answered(m);
      // The one writer's health, whichever worker's create met it (a full disk): for /health/ready.
      else if (isMessage(m, 'almoner:write-health')) m.failure ? this.failures.failed(fromWire(m.failure)) : this.failures.succeeded();
    });
  }

  insert: CreateWrites['insert'] = (charityId, donation, deadline) => this.send({ charityId, donation, until: untilOf(deadline) });

  insertKeyed: CreateWrites['insertKeyed'] = (charityId, donation, { key, fingerprint, ttlMicros }, deadline) =>
    this.send({ charityId, donation, key: { key, fingerprint, ttlMicros }, until: untilOf(deadline) });

  writeFailure(): unknown {
    return this.failures.current();
  }

  observeWith(observer: BatchObserver): void {
    this.observe = observer;
  }

  private send<T>(create: WireCreate): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ create, waiting: { resolve: resolve as (value: never) => void, reject } });
      if (this.scheduled) return;
      this.scheduled = true;
      // The creates of requests arriving together go in one message, as they would share a batch in one process.
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    const id = ++this.nextId;
    const waiting: (Waiting | undefined)[] = queue.map((q) => q.waiting);
    // Judged once what the primary sent meanwhile is read (setDeadline): answered by then, nothing is left to judge.
    const timer = setDeadline(() => {
      if (!this.sent.delete(id)) return;
      const err = new CommitOutcomeUnknownError(new Error('the primary process did not answer'));
      this.failures.failed(err);
      for (const w of waiting) w?.reject(err);
    }, Math.max(...queue.map((q) => q.create.until)) - machineNow() + this.graceMs);
    this.sent.set(id, { waiting, timer });
    toPrimary({ type: 'almoner:creates', id, creates: queue.map((q) => q.create) });
  }

  private answered({ id, outcomes, batches }: CreatesAnswer): void {
    for (const [size, seconds] of batches) this.observe?.(size, seconds);
    const sent = this.sent.get(id);
    if (!sent) return; // given up on already
    for (const [i, outcome] of outcomes) {
      const w = sent.waiting[i];
      if (!w) continue;
      sent.waiting[i] = undefined;
      if (!sent.waiting.some(Boolean)) {
        this.sent.delete(id);
        clearTimeout(sent.timer);
      }
      if ('value' in outcome) {
        this.failures.succeeded();
        w.resolve(outcome.value as never);
      } else {
        const err = fromWire(outcome.error);
        if (isDatabaseUnavailable(err)) this.failures.failed(err);
        w.reject(err);
      }
    }
  }
}

/** A deadline on performance.now()'s clock (none: a whole budget from now) on the machine's, which the primary reads alike. */
const untilOf = (deadline: number | undefined) => machineNow() + (deadline === undefined ? DATABASE_BUDGET_MS : Math.max(0, deadline - performance.now()));

/** An error as the primary sends it (see fromWire). */
export function toWire(err: unknown): WireError {
  if (err instanceof KeyTakenError) return { kind: 'key taken', message: err.message };
  if (err instanceof DatabaseDeadlineError) return { kind: 'deadline', message: err.message, cause: err.cause === undefined ? undefined : toWire(err.cause) };
  if (err instanceof CommitOutcomeUnknownError) return { kind: 'outcome unknown', message: err.message, cause: toWire(err.cause) };
  const code = (err as { code?: unknown } | null)?.code;
  if (!(err instanceof Error)) return { kind: 'error', message: String(err), code: typeof code === 'string' ? code : undefined };
  // Its class and stack too: a worker logged the primary's SqliteError as a plain Error made in fromWire (until 2026-11-29; a review).
  return { kind: 'error', message: err.message, code: typeof code === 'string' ? code : undefined, name: loggable(err).type, stack: err.stack };
}

/** The error again, in the worker, of the class its routes and readiness check know it by. */
export function fromWire(w: WireError): Error {
  const cause = w.cause && fromWire(w.cause);
  switch (w.kind) {
    case 'key taken':
      return new KeyTakenError();
    case 'deadline':
      return new DatabaseDeadlineError(cause);
    case 'outcome unknown':
      return new CommitOutcomeUnknownError(cause);
    default: {
      const err = Object.assign(new Error(w.message), w.code === undefined ? {} : { code: w.code });
      if (w.name !== undefined) err.name = w.name;
      if (w.stack !== undefined) err.stack = w.stack;
      return err;
    }
  }
}
