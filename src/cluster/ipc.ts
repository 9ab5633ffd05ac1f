// WORKERS > 1: what the primary process and its workers say to each other over node:cluster's
// channel, besides rate-limiter-flexible's own messages (its counters). The primary is cluster/primary.ts; a worker is server.ts's serve(), as with one process;
// on SQLite the primary writes the workers' creates (cluster/creates.ts).
import cluster, { type Worker } from 'node:cluster';
import type { NewDonation, StoredDonation } from '../donations/donation.js';
import type { IdempotencyKey, KeyedOutcome } from '../store/store.js';
import type { MetricsSnapshot } from './metrics.js';

/**
 * How long a worker waits for the primary beyond what its question should take: the rate-limit
 * counters (http/throttle.ts) are answered from memory at once, and creates (creates.ts) by their
 * deadline. Only a primary that is stuck could take longer (one that is gone takes its workers with it).
 */
export const PRIMARY_GRACE_MS = 2000;

/** The environment variable the primary gives each worker: its place, 0 to WORKERS - 1, kept by a replacement. */
export const WORKER_INDEX_ENV = 'ALMONER_WORKER_INDEX';

/** A worker to the primary and on to every other worker: this address failed to authenticate. */
export interface AuthFailure {
  type: 'almoner:auth-failure';
  address: string;
  /** When the failure's window ends (Date.now()'s clock, as the limiters'). */
  until: number;
}

/** A worker asks for every worker's metrics, for GET /metrics; the primary answers with the same id. */
export interface MetricsRequest {
  type: 'almoner:metrics';
  id: number;
}

export interface MetricsAnswer {
  type: 'almoner:metrics';
  id: number;
  text?: string;
  error?: string;
}

/**
 * The primary to a worker: your own metrics, please; the worker answers with the same id and its
 * registry's getMetricsAsJSON(), which the primary sums with the rest (cluster/metrics.ts).
 */
export interface WorkerMetrics {
  type: 'almoner:worker-metrics';
  id: number;
  metrics?: MetricsSnapshot;
}

/**
 * On SQLite, the primary to every worker: whether its writes are failing for want of the database
 * (a full disk), and with what. Told when that changes, and at most once a second while it lasts,
 * so that each worker's GET /health/ready says what the one writer's writes do, not only what the
 * worker's own last create met.
 */
export interface WriteHealth {
  type: 'almoner:write-health';
  failure?: WireError;
}

/** The primary to a worker: finish the requests in flight and exit, as on SIGTERM. */
export interface Stop {
  type: 'almoner:stop';
}

/** On SQLite, a worker to the primary: a turn's creates, for the primary to write (cluster/creates.ts). */
export interface CreatesRequest {
  type: 'almoner:creates';
  id: number;
  creates: WireCreate[];
}

/**
 * A create as it crosses to the primary: `until` is when its time for the database ends, on the
 * machine's monotonic clock (machineNow), which every process on it reads alike. Until 2026-11-29 it
 * carried the milliseconds left, which the primary counted from when it read the message: a stuck
 * primary read it late with its whole time still to spend, and stored creates whose workers had
 * answered 503 long before (a review), which a client retrying without a key then doubled.
 */
export interface WireCreate {
  charityId: number;
  donation: NewDonation;
  key?: Omit<IdempotencyKey, 'formerFingerprints'>;
  until: number;
}

/** Milliseconds on the machine's monotonic clock (CLOCK_MONOTONIC), the same in every process on it; not performance.now(), which starts at each process's own start. */
export const machineNow = (): number => Number(process.hrtime.bigint()) / 1e6;

/**
 * The primary's answer to a CreatesRequest, or to part of it: the outcomes of those of its creates
 * (by their place in it) that were settled together, each told as soon as it is, and the batches the
 * primary committed since its last answer to any worker (for the metrics).
 */
export interface CreatesAnswer {
  type: 'almoner:created';
  id: number;
  outcomes: [index: number, outcome: { value: StoredDonation | KeyedOutcome } | { error: WireError }][];
  batches: [size: number, seconds: number][];
}

/** An error as it crosses: its kind, for the worker to make it again, and what it said. */
export interface WireError {
  kind: 'deadline' | 'outcome unknown' | 'key taken' | 'error';
  message: string;
  code?: string;
  cause?: WireError;
  /** The class it was (SqliteError), and where the primary met it: what the worker's log line says (loggable). */
  name?: string;
  stack?: string;
}

export type Message = AuthFailure | MetricsRequest | MetricsAnswer | WorkerMetrics | WriteHealth | Stop | CreatesRequest | CreatesAnswer;

export function isMessage<T extends Message['type']>(m: unknown, type: T): m is Extract<Message, { type: T }> {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === type;
}

/** This process's place among the workers, or undefined when it serves alone (WORKERS=1). */
export function workerIndex(): number | undefined {
  return cluster.isWorker ? Number(process.env[WORKER_INDEX_ENV] ?? 0) : undefined;
}

/**
 * In a worker: `gone` is called as the primary goes (killed), for the worker to say so; then
 * bin/worker-preload.cjs, whose own listener this one is put before, ends the worker with exit status 1.
 * Not when the primary asks the worker to disconnect (worker.disconnect(), unused): that is no loss.
 */
export function whenPrimaryGone(gone: () => void): void {
  process.prependOnceListener('disconnect', () => cluster.worker?.exitedAfterDisconnect || gone());
}

/** From a worker: sends to the primary (dropped if the primary is gone: the worker then exits too). */
export function toPrimary(message: Message): void {
  if (process.connected) process.send!(message, undefined, undefined, unsent);
}

/**
 * From the primary: sends to a worker, unless it is going. A worker can exit between the check and
 * the send (under `systemctl stop` every process gets SIGTERM at once); the send then fails, and
 * without a callback that failure is an 'error' event that would bring the primary down. The
 * worker's exit is handled where it is watched (primary.ts).
 */
export function toWorker(worker: Worker, message: Message): void {
  if (worker.isConnected()) worker.send(message, undefined, undefined, unsent);
}

/** A message that could not be sent because its receiver had gone: nothing more to do. */
const unsent = () => {};

let nextId = 0;
let listening = false;
const waiting = new Map<number, { resolve: (text: string) => void; reject: (err: Error) => void }>();

/** From a worker: every worker's metrics, gathered and summed by the primary. */
export function metricsFromPrimary(): Promise<string> {
  if (!listening) {
    listening = true;
    process.on('message', (m: unknown) => {
      if (!isMessage(m, 'almoner:metrics')) return;
      const answer = m as MetricsAnswer;
      const pending = waiting.get(answer.id);
      waiting.delete(answer.id);
      if (answer.text !== undefined) pending?.resolve(answer.text);
      else pending?.reject(new Error(answer.error ?? 'no metrics'));
    });
  }
  const id = ++nextId;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    toPrimary({ type: 'almoner:metrics', id });
  });
}

/** In a worker: answers the primary's requests for this worker's own metrics (see WorkerMetrics). */
export function answerMetricsRequests(own: () => Promise<MetricsSnapshot>): void {
  process.on('message', (m: unknown) => {
    if (!isMessage(m, 'almoner:worker-metrics')) return;
    void own().then((metrics) => toPrimary({ type: 'almoner:worker-metrics', id: m.id, metrics }));
  });
}
