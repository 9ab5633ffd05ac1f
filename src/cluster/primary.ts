// WORKERS > 1: `bin/almoner serve` becomes this primary process. It serves no request itself: it
// starts WORKERS copies of the server (node:cluster shares the port among them, handing each new
// connection to the next in turn), and keeps what they must share to act as one server:
// - the authentication and create counters (rate-limiter-flexible's cluster master), and every
//   worker's news of a failed authentication (see Throttle.mayBlock);
// - the metrics: any worker's GET /metrics (or the primary's own METRICS_PORT) sums every worker's.
// - on SQLite, the database's one writer: it writes every worker's creates (cluster/creates.ts).
// The workers write their log lines to the same stdout, in whole lines (log-output.ts). A worker
// that dies is replaced (unless they keep dying); SIGTERM or SIGINT stops every worker the way one
// process stops, SIGHUP reaches each. Started one at a time: the first migrates the database (on
// SQLite the primary already has).
import cluster, { type Worker } from 'node:cluster';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pino, type Logger } from 'pino';
import type * as Limiters from 'rate-limiter-flexible';
import { portTaken, type Config } from '../config.js';
import { LOG_LINES_LOST, logOutput } from '../log-output.js';
import type { Store } from '../store/store.js';
import { takeStopBeforeStart } from '../early-signals.js';
import { isMessage, toWorker, WORKER_INDEX_ENV, type MetricsAnswer } from './ipc.js';

/** More unexpected exits than this within the window, and the primary gives up (exit status 1) rather than restart forever. */
export const RESTARTS = { max: 5, windowMs: 60_000 };
/**
 * A replacement that does not start (its database away, as a PostgreSQL outage has it) is started
 * again after firstMs, then twice as long each time up to maxMs, while the other workers serve, as
 * systemd restarts one process; until 2026-11-30 the primary stopped them all at the first, and a
 * database's blip took the whole server down for good (a faults review). One that says a setting is
 * wrong (exit status 2) stops the primary, as no try can change that.
 */
export const REPLACEMENT_RETRY = { firstMs: 1000, maxMs: 30_000 };
/** Each worker has 10 s to finish its requests in flight (server.ts); past this, the primary kills what is left. */
const SHUTDOWN_DEADLINE_MS = 15_000;
/**
 * What every worker loads first (node --require), before Node's own start in it sends this primary
 * anything: how a worker ends, quietly, once this primary is gone (see the file). By the package's
 * name, as this code runs from a bundle (scripts/bundle.mjs).
 */
const WORKER_PRELOAD = join(dirname(createRequire(import.meta.url).resolve('almoner/package.json')), 'bin', 'worker-preload.cjs');

export async function runPrimary(config: Config): Promise<void> {
  const logs = logOutput(1, { resumed: (lost, why) => log.warn({ lost_lines: lost, why }, LOG_LINES_LOST) });
  const log = pino({ level: config.logLevel }, logs);
  // On SQLite, the one writer of every worker's creates (cluster/creates.ts): the database is opened,
  // and its schema brought up to date, before any worker starts.
  const store = config.database.dialect === 'sqlite' ? await openWriter(config, log) : undefined;
  let exiting = false;
  const exit = (code: number) => {
    if (exiting) return;
    exiting = true;
    void (store?.close() ?? Promise.resolve()).finally(() => {
      logs.flushSync();
      process.exit(code);
    });
  };

  cluster.setupPrimary({ execArgv: [...process.execArgv, '--require', WORKER_PRELOAD] });
  const workers = new Map<number, Worker>();
  const exits: number[] = [];
  let stopping = false;
  /** The exit status: a worker that fails to stop cleanly, or to start, or workers exiting too often, make it 1 (or the worker's own). */
  let status = 0;

  const listening = new WeakSet<Worker>();
  /** Whether a worker has listened yet: until one has, one that fails is the start's failure, a stop meanwhile or not. */
  let anyListened = false;
  /** Workers a SIGHUP came for before they listened: a process not yet past its start would die of it, so it is sent once they listen. */
  const hangupOwed = new WeakSet<Worker>();
  /** Forks worker `index`: settles when it listens, or fails if it exits first; after that, its exit is a stop's or a crash's. */
  const start = (index: number) =>
    new Promise<void>((resolve, reject) => {
      const worker = cluster.fork({ [WORKER_INDEX_ENV]: String(index) });
      workers.set(index, worker);
      worker.once('listening', () => {
        listening.add(worker);
        anyListened = true;
        if (hangupOwed.delete(worker)) worker.process.kill('SIGHUP'); // a SIGHUP that came while it started: its certificate may be older
        if (stopping) toWorker(worker, { type: 'almoner:stop' }); // asked to stop before it could hear it
        resolve();
      });
      worker.process.once('close', (code, signal) => {
        if (workers.get(index) === worker) workers.delete(index);
        if (stopping) {
          // A replacement still starting when the stop came (its database away, say) had nothing in flight: no failure (a review).
          if (code !== 0 && listening.has(worker)) status = 1;
          // The first failing to start (a port in use) says so by its status, as one process does, a stop meanwhile or not: it was 0 (a review, 2026-12-02).
          else if (code !== 0 && code !== null && !anyListened) status = code;
          if (workers.size === 0) exit(status);
          return;
        }
        if (!listening.has(worker)) return reject(Object.assign(new Error(`worker ${index} exited with ${signal ?? `status ${code}`}`), { status: code || 1 }));
        const now = Date.now();
        exits.push(now);
        while (exits[0]! <= now - RESTARTS.windowMs) exits.shift();
        if (exits.length > RESTARTS.max) {
          log.fatal({ worker: index, code, signal }, `a worker exited, the ${exits.length}th in ${RESTARTS.windowMs / 1000} s: stopping`);
          status = 1; // a failure, whatever the rest's exits: systemd's Restart=on-failure takes over
          return stop();
        }
        log.error({ worker: index, code, signal }, 'a worker exited; starting another in its place');
        replace(index, REPLACEMENT_RETRY.firstMs);
      });
    });

  /** Starts worker `index` (`what`: in place of one that exited, or one of the first), again and again (REPLACEMENT_RETRY) while it does not start. */
  const replace = (index: number, retryMs: number, what = 'its replacement'): void => {
    start(index).catch((err: Error & { status: number }) => {
      if (stopping) return;
      if (err.status === 2) {
        status = 2;
        log.fatal({ worker: index }, `${what} did not start (${err.message}): a setting is wrong; stopping`);
        return stop();
      }
      log.error({ worker: index }, `${what} did not start (${err.message}); starting another in ${retryMs / 1000} s`);
      setTimeout(() => stopping || replace(index, Math.min(2 * retryMs, REPLACEMENT_RETRY.maxMs), what), retryMs);
    });
  };

  const stop = (signal?: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: each worker finishes its requests in flight');
    if (workers.size === 0) return exit(status);
    for (const worker of workers.values()) toWorker(worker, { type: 'almoner:stop' });
    setTimeout(() => {
      log.error(`workers still running ${SHUTDOWN_DEADLINE_MS / 1000} s after the stop; killing them`);
      for (const worker of workers.values()) worker.process.kill('SIGKILL');
      exit(1);
    }, SHUTDOWN_DEADLINE_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const stopSent = takeStopBeforeStart(); // after its own handlers, in the same turn (early-signals.ts)
  // One that came while it opened the database (SQLite): no worker is started.
  if (stopSent) return stop(stopSent);
  // A SIGHUP before this one came is kept from ending the process by bin/almoner (server.ts's reload): the workers then
  // starting read the certificate as they start.
  process.on('SIGHUP', () => {
    for (const worker of workers.values()) {
      if (listening.has(worker)) worker.process.kill('SIGHUP');
      else hangupOwed.add(worker);
    }
  });

  // Shared state, before any worker: a worker's counters announce themselves as it starts. With Redis
  // too, whose counters the workers fall back to these while it does not answer.
  // The module itself, not the package's index, which loads every backend it supports (see http/throttle.ts).
  const { RateLimiterClusterMaster }: typeof Limiters = createRequire(import.meta.url)('rate-limiter-flexible/lib/RateLimiterCluster.js');
  new RateLimiterClusterMaster();
  cluster.on('message', (from, m: unknown) => {
    if (isMessage(m, 'almoner:auth-failure')) for (const worker of workers.values()) if (worker !== from) toWorker(worker, m);
  });
  const metrics = config.metrics.enabled ? shareMetrics() : undefined;

  // Before any worker: a taken port says so before the workers say where they listen.
  if (metrics && config.metrics.enabled && config.metrics.port !== undefined) {
    try {
      await serveMetrics(metrics, config.host, config.metrics.port);
    } catch (err) {
      const message = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? portTaken('METRICS_PORT', config.metrics.port, config.host) : (err as Error).message;
      log.fatal(`the metrics port did not open (${message}): stopping`);
      process.stderr.write(`almoner: ${message}\n`);
      return exit(1);
    }
  }

  // The first alone: it applies any pending migration, and a bad setting or a taken port stops
  // everything here, with the worker's own message on stderr and its exit status.
  try {
    await start(0);
  } catch (err) {
    log.fatal(`the first worker did not start (${(err as Error).message}): stopping`); // its own message, if it had one, is on stderr
    return exit((err as { status: number }).status);
  }
  if (stopping) return;
  // The rest, once the first serves: one that does not start (a connection refused or ended as it
  // opened the database) is tried again as a replacement is, while the others serve. Until
  // 2026-12-02 the primary stopped them all, the first worker's requests in flight included (a review).
  for (let index = 1; index < config.workers; index++) replace(index, REPLACEMENT_RETRY.firstMs, `worker ${index}`);
}

/** The database, opened as a server opens it, and the primary answering the workers' creates and purging what has expired. */
async function openWriter(config: Config, log: Logger): Promise<Store> {
  const [{ openServerStore }, { writeCreatesForWorkers }] = await Promise.all([import('../store/open.js'), import('./creates.js')]);
  const store = await openServerStore(config.database);
  writeCreatesForWorkers(store);
  store.purgeHourly(log);
  return store;
}

/**
 * Every worker's metrics summed, with what gone workers counted (cluster/metrics.ts): for a worker's
 * GET /metrics, which asks here, and for METRICS_PORT, served here.
 */
function shareMetrics(): () => Promise<string> {
  // Loaded at the first scrape: before it, no total has been read that a gone worker could lower.
  let sum: Promise<() => Promise<string>> | undefined;
  const gather = async () => (await (sum ??= import('./metrics.js').then((m) => m.sumWorkersMetrics())))();
  cluster.on('message', (from, m: unknown) => {
    if (!isMessage(m, 'almoner:metrics')) return;
    const answer = (a: Omit<MetricsAnswer, 'type' | 'id'>) => toWorker(from, { type: 'almoner:metrics', id: m.id, ...a });
    gather().then(
      (text) => answer({ text }),
      (err: Error) => answer({ error: err.message }),
    );
  });
  return gather;
}

async function serveMetrics(gather: () => Promise<string>, host: string, port: number): Promise<void> {
  const [{ default: Fastify }, { metricsRoute }, { deadlinesOf }] = await Promise.all([import('fastify'), import('../http/metrics.js'), import('../http/connections.js')]);
  const app = Fastify({ logger: false, ...deadlinesOf() });
  await app.register(metricsRoute(gather));
  await app.listen({ port, host });
}
