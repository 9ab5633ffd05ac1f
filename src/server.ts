// The server process: config -> store (opening while the app loads) -> app -> listen, and a clean stop on SIGTERM/SIGINT.
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import type { Server as HttpsServer } from 'node:https';
import { setFlagsFromString } from 'node:v8';
import { deadlinesOf } from './http/connections.js';
import type { FastifyInstance } from 'fastify';
import { ConfigError, DEFAULT_DATABASE_URL, describeDatabase, IN_MEMORY, parseDatabaseUrl, portTaken, type Config } from './config.js';
import { loggable } from './loggable.js';
import { LOG_LINES_LOST, logOutput } from './log-output.js';
import { openRedis, reportRedis, Throttle } from './http/throttle.js';
import { openServerStore } from './store/open.js';
import { answerMetricsRequests, isMessage, metricsFromPrimary, whenPrimaryGone, workerIndex } from './cluster/ipc.js';
import { PERSONAL_FIELDS } from './donations/erasure.js';
import { osUser } from './store/audit.js';
import { hangupsBeforeStart, takeStopBeforeStart } from './early-signals.js';

// Belt and braces: nothing logs these, and if something ever did, pino would blank them.
// Top-level paths only: wildcard paths make pino walk every log line.
const REDACT = ['authorization', 'password', ...PERSONAL_FIELDS.map((f) => f.name)];

/**
 * The TLS certificate and key, checked to be a certificate and its own key: a pair that is not (a
 * key that does not match, the two files swapped) is a setting to fix, exit 2, not OpenSSL's bare
 * error and exit 1, which systemd would restart every two seconds.
 */
function readTls(tls: NonNullable<Config['tls']>): { cert: Buffer; key: Buffer } {
  // Each file named with its setting: Node's EISDIR names neither.
  const read = (name: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      const { code, message } = err as NodeJS.ErrnoException;
      throw new ConfigError(`cannot read ${name} (${path}): ${code === 'EISDIR' ? 'it is a folder, not a file' : message}`);
    }
  };
  const pair = { cert: read('TLS_CERT_FILE', tls.certFile), key: read('TLS_KEY_FILE', tls.keyFile) };
  try {
    createSecureContext(pair);
  } catch (err) {
    throw new ConfigError(
      `TLS_CERT_FILE (${tls.certFile}) and TLS_KEY_FILE (${tls.keyFile}) are not a PEM certificate and its private key: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return pair;
}

/** When a certificate served is valid, from and to; undefined for a form X509Certificate does not read (createSecureContext took it). */
function certificateDates({ cert }: { cert: Buffer }): { from: Date; to: Date } | undefined {
  try {
    const leaf = new X509Certificate(cert);
    return { from: new Date(leaf.validFrom), to: new Date(leaf.validTo) };
  } catch {
    return undefined;
  }
}

/**
 * Days before a certificate's end at which start-up and each reload warn of it: certbot renews at
 * 30 days left, so a certificate with 14 left has missed its renewal for a fortnight.
 */
const CERTIFICATE_WARNING_DAYS = 14;

/**
 * What to warn of a certificate that is not valid now (expired, or not yet valid), or soon will not
 * be, or nothing: it is served all the same, as the operator may have nothing newer, but clients
 * refuse it, and until 2026-11-30 nothing said so, at start or at a reload that read an old file
 * again (a review); nor that it was about to run out.
 */
function certificateWarning(dates: { from: Date; to: Date } | undefined, now = new Date()): string | undefined {
  if (!dates) return undefined;
  const { from, to } = dates;
  if (now > to) return `the TLS certificate expired on ${to.toISOString()}: clients refuse it; renew it, then send SIGHUP`;
  if (now < from) return `the TLS certificate is not valid until ${from.toISOString()}: clients refuse it until then (is the clock right?)`;
  const days = Math.floor((to.getTime() - now.getTime()) / 86_400_000);
  if (days < CERTIFICATE_WARNING_DAYS) return `the TLS certificate expires on ${to.toISOString()}, in ${days === 0 ? 'less than a day' : days === 1 ? '1 day' : `${days} days`}: renew it, then send SIGHUP`;
  return undefined;
}

/**
 * How far V8 lets its old generation grow past what was still live at the last full collection
 * before it collects again: by half. Left to itself V8 lets it grow up to fourfold, and under load
 * what reaches the old generation is mostly garbage (requests that were in flight when the young
 * generation was collected): the server's RSS climbed 3 to 5 MB a second under the benchmark's
 * loads, to 158 to 169 MB, with 15 MB live. With 50%: peaks of 145 and 146 MB, throughput within
 * the run-to-run noise. A `--heap-growing-percent` given to node on its command line wins.
 */
export const HEAP_GROWING_PERCENT = 50;

/** The server process, alone (WORKERS=1) or as one of the primary's workers (cluster/primary.ts). */
export async function serve(config: Config): Promise<void> {
  // Under WORKERS, the first worker says what one server would say (where the docs are, and so on);
  // the primary keeps the shared counters and metrics, and the METRICS_PORT.
  const worker = workerIndex();
  const first = worker === undefined || worker === 0;
  if (!process.execArgv.some((a) => /^--heap[-_]growing[-_]percent/.test(a))) setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  const https = config.tls && readTls(config.tls);
  // Each event-loop turn's log lines are written together at its end, in whole lines, so a busy
  // server makes one write call a turn, not one a request, and workers sharing stdout never split
  // each other's lines (see log-output.ts). Lines of the current turn are written before every
  // process.exit() below (a SIGKILL may lose them).
  // A log that cannot be written loses lines, never the service (log-output.ts): once it takes them again, how many were lost is logged.
  const lostLines = { warn: (_lost: number, _why: string) => {} };
  const logs = logOutput(1, { resumed: (lost, why) => lostLines.warn(lost, why) });
  const exit = (code: number) => {
    logs.flushSync();
    process.exit(code);
  };
  // Under WORKERS: a connection the primary hands on that this worker has no descriptor for is dropped, not lost with the worker's place in the rotation (cluster/lost-connections.ts).
  if (worker !== undefined) (await import('./cluster/lost-connections.js')).answerForLostConnections();
  // The HTTP stack (Fastify, the routes, their schemas) loads while the database opens: on
  // PostgreSQL the opening's round trips (connect, encoding, migrations, privileges, the instance
  // row) came after the loading, 60 to 90 ms of every start on the project's machine (issue 13).
  const opening = openServerStore(config.database, { instanceRefreshMs: config.instanceRefreshMs });
  opening.catch(() => {}); // awaited below: not an unhandled rejection meanwhile
  const [{ buildApp }, { default: Fastify }] = await Promise.all([import('./app.js'), import('fastify')]).catch(async (err: unknown) => {
    await opening.then((store) => store.close(), () => {});
    throw err;
  });
  const store = await opening;
  // Under WORKERS on SQLite, one writer for all: the primary writes every worker's creates (cluster/creates.ts).
  const primaryWrites = worker !== undefined && config.database.dialect === 'sqlite';
  if (primaryWrites) store.writeCreatesThrough(new (await import('./cluster/creates.js')).CreatesByPrimary());
  // Redis keeps the rate-limit counters shared by every instance; if it stops answering, each
  // instance falls back to its own counters rather than failing requests.
  const redis = config.redisUrl ? await openRedis(config.redisUrl) : undefined;
  const throttle = new Throttle({ createsPerSecond: config.createRateLimit, createsInFlight: config.createConcurrencyLimit, redis, cluster: worker !== undefined, keyPrefix: config.redisPrefix });
  const metrics = config.metrics.enabled ? new (await import('./http/metrics.js')).Metrics() : undefined;
  if (worker !== undefined) metrics?.joinCluster(metricsFromPrimary, answerMetricsRequests);
  const metricsPort = config.metrics.enabled && worker === undefined ? config.metrics.port : undefined;
  const app = await buildApp({
    store,
    throttle,
    metrics,
    serveMetrics: config.metrics.enabled && config.metrics.port === undefined,
    docs: config.docs && { contactEmail: config.apiContactEmail },
    logger: { level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' }, stream: logs },
    trustProxy: config.trustProxy,
    https,
    connections: { perAddress: config.connectionsPerAddress },
  });
  if (redis) reportRedis(redis, app.log);
  lostLines.warn = (lost, why) => app.log.warn({ lost_lines: lost, why }, LOG_LINES_LOST);
  // Under WORKERS, a primary killed (SIGKILL, the OOM killer) takes its workers with it: no connection
  // reaches one without it. Said in the log, for Node's cluster said nothing; the process then ends
  // with exit status 1 (bin/worker-preload.cjs), at once as before.
  if (worker !== undefined)
    whenPrimaryGone(() => {
      app.log.fatal('the primary process is gone: this worker stops');
      logs.flushSync();
    });

  let metricsApp: FastifyInstance | undefined;
  let stopping = false;
  /** Settles once the port below is open or has failed to open (listenFailed). */
  let listened: Promise<void> | undefined;
  let listenFailed = false;
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    // A stop while the port is being opened waits for it: under WORKERS, a server closed while the
    // primary had not yet answered its listen met Node's `Cannot read properties of null (reading
    // 'close')` when the answer came (a review, 2026-12-02). One that failed keeps its own exit status.
    await listened;
    if (listenFailed) return;
    app.log.info({ signal }, 'shutting down: finishing requests in flight');
    const deadline = setTimeout(() => {
      app.log.error('shutdown took longer than 10 s; exiting');
      exit(1);
    }, 10_000);
    deadline.unref();
    try {
      await app.close(); // stops accepting, waits for requests in flight, closes each connection once it has none (app.ts)
      await metricsApp?.close();
      await store.close();
      throttle.close();
      redis?.disconnect();
      exit(0);
    } catch (err) {
      app.log.error({ err: loggable(err) }, 'shutdown failed');
      exit(1);
    }
  };
  // Idempotency keys are remembered for 24 hours; forget expired ones now and every hour (under
  // WORKERS on SQLite, the primary does, as it writes the creates).
  if (first && !primaryWrites) store.purgeHourly(app.log);

  // on, not once: a signal sent again while stopping (npm passes on each it gets; a supervisor may
  // signal both npm and its group) would otherwise find Node's default action back and kill the
  // server mid-request. stop() acts on the first alone; the 10 s deadline bounds the rest.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const stopSent = takeStopBeforeStart(); // after its own handlers, in the same turn (early-signals.ts)
  if (worker !== undefined) process.on('message', (m: unknown) => isMessage(m, 'almoner:stop') && void stop('SIGTERM')); // the primary's
  // SIGHUP: read the certificate and key again (renewed, say, by certbot) and serve them to new
  // connections; open ones keep theirs. A file that cannot be read keeps the old pair.
  /** Says what the log and the metrics should of a certificate now served. */
  const serving = (pair: { cert: Buffer }) => {
    const dates = certificateDates(pair);
    if (dates) metrics?.tlsCertificateExpires(dates.to);
    const warning = certificateWarning(dates);
    if (warning) app.log.warn(warning);
  };
  if (https) serving(https);
  const reload = () => {
    if (!config.tls) return app.log.info('SIGHUP: no TLS certificate to reload');
    try {
      const renewed = readTls(config.tls);
      (app.server as unknown as HttpsServer).setSecureContext(renewed);
      app.log.info('SIGHUP: TLS certificate reloaded');
      serving(renewed);
    } catch (err) {
      app.log.error({ err: loggable(err) }, 'SIGHUP: TLS certificate not reloaded; the old one is still served');
    }
  };
  process.on('SIGHUP', reload);
  // One that came while the server started (`systemctl reload` just after a start) was kept from
  // ending the process by bin/almoner, which counts them from its first line: acted on now.
  if (hangupsBeforeStart() > 0) reload();
  // One that came while it started: stopped now, as after a start, before it listens.
  if (stopSent) return stop(stopSent);

  let address: string;
  let settle = () => {};
  listened = new Promise((resolve) => (settle = resolve));
  try {
    // METRICS_PORT: the metrics on a port of their own, for example one that only Prometheus can reach.
    if (metrics && metricsPort !== undefined) {
      metricsApp = Fastify({ logger: false, ...deadlinesOf() });
      await metricsApp.register((instance: FastifyInstance) => metrics.route(instance));
      await metricsApp.listen({ port: metricsPort, host: config.host });
    }
    address = await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    // A port already taken: close whatever did start, so the process ends instead of half-serving.
    // A SIGTERM meanwhile changes nothing: the exit status stays this failure's (it was 0, a review).
    stopping = true;
    listenFailed = true;
    await metricsApp?.close();
    await app.close();
    await store.close();
    throttle.close();
    redis?.disconnect();
    logs.flushSync(); // the process ends as soon as its message is said (cli/main.ts)
    // A HOST that names no address of this machine is a setting to fix (exit 2: systemd does not
    // restart it), not a moment's trouble like a port in use (exit 1).
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'EADDRNOTAVAIL') throw new ConfigError(`HOST ${JSON.stringify(config.host)} is not an address of this machine (${code}).`);
    if (code === 'EADDRINUSE') {
      // Said the same way alone and under WORKERS (whose workers' bind failure read "bind EADDRINUSE 127.0.0.1:8080").
      const taken = (err as { port?: number }).port;
      const setting = taken !== undefined && taken === metricsPort ? 'METRICS_PORT' : 'PORT';
      throw new Error(portTaken(setting, taken ?? (setting === 'PORT' ? config.port : metricsPort!), config.host));
    }
    throw err;
  } finally {
    settle(); // a stop that came meanwhile goes on, or not (listenFailed)
  }
  if (!first) return;
  process.stderr.write(`almoner: database ${describeDatabase(config.database)}${worker === undefined ? '' : `, ${config.workers} workers`}\n`);
  if (config.docs) process.stderr.write(`API reference (try both operations with a charity's credentials): ${address}/docs\n`);

  // A hint, never a failure: a count the database could not answer (a connection ended, a stop under
  // way) is no reason to end a server that now serves. Until 2026-12-02 it was: the error printed as
  // the command's own, exit status 1 once stopped, and under WORKERS the worker ended (a review).
  const charities = await store.count('charities').catch(() => undefined);
  if (charities === 0) process.stderr.write(firstCharityHint(config.database));
}

/**
 * How to sign the first charity up, on this server's database: a command run without its
 * DATABASE_URL (or as another user, such as root beside a service running as `almoner`) made a
 * database of its own, which the server never reads.
 */
function firstCharityHint(database: Config['database']): string {
  const command = 'bin/almoner charity create --name "Helping Hands" --email info@helpinghands.example';
  const url = describeDatabase(database);
  // No command reaches a server's in-memory database: the command it printed made one of its own, gone as it ended (a review).
  if (database.dialect === 'sqlite' && database.path === ':memory:') return `Almoner has no charities, and none can be added: ${IN_MEMORY}\n`;
  if (url === describeDatabase(parseDatabaseUrl(DEFAULT_DATABASE_URL))) return `Almoner has no charities yet. Create the first one with:\n  ${command}\n`;
  const hidden = database.dialect === 'postgres' && url !== database.url ? ' (with the password this server was given where *** is)' : '';
  return (
    `Almoner has no charities yet. Create the first one on this server's database, as the user it runs as (${osUser()})${hidden}:\n` +
    `  DATABASE_URL='${url}' ${command}\n`
  );
}
