// What the benchmark runs against: the ceiling and Almoner as child processes, the databases they
// use, a monitor of their memory and CPU, and the clean-up of all of it, also on failure or Ctrl-C.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { closeSync, createReadStream, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { DEFAULT_CREATES_IN_FLIGHT } from '../src/config.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ALMONER = join(ROOT, 'bin', 'almoner');

// ---- Ownership and clean-up ---------------------------------------------------------------------

const children = new Set<ChildProcess>();
const cleanups: Array<() => unknown> = [];
let cleaning: Promise<void> | null = null;

/** Throws once clean-up has begun (Ctrl-C), so that nothing new is started that it would miss. */
export function assertNotCleaningUp(): void {
  if (cleaning) throw new Error('interrupted');
}

/** Remembers a child process so that cleanUp() (or, at worst, process exit) ends it. */
export function own<C extends ChildProcess>(child: C): C {
  if (cleaning) child.kill('SIGKILL');
  assertNotCleaningUp();
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Registers something to undo; cleanUp() runs them last-registered first. */
export function onCleanUp(undo: () => unknown): void {
  cleanups.push(undo);
}

/** Ends every child still running, then undoes everything registered. Every call shares one run. */
export function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    await Promise.all([...children].map((child) => stop(child)));
    for (let undo = cleanups.pop(); undo; undo = cleanups.pop()) {
      try {
        await undo();
      } catch (err) {
        process.stderr.write(`bench: clean-up step failed: ${err instanceof Error ? err.message : String(err)}\n`);
      }
    }
  })();
  return cleaning;
}
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL'); // last resort; cleanUp() normally did it
});

/** SIGTERM, then SIGKILL after graceMs. Resolves with how it ended. */
export async function stop(child: ChildProcess, graceMs = 15_000): Promise<{ code: number | null; signal: string | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode };
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  const result = await exited;
  clearTimeout(timer);
  return result;
}

export function makeTempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'almoner-bench-'));
  onCleanUp(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---- Memory and CPU of running processes ---------------------------------------------------------

const CLOCK_TICKS = 100; // USER_HZ, 100 on every Linux architecture Node runs on

/**
 * The process and its descendants: under BENCH_WORKERS, the server is a primary process and its
 * workers, and its memory and CPU are theirs summed. A process's own peak (VmHWM) summed over them
 * is an upper bound on the peak of their sum.
 */
function processTree(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    // gone, or no children to list
  }
  return [pid, ...children.flatMap(processTree)];
}

/** A `Name:   N kB` field of /proc/<pid>/<file>, summed over the process and its descendants. */
function treeKb(pid: number, file: 'status' | 'smaps_rollup', field: string): number {
  let kb = 0;
  for (const p of processTree(pid)) kb += Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${p}/${file}`, 'utf8'))?.[1] ?? NaN);
  return kb;
}

function procStatusKb(pid: number, field: 'VmRSS' | 'VmHWM' | 'RssAnon' | 'RssFile' | 'RssShmem'): number {
  return treeKb(pid, 'status', field);
}

function cpuTicks(pid: number): number {
  let ticks = 0;
  for (const p of processTree(pid)) {
    const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]); // utime + stime
  }
  return ticks;
}

/** Peak of the server's VmRSS (sampled every 100 ms), and CPU use of it and of other watched pids. */
export class Monitor {
  peakRssKb = 0;
  private readonly cpu = new Map<number, { t0: number; ticks0: number; t1: number; ticks1: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly serverPid: number) {
    this.watch(serverPid);
    this.timer = setInterval(() => this.sample(), 100);
  }

  watch(pid: number): void {
    const now = performance.now();
    try {
      const ticks = cpuTicks(pid);
      this.cpu.set(pid, { t0: now, ticks0: ticks, t1: now, ticks1: ticks });
    } catch {
      // already gone
    }
    this.sample();
  }

  private sample(): void {
    const now = performance.now();
    try {
      const rss = procStatusKb(this.serverPid, 'VmRSS');
      this.peakRssKb = Math.max(this.peakRssKb, rss);
    } catch {
      // the server is gone; the run will fail on its own
    }
    for (const [pid, c] of this.cpu) {
      try {
        c.ticks1 = cpuTicks(pid);
        c.t1 = now;
      } catch {
        // exited: its last sample stands
      }
    }
  }

  /** CPU time and wall time between the first and last sample, in seconds (zeros for a pid not watched). */
  cpuUse(pid: number): { cpuSeconds: number; wallSeconds: number } {
    const c = this.cpu.get(pid);
    return c ? { cpuSeconds: (c.ticks1 - c.ticks0) / CLOCK_TICKS, wallSeconds: (c.t1 - c.t0) / 1000 } : { cpuSeconds: 0, wallSeconds: 0 };
  }

  stop(): void {
    this.sample();
    clearInterval(this.timer);
  }
}

/**
 * Resident memory now, its peak so far, what it is made of (heap and stacks, mapped files, shared
 * memory), and its PSS, where a page the processes share (the node binary's) counts once in all.
 */
export function memoryKb(pid: number): { rss: number; hwm: number; anon: number; file: number; shmem: number; pss: number } {
  const get = (field: Parameters<typeof procStatusKb>[1]) => procStatusKb(pid, field);
  return { rss: get('VmRSS'), hwm: get('VmHWM'), anon: get('RssAnon'), file: get('RssFile'), shmem: get('RssShmem'), pss: treeKb(pid, 'smaps_rollup', 'Pss') };
}

/**
 * Waits until the process has used (almost) no CPU for 300 ms, at most maxMs: after the load
 * generator has left, the server may still be working through requests it had already read.
 */
export async function waitUntilIdle(pid: number, maxMs = 10_000): Promise<number> {
  const started = performance.now();
  let before = cpuTicks(pid);
  while (performance.now() - started < maxMs) {
    await sleep(300);
    const now = cpuTicks(pid);
    if (now - before <= 1) break;
    before = now;
  }
  return performance.now() - started;
}

// ---- The ceiling -------------------------------------------------------------------------------

export interface Running {
  child: ChildProcess;
  pid: number;
  url: string;
}

export function startCeiling(): Promise<Running> {
  return startListening(own(spawn(process.execPath, [join(ROOT, 'bench', 'ceiling.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] })), 'the ceiling server');
}

/** A bench server's address, from the {"port":N} line it prints once listening. */
async function startListening(child: ChildProcess & { stdout: NodeJS.ReadableStream }, name: string): Promise<Running> {
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString()));
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before listening`)));
  });
  child.stdout.resume(); // drained, whatever comes
  const { port } = JSON.parse(line) as { port: number };
  return { child, pid: child.pid!, url: `http://127.0.0.1:${port}` };
}

/**
 * The floor (bench/floor.mjs): the stack alone answering /me and creates, on a SQLite file that
 * `almoner charity create` migrated and gave this charity.
 */
export function startFloor(db: BenchDatabase, charity: { username: string; password: string }): Promise<Running> {
  const path = db.url.replace(/^sqlite:/, '');
  const env = { ...process.env, FLOOR_DB: path, FLOOR_USERNAME: charity.username, FLOOR_PASSWORD: charity.password };
  return startListening(own(spawn(process.execPath, [join(ROOT, 'bench', 'floor.mjs')], { env, stdio: ['pipe', 'pipe', 'inherit'] })), 'the floor server');
}

// ---- Almoner -----------------------------------------------------------------------------------

/**
 * The server's LOG_LEVELs, each run in turn on a fresh database: info (the production default, a
 * line per request) and warn (none), unless BENCH_LOG_LEVELS (or BENCH_LOG_LEVEL, one) names others.
 */
export const BENCH_LOG_LEVELS: string[] = (process.env.BENCH_LOG_LEVELS ?? process.env.BENCH_LOG_LEVEL ?? 'info,warn')
  .split(',')
  .map((l) => l.trim())
  .filter(Boolean);

/** BENCH_WORKERS: the server's WORKERS (1, one process, by default). */
export const BENCH_WORKERS = process.env.BENCH_WORKERS || '1';

/** The environment every bin/almoner command of the run gets: the operator's, made definite. */
export function almonerEnv(databaseUrl: string, logLevel = 'info'): NodeJS.ProcessEnv {
  // The creates one charity may have in flight: the default (100), above the run's connections, or as many as they are when more.
  const inFlight = String(Math.max(DEFAULT_CREATES_IN_FLIGHT, Number(process.env.BENCH_CONNECTIONS) || 0));
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: logLevel, CREATE_RATE_LIMIT: '0', CREATE_CONCURRENCY_LIMIT: inFlight, WORKERS: BENCH_WORKERS };
  for (const name of ['REDIS_URL', 'TRUST_PROXY', 'TLS_CERT_FILE', 'TLS_KEY_FILE']) delete env[name];
  return env;
}

export function createCharity(databaseUrl: string): Promise<{ username: string; password: string }> {
  return new Promise((resolve, reject) => {
    const args = ['charity', 'create', '--name', 'Bench Charity', '--email', 'bench@example.org', '--json'];
    own(
      execFile(ALMONER, args, { env: almonerEnv(databaseUrl) }, (err, stdout) =>
        err ? reject(err) : resolve(JSON.parse(stdout) as { username: string; password: string }),
      ),
    );
  });
}

function getStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    http
      .get(url, { agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', () => resolve(0));
  });
}

export interface AlmonerServer extends Running {
  /** Spawn to the first 200 from GET /health, in ms. */
  startMs: number;
  logPath: string;
}

/**
 * Starts `bin/almoner serve` (itself the node process: its pid is the server's), logging to a file
 * so that nothing fills a pipe, and times spawn -> first 200 from GET /health, polling tightly.
 */
export async function startAlmoner(databaseUrl: string, dir: string, name: string, logLevel: string): Promise<AlmonerServer> {
  const logPath = join(dir, `${name}-server.log`);
  const errPath = join(dir, `${name}-server.stderr`);
  const out = openSync(logPath, 'w');
  const err = openSync(errPath, 'w');
  const started = performance.now();
  const child = own(spawn(ALMONER, ['serve'], { env: almonerEnv(databaseUrl, logLevel), stdio: ['ignore', out, err] }));
  closeSync(out);
  closeSync(err);
  const fail = (why: string) =>
    new Error(`Almoner (${name}) ${why}.\nstderr: ${readFileSync(errPath, 'utf8').slice(-2000)}\nlog: ${readFileSync(logPath, 'utf8').slice(-2000)}`);

  let port = 0;
  while (!port) {
    if (child.exitCode !== null || child.signalCode !== null) throw fail(`exited (${child.exitCode ?? child.signalCode}) while starting`);
    if (performance.now() - started > 30_000) throw fail('did not listen within 30 s');
    // The log's "Server listening" line at info; below info (warn), the docs address on stderr.
    const match = /(?:Server listening at|API reference .*:) http:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(logPath, 'utf8') + readFileSync(errPath, 'utf8'));
    if (match) port = Number(match[1]);
    else await sleep(1);
  }
  const url = `http://127.0.0.1:${port}`;
  while ((await getStatus(`${url}/health`)) !== 200) {
    if (performance.now() - started > 30_000) throw fail('did not answer GET /health with 200 within 30 s');
    await sleep(1);
  }
  const startMs = performance.now() - started;
  // Memory and CPU are read from this pid: it must be the server itself, not a wrapper around it.
  // (Node names its main thread: "node" up to Node 22, "MainThread" from Node 24.)
  const comm = readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim();
  if (comm !== 'node' && comm !== 'MainThread') throw fail(`runs as "${comm}", not node: bin/almoner is no longer node itself, so its pid is not the server's`);
  return { child, pid: child.pid!, url, startMs, logPath };
}

export interface LogSummary {
  /** "POST /api/v1/donation/create 200" -> count, from the one line the server logs per request. */
  responses: Record<string, number>;
  /** Lines at warn level or above, and the first few of them. */
  warnings: number;
  firstWarnings: string[];
}

export async function summariseLog(logPath: string): Promise<LogSummary> {
  const summary: LogSummary = { responses: {}, warnings: 0, firstWarnings: [] };
  for await (const line of createInterface({ input: createReadStream(logPath), crlfDelay: Infinity })) {
    const level = Number(/"level":(\d+)/.exec(line)?.[1] ?? 0);
    if (level >= 40) {
      summary.warnings++;
      if (summary.firstWarnings.length < 5) summary.firstWarnings.push(line.slice(0, 500));
    } else if (line.includes('"msg":"request"')) {
      const m = /"method":"(\w+)","route":"([^"]*)","status":(\d+)/.exec(line);
      const key = m ? `${m[1]} ${m[2]} ${m[3]}` : 'unparsed';
      summary.responses[key] = (summary.responses[key] ?? 0) + 1;
    }
  }
  return summary;
}

// ---- Databases ---------------------------------------------------------------------------------

export interface BenchDatabase {
  backend: 'SQLite' | 'PostgreSQL';
  url: string;
  /** Rows whose payment_confirmation_number starts with `${marker}-`, distinct markers, all rows, idempotency keys. */
  count(marker: string): Promise<{ rows: number; distinct: number; all: number; keys: number }>;
}

const COUNT_SQL = (param: string) =>
  `SELECT count(*) AS rows, count(DISTINCT payment_confirmation_number) AS distinct_marks,
          (SELECT count(*) FROM donations) AS all_rows, (SELECT count(*) FROM idempotency_keys) AS keys
     FROM donations WHERE payment_confirmation_number LIKE ${param}`;

interface CountRow {
  rows: number | string;
  distinct_marks: number | string;
  all_rows: number | string;
  keys: number | string;
}
const counted = (r: CountRow) => ({ rows: Number(r.rows), distinct: Number(r.distinct_marks), all: Number(r.all_rows), keys: Number(r.keys) });

export function sqliteDatabase(dir: string, name = 'almoner'): BenchDatabase {
  const path = join(dir, `${name}.db`);
  return {
    backend: 'SQLite',
    url: `sqlite:${path}`,
    async count(marker) {
      const db = new BetterSqlite3(path, { readonly: true });
      try {
        return counted(db.prepare(COUNT_SQL('?')).get(`${marker}-%`) as CountRow);
      } finally {
        db.close();
      }
    },
  };
}

/** A fresh database on the server `adminUrl` names, dropped again by cleanUp(). */
export async function postgresDatabase(adminUrl: string): Promise<BenchDatabase> {
  const name = `almoner_bench_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = async <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  assertNotCleaningUp();
  const created = admin((c) => c.query(`CREATE DATABASE "${name}"`));
  // Registered before the database exists, and waiting for its creation: Ctrl-C at any moment
  // leaves no database behind.
  onCleanUp(async () => {
    if (!(await created.then(() => true, () => false))) return;
    await admin(async (c) => {
      await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      await c.query(`DROP DATABASE IF EXISTS "${name}"`);
    });
  });
  await created;
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    backend: 'PostgreSQL',
    url: url.href,
    async count(marker) {
      const client = new pg.Client({ connectionString: url.href });
      await client.connect();
      try {
        const { rows } = await client.query<CountRow>(COUNT_SQL('$1'), [`${marker}-%`]);
        return counted(rows[0]!);
      } finally {
        await client.end();
      }
    },
  };
}
