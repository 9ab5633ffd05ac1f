// `npm run bench:auth-timing`: can a client tell a known username with a wrong password from an
// unknown username by the time a 401 takes? Times PAIRS pairs through the real app on a fresh
// SQLite file (each request from its own address, so none is throttled; the two of a pair in
// alternating order, PARALLEL pairs at a time) and reports both tests an attacker would run: the
// mean difference as a z-score, and the sign test (how often the known username was slower).
// |z| under about 3 on both: the two cannot be told apart.
//
// Settings: AUTH_TIMING_PAIRS (10,000), AUTH_TIMING_PARALLEL (10; 1 is the attacker's best case, and slow).
import { buildApp } from '../src/app.js';
import { Throttle } from '../src/http/throttle.js';
import { basic, startTestApp } from '../test/support/app.js';

const PAIRS = Number(process.env.AUTH_TIMING_PAIRS ?? 10_000);
const PARALLEL = Number(process.env.AUTH_TIMING_PARALLEL ?? 10);

const t = await startTestApp();
const app = await buildApp({ store: t.store, throttle: new Throttle({ createsPerSecond: 0 }) });
await app.ready();
const known = basic(t.charity.username, 'not-the-password-of-this-charity');
const unknown = basic('helping-hands-000000', 'not-the-password-of-this-charity');

let address = 0;
async function timed(authorization: string): Promise<number> {
  const n = address++;
  const remoteAddress = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  const started = process.hrtime.bigint();
  const res = await app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization }, remoteAddress });
  const micros = Number(process.hrtime.bigint() - started) / 1000;
  if (res.statusCode !== 401) throw new Error(`expected 401, got ${res.statusCode}`);
  return micros;
}

async function pair(i: number): Promise<[number, number]> {
  if (i % 2) {
    const k = await timed(known);
    return [k, await timed(unknown)];
  }
  const u = await timed(unknown);
  return [await timed(known), u];
}

const diffs: number[] = [];
const knownTimes: number[] = [];
const unknownTimes: number[] = [];
for (let start = 0; start < PAIRS; start += PARALLEL) {
  const batch = await Promise.all(Array.from({ length: Math.min(PARALLEL, PAIRS - start) }, (_, k) => pair(start + k)));
  for (const [k, u] of batch) {
    knownTimes.push(k);
    unknownTimes.push(u);
    diffs.push(k - u);
  }
}
await app.close();
await t.close();

const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const sd = (xs: number[]) => {
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
};
const slower = diffs.filter((d) => d > 0).length;
const report = {
  pairs: diffs.length,
  known_median_us: Math.round(median(knownTimes)),
  unknown_median_us: Math.round(median(unknownTimes)),
  mean_difference_us: Number(mean(diffs).toFixed(2)),
  mean_z: Number((mean(diffs) / (sd(diffs) / Math.sqrt(diffs.length))).toFixed(2)),
  known_slower_fraction: Number((slower / diffs.length).toFixed(3)),
  sign_z: Number(((slower - diffs.length / 2) / Math.sqrt(diffs.length / 4)).toFixed(2)),
};
console.log(JSON.stringify(report, null, 2));
console.log(Math.abs(report.mean_z) < 3 && Math.abs(report.sign_z) < 3 ? 'cannot be told apart (|z| < 3 on both tests)' : 'TOLD APART: |z| >= 3 on a test');
