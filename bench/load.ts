// The load generators, behind one interface: wrk when Debian's wrk is on the PATH (it takes less
// CPU from the server), autocannon otherwise; BENCH_TOOL=wrk|autocannon chooses. Each load runs
// in its own process, so the harness itself stays idle while it measures.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { own, ROOT } from './servers.js';

export interface LoadSpec {
  url: string;
  /** "me": POST /api/v1/me, a fixed request (also what the ceiling gets); "create": varied donations. */
  scenario: 'me' | 'create';
  connections: number;
  seconds: number;
  /** The Authorization header value. */
  auth: string;
  /** Create: each request carries `${marker}-…`, unique, as payment_confirmation_number. */
  marker: string;
  /** Create: whether each request carries a fresh Idempotency-Key (its marker). */
  keyed?: boolean;
}

export interface LoadResult {
  seconds: number;
  /** Responses received in the run, whatever their status. */
  responses: number;
  rps: number;
  /** 2xx responses; for creates, the acknowledged donations. */
  ok: number;
  non2xx: number;
  /** Per status code where the tool tells them apart (autocannon); wrk only counts status >= 400. */
  statuses: Record<string, number> | null;
  /** Connection errors and timeouts. */
  errors: number;
  /** Create: requests written; those minus responses were still in flight when the run ended. */
  sent: number | null;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** The latency at each of QUANTILES' percentiles, so that several runs' latencies can be merged (mergeLoads). */
  quantilesMs: number[];
}

/** The percentiles each load tool is asked to report its latency at (BENCH_QUANTILES for wrk.lua, the spec for autocannon.mjs): 1 to 99, 99.1 to 99.9, 99.95, 99.99, 100. */
export const QUANTILES: readonly number[] = [
  ...Array.from({ length: 99 }, (_, i) => i + 1),
  ...Array.from({ length: 9 }, (_, i) => (991 + i) / 10),
  99.95, 99.99, 100,
];

/**
 * Several runs of one load as one: counts and seconds summed, the mean weighted by responses, and
 * p50 and p99 read off the runs' latency distributions put together (each known at QUANTILES, so a
 * percentile comes out at most one step of that list above the exact one).
 */
export function mergeLoads(loads: LoadResult[]): LoadResult {
  const sum = (f: (l: LoadResult) => number) => loads.reduce((n, l) => n + f(l), 0);
  const responses = sum((l) => l.responses);
  const statuses = loads.every((l) => l.statuses)
    ? loads.reduce<Record<string, number>>((all, l) => {
        for (const [status, n] of Object.entries(l.statuses!)) all[status] = (all[status] ?? 0) + n;
        return all;
      }, {})
    : null;
  /** The share of all responses at or below `ms`. */
  const below = (ms: number) =>
    sum((l) => {
      let share = 0;
      l.quantilesMs.forEach((q, i) => {
        if (q <= ms) share = QUANTILES[i]! / 100;
      });
      return share * l.responses;
    }) / responses;
  const candidates = [...new Set(loads.flatMap((l) => l.quantilesMs))].sort((a, b) => a - b);
  const shares = candidates.map(below);
  const percentile = (p: number) => candidates[shares.findIndex((share) => share >= p / 100 - 1e-9)] ?? NaN;
  return finish({
    seconds: sum((l) => l.seconds),
    responses,
    ok: sum((l) => l.ok),
    non2xx: sum((l) => l.non2xx),
    statuses,
    errors: sum((l) => l.errors),
    sent: loads.every((l) => l.sent !== null) ? sum((l) => l.sent!) : null,
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    meanMs: sum((l) => l.meanMs * l.responses) / responses,
    quantilesMs: QUANTILES.map(percentile),
  });
}

export interface Loader {
  tool: 'autocannon' | 'wrk';
  version: string;
  describe: string;
  run(spec: LoadSpec, onSpawn: (pid: number) => void): Promise<LoadResult>;
}

function runChild(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  onSpawn: (pid: number) => void,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = own(spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('spawn', () => onSpawn(child.pid!));
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${command} ended with ${code ?? signal}\n${stderr.slice(-2000)}${stdout.slice(-2000)}`)),
    );
  });
}

const finish = (r: Omit<LoadResult, 'rps'>): LoadResult => ({ ...r, rps: r.responses / r.seconds });

const autocannonLoader = (): Loader => ({
  tool: 'autocannon',
  version: (JSON.parse(readFileSync(join(ROOT, 'node_modules', 'autocannon', 'package.json'), 'utf8')) as { version: string }).version,
  describe: 'in a node process of its own',
  async run(spec, onSpawn) {
    const out = await runChild(process.execPath, [join(ROOT, 'bench', 'autocannon.mjs'), JSON.stringify({ ...spec, quantiles: QUANTILES })], process.env, onSpawn);
    const r = JSON.parse(out) as {
      seconds: number; responses: number; statuses: Record<string, number>; errors: number; sent: number | null;
      p50: number; p99: number; mean: number; quantiles: number[];
    };
    const ok = Object.entries(r.statuses).reduce((n, [status, count]) => (status.startsWith('2') ? n + count : n), 0);
    return finish({
      seconds: r.seconds, responses: r.responses, ok, non2xx: r.responses - ok, statuses: r.statuses,
      errors: r.errors, sent: r.sent, p50Ms: r.p50, p99Ms: r.p99, meanMs: r.mean, quantilesMs: r.quantiles,
    });
  },
});

function wrkLoader(version: string): Loader {
  // One thread by default: on two cores, a second one would take CPU from the server it measures.
  const threads = Number(process.env.BENCH_WRK_THREADS || 1);
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`BENCH_WRK_THREADS must be a whole number of at least 1, not ${process.env.BENCH_WRK_THREADS}`);
  return {
    tool: 'wrk',
    version,
    describe: `${threads} thread${threads === 1 ? '' : 's'}, Lua script bench/wrk.lua`,
    async run(spec, onSpawn) {
      const path = spec.scenario === 'create' ? '/api/v1/donation/create' : '/api/v1/me';
      const args = ['-t', String(Math.min(threads, spec.connections)), '-c', String(spec.connections), '-d', `${spec.seconds}s`,
        '--timeout', '10s', '-s', join(ROOT, 'bench', 'wrk.lua'), spec.url + path];
      const env = { ...process.env, BENCH_SCENARIO: spec.scenario, BENCH_AUTH: spec.auth, BENCH_MARKER: spec.marker, BENCH_KEYED: spec.keyed ? '1' : '0', BENCH_QUANTILES: QUANTILES.join(',') };
      const out = await runChild('wrk', args, env, onSpawn);
      const line = /^BENCH_RESULT (.*)$/m.exec(out)?.[1];
      if (!line) throw new Error(`wrk printed no result:\n${out}`);
      const r = JSON.parse(line) as {
        seconds: number; responses: number; status_errors: number; connect: number; read: number; write: number;
        timeout: number; sent: number | null; p50_us: number; p99_us: number; mean_us: number; quantiles_us: number[];
      };
      if (r.quantiles_us.length !== QUANTILES.length) throw new Error(`wrk gave ${r.quantiles_us.length} percentiles, not the ${QUANTILES.length} of QUANTILES`);
      // wrk counts only status >= 400 apart; Almoner answers no 1xx or 3xx here, so the rest are 2xx.
      return finish({
        seconds: r.seconds, responses: r.responses, ok: r.responses - r.status_errors, non2xx: r.status_errors, statuses: null,
        errors: r.connect + r.read + r.write + r.timeout, sent: r.sent,
        p50Ms: r.p50_us / 1000, p99Ms: r.p99_us / 1000, meanMs: r.mean_us / 1000, quantilesMs: r.quantiles_us.map((us) => us / 1000),
      });
    },
  };
}

/** wrk's version when it is on the PATH (it prints it and exits 1), else null. */
function wrkVersion(): string | null {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if (probe.error) return null;
  return /^wrk (\S+)/.exec(probe.stdout + probe.stderr)?.[1] ?? 'unknown';
}

export function chooseLoader(): Loader {
  const wanted = process.env.BENCH_TOOL;
  if (wanted && wanted !== 'wrk' && wanted !== 'autocannon') throw new Error(`BENCH_TOOL must be wrk or autocannon, not ${wanted}`);
  if (wanted === 'autocannon') return autocannonLoader();
  const version = wrkVersion();
  if (version) return wrkLoader(version);
  if (wanted === 'wrk') throw new Error('BENCH_TOOL=wrk, but wrk is not on the PATH (apt-get install wrk)');
  return autocannonLoader();
}
