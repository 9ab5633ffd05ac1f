// `npm run bench` (issues 5 and 13): Almoner side by side with the machine's own limit, in one run.
//
// The ceiling is a bare node:http server answering a fixed small JSON body. Against it, and then
// against `bin/almoner serve` on a fresh SQLite file (and on a fresh PostgreSQL database when
// DATABASE_URL names a PostgreSQL server), the same load generator drives the same number of
// connections for the same time: POST /api/v1/me, then POST /api/v1/donation/create with varied
// valid donations, without an Idempotency-Key and then each with a fresh one. Before Almoner, the
// same three loads against the floor (bench/floor.mjs: the stack alone, doing about the least the
// interface asks), so that a goal the stack itself cannot reach shows as such, and one it can too.
// Each run is measured in slices (BENCH_SLICE, 1 s), each beside a slice of the same length against
// the ceiling, as this machine's speed moves within seconds; a fresh ceiling for the floor and for
// each backend. A run's latency is measured apart, in one continuous load before its slices
// (BENCH_LATENCY, 5 s): each slice begins with all its connections opening at once, and those first
// requests' waits made the slices' p99 three to five times that of a continuous load on the same server.
// It reports throughput as a ratio to the ceiling measured beside it, latency, non-2xx answers,
// the server's memory, its start-up time, and whether the database holds exactly what was
// acknowledged; then prints a table and writes bench/results/latest.json (latest-workers-N.json
// with BENCH_WORKERS=N).
//
// Settings: BENCH_CONNECTIONS (64), BENCH_DURATION (10 s per run, rounded to an even number of slices), BENCH_WARMUP (2 s, not
// counted), BENCH_LATENCY (5 s; 0 reads the latency off the slices), BENCH_SLICE (1 s), BENCH_TOOL (wrk when on the PATH, else autocannon), BENCH_WRK_THREADS (1),
// BENCH_LOG_LEVELS (info,warn: the server's LOG_LEVELs, each on a fresh database), BENCH_WORKERS
// (1: the server's WORKERS; with more, its memory and CPU are those of all its processes summed).
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { DEFAULT_CREATES_IN_FLIGHT } from '../src/config.js';
import { chooseLoader, mergeLoads, type LoadResult, type LoadSpec, type Loader } from './load.js';
import {
  BENCH_LOG_LEVELS, BENCH_WORKERS, cleanUp, createCharity, makeTempDir, memoryKb, Monitor, postgresDatabase, ROOT, sqliteDatabase, startAlmoner, startCeiling, startFloor, stop,
  summariseLog, waitUntilIdle, type BenchDatabase, type LogSummary, type Running,
} from './servers.js';

function intSetting(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number of at least ${min}, not ${raw}`);
  return value;
}

const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 64, 1);
const SECONDS = intSetting('BENCH_DURATION', 10, 1);
const WARMUP = intSetting('BENCH_WARMUP', 2, 0);
const SLICE = intSetting('BENCH_SLICE', 1, 1);
const LATENCY = intSetting('BENCH_LATENCY', 5, 0);
/** Slices per run: an even number, so that the pairs' order (ceiling first, then second) balances out. */
const SLICES = Math.max(2, 2 * Math.round(SECONDS / SLICE / 2));
const MB = 1024; // kB per MB, as /proc reports kB
const START_SAMPLES = 3;

interface Measured {
  /** The slices, as one load: the run's throughput. */
  load: LoadResult;
  warmup: LoadResult | null;
  /** The continuous load its latency is read from (BENCH_LATENCY s), or null to read it off the slices. */
  latency: LoadResult | null;
  /** The ceiling's slices, taken in turn with this run's, as one load. */
  ceiling: LoadResult;
  /** Each slice's req/s, and that of the ceiling's slice beside it, in the order taken. */
  slicesRps: number[];
  ceilingSlicesRps: number[];
  rssPeakMb: number;
  /** The server's peak VmRSS in each of its slices. */
  rssMbEachSlice: number[];
  /** CPU time over wall time, in cores (1.0 = one core busy all the time). */
  serverCpu: number;
  loaderCpu: number;
}

interface Run extends Measured {
  name: string;
  /** req/s over the ceiling's req/s in the slices taken in turn with this run's. */
  ratio: number;
}

interface PhaseCheck {
  acknowledged: number;
  stored: number;
  duplicates: number;
  /** Requests written but unanswered when the load generator stopped at the deadline. */
  unansweredAtEnd: number;
  ok: boolean;
}

/** The database check of one create run: its warm-up and measured phases, told apart by their markers. */
interface CreateCheck {
  warmup: PhaseCheck | null;
  measured: PhaseCheck;
}

interface BackendResult {
  backend: BenchDatabase['backend'];
  /** The server's LOG_LEVEL in these runs. */
  logLevel: string;
  describe: string;
  /** Spawn to the first 200 from GET /health: the median of START_SAMPLES starts, and each of them. */
  startMs: number;
  startSamplesMs: number[];
  memoryMb: { idle: number; afterMe: number; afterCreate: number; peak: number; afterCreateAnon: number; afterCreateFile: number; afterCreateShmem: number; afterCreatePss: number };
  /** How long the server kept working after the create load had stopped, before it was stopped. */
  settleMs: number;
  shutdown: { code: number | null; signal: string | null };
  log: LogSummary;
  me: Run;
  create: Run;
  keyed: Run;
  check: CreatesCheck & {
    /** 200s for creates that the server logged (warm-up and measured): answers it finished writing. */
    serverLogged200: number | null;
  };
}

/** Markers of the create runs' donations: warm-up and measured, without and with a key. */
const MARKERS = { create: { warmup: 'W', measured: 'M' }, keyed: { warmup: 'V', measured: 'K' } } as const;

/** The ceiling server, running for the whole benchmark, and the Authorization its requests carry (it reads none). */
interface Ceiling extends Running {
  auth: string;
}

/** Every measured request of a run: its latency load's and its slices'. */
const measuredLoad = (m: Measured): LoadResult => (m.latency ? mergeLoads([m.latency, m.load]) : m.load);

/** The load a run's p50 and p99 are read from. */
const latencyLoad = (m: Measured): LoadResult => m.latency ?? m.load;

/** A load of `seconds` against the ceiling: the same requests as /me. */
const loadCeiling = (loader: Loader, ceiling: Ceiling, seconds: number): Promise<LoadResult> =>
  loader.run({ url: ceiling.url, scenario: 'me', connections: CONNECTIONS, auth: ceiling.auth, seconds, marker: 'C' }, () => {});

/**
 * A warm-up (not counted), a continuous load of LATENCY seconds for the latency (the first requests
 * of a load, on connections all opening at once, wait longest), then the measured load in SLICES
 * slices of SLICE seconds, each beside a slice of the same length against the ceiling (about
 * SECONDS of each in all), watching the server's memory and both CPUs in its own slices. This machine's speed moves by half and back within a minute (its
 * ceiling answered 25,700 to 70,200 req/s in 40 one-second runs on 2026-11-27), so a ratio compares
 * only moments close together; the ceiling goes first in every other pair, so that a machine
 * speeding up or slowing down through the run weighs on both alike.
 */
async function measure(loader: Loader, serverPid: number, spec: Omit<LoadSpec, 'seconds' | 'marker'>, ceiling: Ceiling): Promise<Measured> {
  const markers = MARKERS[spec.keyed ? 'keyed' : 'create'];
  const warmup = WARMUP > 0 ? await loader.run({ ...spec, seconds: WARMUP, marker: markers.warmup }, () => {}) : null;
  // Its marker one of the measured ones (`M-L-…`): its donations are checked with the slices'.
  const latency = LATENCY > 0 ? await loader.run({ ...spec, seconds: LATENCY, marker: `${markers.measured}-L` }, () => {}) : null;
  const loads: LoadResult[] = [];
  const ceilingLoads: LoadResult[] = [];
  let serverCpuSeconds = 0;
  const generator = { cpuSeconds: 0, wallSeconds: 0 };
  const rssPeakKbEachSlice: number[] = [];
  const measureCeiling = async () => {
    ceilingLoads.push(await loadCeiling(loader, ceiling, SLICE));
  };
  const measureServer = async (slice: number) => {
    const monitor = new Monitor(serverPid);
    let loaderPid = 0;
    // Each slice's marker its own (`M-3-…`), so that no two requests of the run share one.
    loads.push(await loader.run({ ...spec, seconds: SLICE, marker: `${markers.measured}-${slice}` }, (pid) => monitor.watch((loaderPid = pid))));
    monitor.stop();
    serverCpuSeconds += monitor.cpuUse(serverPid).cpuSeconds;
    const use = monitor.cpuUse(loaderPid);
    generator.cpuSeconds += use.cpuSeconds;
    generator.wallSeconds += use.wallSeconds;
    rssPeakKbEachSlice.push(monitor.peakRssKb);
  };
  for (let slice = 0; slice < SLICES; slice++) {
    if (slice % 2 === 0) {
      await measureCeiling();
      await measureServer(slice);
    } else {
      await measureServer(slice);
      await measureCeiling();
    }
  }
  return {
    load: mergeLoads(loads),
    warmup,
    latency,
    ceiling: mergeLoads(ceilingLoads),
    slicesRps: loads.map((l) => l.rps),
    ceilingSlicesRps: ceilingLoads.map((l) => l.rps),
    rssPeakMb: Math.max(...rssPeakKbEachSlice) / MB,
    rssMbEachSlice: rssPeakKbEachSlice.map((kb) => Math.round(kb / MB)),
    // Over the load's own seconds: the monitor's window also holds the load generator's start.
    serverCpu: serverCpuSeconds / loads.reduce((n, l) => n + l.seconds, 0),
    loaderCpu: generator.cpuSeconds / generator.wallSeconds,
  };
}

function checkPhase(load: LoadResult, counts: { rows: number; distinct: number }): PhaseCheck {
  const unansweredAtEnd = Math.max(0, (load.sent ?? 0) - load.responses);
  // Every acknowledged donation stored once; beyond those, at most the requests the load generator
  // abandoned at the deadline (the server may well have committed them after it left).
  const ok = counts.distinct === counts.rows && counts.rows >= load.ok && counts.rows <= load.ok + unansweredAtEnd;
  return { acknowledged: load.ok, stored: counts.rows, duplicates: counts.rows - counts.distinct, unansweredAtEnd, ok };
}

/** What the database holds after a server's two create runs (Almoner's or the floor's). */
interface CreatesCheck {
  create: CreateCheck;
  keyed: CreateCheck;
  unmarkedRows: number;
  /** Idempotency keys stored: one per donation of the keyed run, none for the other. */
  idempotencyKeys: number;
  keyedStored: number;
  /** Every run's donations stored once, nothing else stored, a key for each keyed donation and no other. */
  ok: boolean;
}

/** Counts what `db` holds of the create runs (by their markers) and checks it against what was acknowledged. */
async function checkCreates(db: BenchDatabase, create: Measured, keyed: Measured): Promise<CreatesCheck & { allRows: number }> {
  const checkRun = async (m: Measured, markers: { warmup: string; measured: string }) => {
    const measuredCounts = await db.count(markers.measured);
    const warmupCounts = m.warmup ? await db.count(markers.warmup) : { rows: 0, distinct: 0, all: measuredCounts.all, keys: measuredCounts.keys };
    return {
      check: { measured: checkPhase(measuredLoad(m), measuredCounts), warmup: m.warmup ? checkPhase(m.warmup, warmupCounts) : null },
      rows: measuredCounts.rows + warmupCounts.rows,
      all: measuredCounts.all,
      keys: measuredCounts.keys,
    };
  };
  const unkeyedRun = await checkRun(create, MARKERS.create);
  const keyedRun = await checkRun(keyed, MARKERS.keyed);
  const unmarkedRows = unkeyedRun.all - unkeyedRun.rows - keyedRun.rows;
  const phasesOk = [unkeyedRun.check, keyedRun.check].every((c) => c.measured.ok && (c.warmup?.ok ?? true));
  return {
    create: unkeyedRun.check,
    keyed: keyedRun.check,
    unmarkedRows,
    idempotencyKeys: unkeyedRun.keys,
    keyedStored: keyedRun.rows,
    ok: phasesOk && unmarkedRows === 0 && unkeyedRun.keys === keyedRun.rows,
    allRows: unkeyedRun.all,
  };
}

async function benchBackend(db: BenchDatabase, describe: string, loader: Loader, dir: string, logLevel: string, ceiling: Ceiling): Promise<BackendResult> {
  const { username, password } = await createCharity(db.url);
  const auth = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const startSamplesMs: number[] = [];
  for (let i = 1; i < START_SAMPLES; i++) {
    const trial = await startAlmoner(db.url, dir, `${db.backend.toLowerCase()}-${logLevel}-start-${i}`, logLevel);
    startSamplesMs.push(trial.startMs);
    await stop(trial.child);
  }
  const server = await startAlmoner(db.url, dir, `${db.backend.toLowerCase()}-${logLevel}`, logLevel);
  startSamplesMs.push(server.startMs);
  const idle = memoryKb(server.pid).rss;
  const spec = { url: server.url, connections: CONNECTIONS, auth };
  const me = await measure(loader, server.pid, { ...spec, scenario: 'me' }, ceiling);
  const afterMe = memoryKb(server.pid).rss;
  const create = await measure(loader, server.pid, { ...spec, scenario: 'create' }, ceiling);
  const keyed = await measure(loader, server.pid, { ...spec, scenario: 'create', keyed: true }, ceiling);
  // Requests the load generator abandoned at the deadline may still be in the server's hands: let
  // it finish them, then SIGTERM (it closes the database cleanly), so the count below is final.
  const settleMs = await waitUntilIdle(server.pid);
  const afterCreate = memoryKb(server.pid);
  const shutdown = await stop(server.child);
  const log = await summariseLog(server.logPath);

  const { allRows, ...stored } = await checkCreates(db, create, keyed);
  // The server's own count of the 200s it finished writing lies between what the client read and
  // what is stored (a request whose client has gone is stored, but its answer is never finished).
  const serverLogged200 = log.responses['POST /api/v1/donation/create 200'] ?? null;
  const acknowledged = [create, keyed].reduce((n, m) => n + measuredLoad(m).ok + (m.warmup?.ok ?? 0), 0);
  const loggedOk = serverLogged200 === null || (serverLogged200 >= acknowledged && serverLogged200 <= allRows);
  const run = (name: string, m: Measured): Run => ({ name: `${name}, ${db.backend}, ${logLevel}`, ratio: m.load.rps / m.ceiling.rps, ...m });
  return {
    backend: db.backend,
    logLevel,
    describe,
    startMs: [...startSamplesMs].sort((a, b) => a - b)[Math.floor(startSamplesMs.length / 2)]!,
    startSamplesMs,
    memoryMb: {
      idle: idle / MB,
      afterMe: afterMe / MB,
      afterCreate: afterCreate.rss / MB,
      peak: afterCreate.hwm / MB,
      afterCreateAnon: afterCreate.anon / MB,
      afterCreateFile: afterCreate.file / MB,
      afterCreateShmem: afterCreate.shmem / MB,
      afterCreatePss: afterCreate.pss / MB,
    },
    settleMs,
    shutdown,
    log,
    me: run('/me', me),
    create: run('create', create),
    keyed: run('keyed create', keyed),
    check: { ...stored, serverLogged200, ok: stored.ok && loggedOk },
  };
}

interface FloorResult {
  me: Run;
  create: Run;
  keyed: Run;
  check: CreatesCheck;
}

/** The floor's /me and creates, without and with a key, on a SQLite file of its own; its creates checked like Almoner's. */
async function benchFloor(loader: Loader, dir: string, ceiling: Ceiling): Promise<FloorResult> {
  const db = sqliteDatabase(dir, 'floor');
  const charity = await createCharity(db.url); // migrates the file: the floor writes Almoner's own tables
  const auth = `Basic ${Buffer.from(`${charity.username}:${charity.password}`).toString('base64')}`;
  const server = await startFloor(db, charity);
  const spec = { url: server.url, connections: CONNECTIONS, auth, scenario: 'create' as const };
  const me = await measure(loader, server.pid, { ...spec, scenario: 'me' }, ceiling);
  const create = await measure(loader, server.pid, spec, ceiling);
  const keyed = await measure(loader, server.pid, { ...spec, keyed: true }, ceiling);
  await waitUntilIdle(server.pid);
  const shutdown = await stop(server.child);
  const { allRows: _, ...stored } = await checkCreates(db, create, keyed);
  const run = (name: string, m: Measured): Run => ({ name: `floor: ${name}, SQLite`, ratio: m.load.rps / m.ceiling.rps, ...m });
  return {
    me: run('/me', me),
    create: run('create', create),
    keyed: run('keyed create', keyed),
    check: { ...stored, ok: stored.ok && shutdown.code === 0 }, // as Almoner's, and a clean stop
  };
}

// ---- Describing the machine and the setup --------------------------------------------------------

function filesystemOf(path: string): string {
  let best = { mount: '', type: 'unknown' };
  for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
    const [, mount, type] = line.split(' ');
    if (mount && type && (path === mount || path.startsWith(mount.endsWith('/') ? mount : `${mount}/`)) && mount.length >= best.mount.length) {
      best = { mount, type };
    }
  }
  return best.type;
}

/** The synchronous pragma the compiled server sets, read from dist/ so the report cannot claim FULL wrongly. */
function sqliteSynchronous(): string {
  const dist = join(ROOT, 'dist');
  const found = new Set<string>();
  for (const file of readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'))) {
    for (const m of readFileSync(join(dist, file), 'utf8').matchAll(/pragma\(\s*['"`]synchronous\s*=\s*(\w+)/gi)) found.add(m[1]!.toUpperCase());
  }
  return found.size ? [...found].join('/') : 'unknown (no pragma found in dist/)';
}

/** Whether some file in src/ is newer than everything in dist/: then bin/almoner runs old code. */
function distIsStale(): boolean {
  const newest = (dir: string) =>
    Math.max(...readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((f) => statSync(join(dir, f)).mtimeMs));
  return newest(join(ROOT, 'src')) > newest(join(ROOT, 'dist'));
}

async function postgresVersion(db: BenchDatabase): Promise<string> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? '?';
  } finally {
    await client.end();
  }
}

// ---- Reporting ---------------------------------------------------------------------------------

interface Goal {
  goal: string;
  target: string;
  measured: number | null;
  holds: boolean | null;
  note?: string;
}

function goal(name: string, measured: number | null, op: '>=' | '<=', target: number, unit = ''): Goal {
  const holds = measured === null || Number.isNaN(measured) ? null : op === '>=' ? measured >= target : measured <= target;
  return { goal: name, target: `${op === '>=' ? '≥' : '≤'} ${target}${unit}`, measured, holds };
}

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-GB', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '-';

function table(rows: string[][], rightAligned: (i: number) => boolean): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (rightAligned(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
}

function describeCheck(c: PhaseCheck): string {
  const extra = c.stored - c.acknowledged;
  return (
    `${fmt(c.acknowledged)} acknowledged, ${fmt(c.stored)} stored, ${c.duplicates} duplicate(s)` +
    (extra ? `, ${extra} stored for requests cut off unanswered at the deadline (${c.unansweredAtEnd} were)` : '') +
    `: ${c.ok ? 'OK' : 'FAIL'}`
  );
}

function describeLogged(b: BackendResult): string {
  const logged = b.check.serverLogged200;
  if (logged === null) return 'no create lines in the log, not checked';
  const acknowledged = [b.create, b.keyed].reduce((n, r) => n + measuredLoad(r).ok + (r.warmup?.ok ?? 0), 0);
  const stored = [b.check.create, b.check.keyed].reduce((n, c) => n + c.measured.stored + (c.warmup?.stored ?? 0), b.check.unmarkedRows);
  const ok = logged >= acknowledged && logged <= stored;
  return (
    `${fmt(logged)} create 200s logged, between the ${fmt(acknowledged)} acknowledged and the ${fmt(stored)} stored: ${ok ? 'OK' : 'FAIL'}` +
    (stored > logged ? ` (${fmt(stored - logged)} stored donations have no log line: their client had gone before the answer)` : '')
  );
}

// ---- Main --------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const loader = chooseLoader();
  const dir = makeTempDir();
  const pgUrl = /^postgres(ql)?:\/\//.test(process.env.DATABASE_URL ?? '') ? process.env.DATABASE_URL! : null;
  const cpus = os.cpus();
  const machine = {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    /** Other work on the machine distorts every figure; this shows whether there was any. */
    loadAverageAtStart: Math.round(os.loadavg()[0]! * 100) / 100,
  };
  const sqliteSync = sqliteSynchronous();
  const stale = distIsStale();
  if (stale) process.stderr.write('bench: WARNING: src/ has changed since dist/ was built; run `npm run build` to measure the current code\n');
  const startedAt = new Date();
  const blocks = (pgUrl ? 2 : 1) * BENCH_LOG_LEVELS.length;
  const total = (blocks + 1) * WARMUP + (blocks * 3 + 3) * (WARMUP + LATENCY + 2 * SLICES * SLICE); // a ceiling warmed up for each block; Almoner's runs and the floor's, each with the ceiling's slices
  process.stderr.write(
    `bench: ${loader.tool} (${loader.describe}), ${CONNECTIONS} connections, ${SLICES} slices of ${SLICE} s per run, each beside one of the ceiling's; about ${total + 10 * (blocks + 1)} s in all, and a load generator's start per slice\n`,
  );

  // The ceiling: the same requests as /me, to a server that does nothing but answer. Every run of
  // Almoner's (and of the floor's) is measured in slices taken in turn with slices against it
  // (measure()). A fresh one, warmed up, for the floor and for each backend: one node process can
  // lose a third of its speed partway through a benchmark while the others keep theirs
  // (docs/performance.md), and then every ratio after it reads high.
  const warmCeiling = async (): Promise<Ceiling> => {
    const fresh: Ceiling = { ...(await startCeiling()), auth: 'Basic YmVuY2g6YmVuY2g=' };
    if (WARMUP > 0) await loadCeiling(loader, fresh, WARMUP);
    return fresh;
  };
  let ceiling = await warmCeiling();
  const floor = await benchFloor(loader, dir, ceiling);
  process.stderr.write(`bench: the floor done\n`);

  // Each backend at each log level, on a database of its own.
  const sqliteDescribe = `fresh file in ${os.tmpdir()} (${filesystemOf(os.tmpdir())}), WAL, synchronous=${sqliteSync} (as dist/ sets it)`;
  const plan: Array<(ceiling: Ceiling) => Promise<BackendResult>> = BENCH_LOG_LEVELS.map(
    (level) => (ceiling) => benchBackend(sqliteDatabase(dir, `almoner-${level}`), sqliteDescribe, loader, dir, level, ceiling),
  );
  if (pgUrl) {
    const where = new URL(pgUrl);
    let describe: string | undefined; // the same server for every level: asked once
    for (const level of BENCH_LOG_LEVELS) {
      plan.push(async (ceiling) => {
        const db = await postgresDatabase(pgUrl);
        describe ??= `server ${await postgresVersion(db)} at ${where.hostname}:${where.port || 5432}, fresh database, DATABASE_POOL_MAX=${process.env.DATABASE_POOL_MAX ?? '10 (default)'}`;
        return benchBackend(db, describe, loader, dir, level, ceiling);
      });
    }
  }
  const backends: BackendResult[] = [];
  for (const bench of plan) {
    await stop(ceiling.child);
    ceiling = await warmCeiling();
    const b = await bench(ceiling);
    backends.push(b);
    process.stderr.write(`bench: ${b.backend} at ${b.logLevel} done\n`);
  }
  await stop(ceiling.child);

  // ---- Verdicts
  const runs: Run[] = [floor.me, floor.create, floor.keyed, ...backends.flatMap((b) => [b.me, b.create, b.keyed])];
  // The machine's speed over the whole benchmark, as the ceiling's slices saw it.
  const ceilingAll = mergeLoads(runs.map((r) => r.ceiling));
  const ceilingRps = ceilingAll.rps;
  const ceilingRange = [Math.min(...runs.map((r) => r.ceiling.rps)), Math.max(...runs.map((r) => r.ceiling.rps))] as const;
  const ceilingDrift = (ceilingRange[1] - ceilingRange[0]) / ceilingRps;
  // How far a ratio may be off: twice the standard error of a ratio of two sums, over the pairs
  // (each slice's req/s a, the ceiling's beside it c: r = Σa / Σc, its error from the a - r·c).
  const noise = (r: Run) => {
    const [a, c] = [r.slicesRps, r.ceilingSlicesRps];
    const n = a.length;
    const ratio = a.reduce((x, y) => x + y, 0) / c.reduce((x, y) => x + y, 0);
    const meanC = c.reduce((x, y) => x + y, 0) / n;
    return n < 2 ? NaN : (2 * Math.sqrt(a.reduce((sum, ai, i) => sum + (ai - ratio * c[i]!) ** 2, 0) / (n * (n - 1)))) / meanC;
  };
  /** A ratio's goal, its noise beside it, and whether the target lies within that noise (a verdict the next run may turn). */
  const ratioGoal = (name: string, r: Run | null, target: number, floorRun?: Run): Goal => {
    const g = goal(name, r ? r.ratio : null, '>=', target);
    if (!r) return { ...g, note: 'set DATABASE_URL=postgres://… to measure it' };
    const within = Math.abs(r.ratio - target) <= noise(r) ? '; the target is within it' : '';
    return { ...g, note: `± ${fmt(noise(r), 3)}${within}${floorRun ? `; the floor ${fmt(floorRun.ratio, 3)}` : ''}` };
  };
  // Issue 13's goals, at each log level.
  const goals: Goal[] = BENCH_LOG_LEVELS.flatMap((level): Goal[] => {
    const at = backends.filter((b) => b.logLevel === level);
    const sqliteResult = at.find((b) => b.backend === 'SQLite')!;
    const pgResult = at.find((b) => b.backend === 'PostgreSQL') ?? null;
    const sqliteCreate = sqliteResult.create;
    const l = `LOG_LEVEL=${level}`;
    return [
      ...at.map((b) => ratioGoal(`/me, ${b.backend}, ${l}: ratio to the ceiling`, b.me, 0.75, floor.me)),
      {
        ...ratioGoal(`create, SQLite (synchronous=FULL), ${l}: ratio to the ceiling`, sqliteCreate, 0.45, floor.create),
        // The goal is for full durability: a faster figure without it does not count.
        ...(sqliteSync === 'FULL' ? {} : { holds: false, note: `synchronous=${sqliteSync}, not FULL` }),
      },
      ratioGoal(`keyed create (a fresh Idempotency-Key each), SQLite, ${l}: ratio to the ceiling`, sqliteResult.keyed, 0.35, floor.keyed),
      ratioGoal(`create, PostgreSQL, ${l}: ratio to the ceiling`, pgResult?.create ?? null, 0.15),
      // The floor's own p99 beside it: on a slow hour of the machine the stack alone misses it too.
      { ...goal(`p99 latency of SQLite creates at ${CONNECTIONS} connections, ${l}`, latencyLoad(sqliteCreate).p99Ms, '<=', 10, ' ms'), note: `the floor ${fmt(latencyLoad(floor.create).p99Ms, 1)} ms` },
      goal(`server RSS under load, worst peak (VmHWM), ${l}`, Math.max(...at.map((b) => b.memoryMb.peak)), '<=', 150, ' MB'),
      goal(`process start to first answered request, median of ${START_SAMPLES}, worst backend, ${l}`, Math.max(...at.map((b) => b.startMs)), '<=', 500, ' ms'),
    ];
  });
  const measuredRuns = runs.map((r) => ({ r, all: measuredLoad(r) }));
  const failures = [
    ...measuredRuns.filter(({ all }) => all.non2xx > 0).map(({ r, all }) => `${r.name}: ${fmt(all.non2xx)} non-2xx answers ${JSON.stringify(all.statuses ?? {})}`),
    ...measuredRuns.filter(({ all }) => all.errors > 0).map(({ r, all }) => `${r.name}: ${fmt(all.errors)} connection errors or timeouts`),
    ...runs.filter((r) => r.ceiling.non2xx + r.ceiling.errors > 0).map((r) => `the ceiling beside ${r.name}: ${fmt(r.ceiling.non2xx)} non-2xx answers, ${fmt(r.ceiling.errors)} errors`),
    ...backends.filter((b) => !b.check.ok).map((b) => `${b.backend} at ${b.logLevel}: the database does not hold exactly the acknowledged donations`),
    ...(floor.check.ok ? [] : ['the floor: its database does not hold exactly the acknowledged donations, so its figures mean nothing']),
    ...backends.filter((b) => b.shutdown.code !== 0).map((b) => `${b.backend} at ${b.logLevel}: the server did not stop cleanly on SIGTERM (${b.shutdown.code ?? b.shutdown.signal})`),
  ];

  // ---- The table
  const loaderBound = runs.filter((r) => r.loaderCpu >= 0.9).map((r) => r.name);
  const header = ['run', 'req/s', 'ceiling req/s', 'ratio', '±', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'RSS peak MB', 'server CPU', 'loader CPU'];
  const lines = runs.map((r) => {
    const [all, latency] = [measuredLoad(r), latencyLoad(r)];
    return [
      r.name, fmt(r.load.rps), fmt(r.ceiling.rps), fmt(r.ratio, 3), fmt(noise(r), 3), fmt(latency.p50Ms, 2), fmt(latency.p99Ms, 2),
      all.non2xx ? `${fmt(all.non2xx)} FAIL` : '0', fmt(all.errors), fmt(r.rssPeakMb), fmt(r.serverCpu, 2), fmt(r.loaderCpu, 2),
    ];
  });
  const out: string[] = [
    `Almoner benchmark, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    `machine     ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, node ${machine.node}; load average ${machine.loadAverageAtStart} at the start${machine.loadAverageAtStart > 0.5 ? ' (NOT idle: other work distorts these figures)' : ''}`,
    `load        ${loader.tool} ${loader.version} (${loader.describe}); ${CONNECTIONS} connections; ${SLICES} slices of ${SLICE} s per run, each beside a slice against the ceiling, after ${WARMUP} s of warm-up (not counted)${LATENCY > 0 ? ` and ${LATENCY} s of one continuous load that p50 and p99 are read from` : ''}`,
    `server      bin/almoner serve${BENCH_WORKERS === '1' ? '' : ` with WORKERS=${BENCH_WORKERS} (memory and CPU: the primary's and every worker's, summed)`}; LOG_LEVEL ${BENCH_LOG_LEVELS.join(', then ')}, each on a fresh database (info is the production default: a JSON line per request, to a file); CREATE_RATE_LIMIT=0 (the per-charity create limit is off); CREATE_CONCURRENCY_LIMIT ${Math.max(DEFAULT_CREATES_IN_FLIGHT, CONNECTIONS)} (the default, or the connections when more)`,
    ...(stale ? ['WARNING     src/ has changed since dist/ was built: these figures are for the code in dist/ (npm run build)'] : []),
    ...[...new Map(backends.map((b) => [b.backend, b.describe]))].map(([backend, describe]) => `${backend.padEnd(11)} ${describe}`),
    `requests    /me and the ceiling: POST /api/v1/me with Basic auth, no body; create: varied valid donations (20% without donation_date), without an Idempotency-Key; keyed create: the same, each with a fresh Idempotency-Key`,
    `floor       bench/floor.mjs on a fresh SQLite file (WAL, synchronous=FULL): the stack alone (Fastify, better-sqlite3, validator's isEmail), doing about the least the interface asks of /me and of a create: a reference, not a goal`,
    '',
    table([header, ...lines], (i) => i > 0),
    `(ratio: a run's req/s over the ceiling's in the slices taken in turn with its own, ${SLICE} s each, ${SLICES} of each; ` +
      `±: twice the ratio's standard error over its pairs, how far it may be off. The ceiling answered ${fmt(ceilingRps)} req/s over the whole benchmark, ` +
      `${fmt(ceilingRange[0])} to ${fmt(ceilingRange[1])} from one run to the next (each run's slices together), ${fmt(ceilingDrift * 100)}% of that apart)`,
    '(CPU: cores busy, 1.00 = one core all the time, of the server and of the load generator)',
    ...(loaderBound.length
      ? [`(the load generator kept a whole core busy in: ${loaderBound.join('; ')}: there the limit may be the load generator's, not the server's)`]
      : []),
    '',
    `the floor: database check, unkeyed creates: ${describeCheck(floor.check.create.measured)}; keyed: ${describeCheck(floor.check.keyed.measured)}; ` +
      `rows no request sent: ${floor.check.unmarkedRows}; idempotency keys ${fmt(floor.check.idempotencyKeys)} for ${fmt(floor.check.keyedStored)} keyed donations; ${floor.check.ok ? 'OK' : 'FAIL'}`,
    '',
    ...backends.flatMap((b) => [
      `${b.backend}, LOG_LEVEL=${b.logLevel}:`,
      `  start to first answer (spawn -> 200 from GET /health): ${fmt(b.startMs)} ms, the median of ${b.startSamplesMs.map((ms) => fmt(ms)).join(', ')} ms`,
      `  server RSS: ${fmt(b.memoryMb.idle)} MB idle after start, ${fmt(b.memoryMb.afterMe)} MB after /me, ${fmt(b.memoryMb.afterCreate)} MB after create ` +
        `(anonymous ${fmt(b.memoryMb.afterCreateAnon)}, files ${fmt(b.memoryMb.afterCreateFile)}, shared ${fmt(b.memoryMb.afterCreateShmem)}; PSS ${fmt(b.memoryMb.afterCreatePss)}), peak (VmHWM) ${fmt(b.memoryMb.peak)} MB`,
      `  after the create load stopped, the server was idle again within ${fmt(b.settleMs)} ms (300 ms of quiet included), then got SIGTERM`,
      ...(['create', 'keyed'] as const).flatMap((k) => [
        `  database check, ${k === 'keyed' ? 'keyed' : 'unkeyed'} creates: ${describeCheck(b.check[k].measured)}`,
        ...(b.check[k].warmup ? [`  database check, ${k === 'keyed' ? 'keyed' : 'unkeyed'} warm-up creates: ${describeCheck(b.check[k].warmup!)}`] : []),
      ]),
      ...(b.check.unmarkedRows ? [`  database check: ${b.check.unmarkedRows} rows that no request of this run sent: FAIL`] : []),
      `  idempotency keys stored: ${fmt(b.check.idempotencyKeys)}, for the ${fmt(b.check.keyedStored)} donations of the keyed run: ${b.check.idempotencyKeys === b.check.keyedStored ? 'OK' : 'FAIL'}`,
      `  database check against the server log: ${describeLogged(b)}`,
      `  server log: ${b.log.warnings} line(s) at warn or above; responses logged: ${Object.entries(b.log.responses).map(([k, n]) => `${k} x${fmt(n)}`).join(', ')}`,
      ...b.log.firstWarnings.map((l) => `    ${l}`),
      `  SIGTERM at the end: ${b.shutdown.code === 0 ? 'exit 0' : `ended with ${b.shutdown.code ?? b.shutdown.signal}`}`,
    ]),
    '',
    'goals (issue 13)',
    table(
      goals.map((g) => [
        `  ${g.goal}`, g.target, g.measured === null ? 'not measured' : fmt(g.measured, g.target.includes('ms') || g.target.includes('MB') ? 1 : 3), // a ratio of 0.148 shown as 0.15 would seem to meet 0.15
        `${g.holds === null ? '' : g.holds ? 'holds' : 'MISSED'}${g.note ? ` (${g.note})` : ''}`,
      ]),
      (i) => i === 2,
    ),
    '',
    failures.length ? `FAIL\n${failures.map((f) => `  ${f}`).join('\n')}` : 'PASS: every answer 2xx, no errors, the databases hold exactly what was acknowledged',
  ];
  process.stdout.write(out.join('\n') + '\n');

  const results = {
    date: startedAt.toISOString(),
    machine,
    tool: { name: loader.tool, version: loader.version, describe: loader.describe },
    connections: CONNECTIONS,
    ceilingRps,
    ceilingDrift,
    durationSeconds: SECONDS,
    sliceSeconds: SLICE,
    slices: SLICES,
    warmupSeconds: WARMUP,
    latencySeconds: LATENCY,
    server: { workers: Number(BENCH_WORKERS), logLevels: BENCH_LOG_LEVELS, createRateLimit: 0, sqliteSynchronous: sqliteSync, distOlderThanSrc: stale },
    // Without the latency distributions (kept for merging). `load` is the slices' (req/s, ratio);
    // p50Ms and p99Ms are the table's (the latency load's), non2xx and errors over every measured request.
    runs: runs.map((run) => {
      const { warmup: _, load: { quantilesMs: _q, ...load }, latency, ceiling: { quantilesMs: _c, ...ceilingLoad }, ...r } = run;
      const { quantilesMs: _l, ...latencyRun } = latency ?? { quantilesMs: [] };
      const [all, latencyOf] = [measuredLoad(run), latencyLoad(run)];
      return { ...r, p50Ms: latencyOf.p50Ms, p99Ms: latencyOf.p99Ms, non2xx: all.non2xx, errors: all.errors, load, latency: latency ? latencyRun : null, ceiling: ceilingLoad };
    }),
    backends: backends.map(({ me: _me, create: _create, ...b }) => b),
    floor: { check: floor.check },
    goals,
    pass: failures.length === 0,
    failures,
    table: out.join('\n'),
  };
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  const rounded = (_key: string, v: unknown) => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 1000) / 1000 : v);
  const file = BENCH_WORKERS === '1' ? 'latest.json' : `latest-workers-${BENCH_WORKERS}.json`;
  writeFileSync(join(ROOT, 'bench', 'results', file), JSON.stringify(results, rounded, 2) + '\n');
  process.stdout.write(`written bench/results/${file}\n`);
  return failures.length ? 1 : 0;
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    void cleanUp().finally(() => process.exit(130));
  });
}
try {
  process.exitCode = await main();
} catch (err) {
  if (!interrupted) {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  }
} finally {
  await cleanUp();
}
