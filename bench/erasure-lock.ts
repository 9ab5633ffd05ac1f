// `npm run bench:erasure`: how long a donor's erasure and a retention run hold SQLite's write lock,
// with a donor who has many gift-aided donations still kept (ERASURE_KEPT, 30,000), while
// `bin/almoner serve` on the same file answers creates. Each command is run as an operator runs it,
// with beside it another connection taking the write lock and letting it go every millisecond (the
// longest it waited is how long the command held the lock), and creates sent to the server every
// 50 ms (a create that cannot get the lock within 4.5 s is answered 503). Timed, so a benchmark, not
// a test: test/store/erasure-beside-creates.test.ts shows the same without timing anything.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { sql, type Kysely } from 'kysely';
import { parseDatabaseUrl } from '../src/config.js';
import { validateDonation } from '../src/donations/validate.js';
import { openStore } from '../src/store/open.js';
import type { Database } from '../src/store/schema.js';
import { cleanUp, createCharity, makeTempDir, own, ROOT, sqliteDatabase, startAlmoner, stop } from './servers.js';

const KEPT = Number(process.env.ERASURE_KEPT ?? 30_000);
const DONOR = 'kept.donor@example.org';

/** The donation's day, DD-MM-YYYY: six and a half years ago, so that a retention run (6 years) reads them too, and Gift Aid (7 years) still keeps them. */
function sixAndAHalfYearsAgo(): string {
  const d = new Date(Date.now() - 6.5 * 365.25 * 86_400_000);
  return `${String(d.getUTCDate()).padStart(2, '0')}-${String(d.getUTCMonth() + 1).padStart(2, '0')}-${d.getUTCFullYear()}`;
}

/** KEPT gift-aided donations of DONOR, and a thousand of others. */
async function fill(url: string): Promise<void> {
  const store = await openStore(parseDatabaseUrl(url));
  try {
    const [charity] = await store.listCharities();
    const record = async (overrides: Record<string, string>) => {
      const v = validateDonation({
        donor_first_name: 'Jane', donor_last_name: 'Doe', donor_email: DONOR, donor_phone: '07700 900123', donor_address: 'Flat 2, 12 High Street',
        donor_city: 'London', donor_postcode: 'SW1A 1AA', donor_ip: '203.0.113.7', gift_aid: 'yes', amount: '25.00', donation_type: 'recurring',
        donation_date: sixAndAHalfYearsAgo(), ...overrides,
      });
      if (!v.ok) throw new Error(JSON.stringify(v.errors));
      return store.recordDonation(charity!.id, v.donation);
    };
    const copy = async (id: number, times: number) => {
      const db = (store as unknown as { db: Kysely<Database> }).db;
      const row = await db.selectFrom('donations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      const columns = sql.join(Object.keys(row).filter((c) => c !== 'id').map((c) => sql.ref(c)));
      await sql`insert into donations (${columns}) select ${columns} from donations, (with recursive n(i) as (select 1 union all select i + 1 from n where i < ${times}) select i from n) where donations.id = ${id}`.execute(db);
    };
    await copy((await record({})).id, KEPT - 1);
    await copy((await record({ donor_email: 'someone.else@example.org', gift_aid: 'no' })).id, 999);
  } finally {
    await store.close();
  }
}

/** Another connection taking the write lock and letting it go, every millisecond, until stopped: the longest it waited. */
function lockProbe(path: string): { stop(): Promise<{ longestMs: number; tries: number }> } {
  const stopFlag = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { workerData: { path, stop }, parentPort } = require('node:worker_threads');
     const db = new (require('better-sqlite3'))(path);
     db.pragma('busy_timeout = 600000');
     let longest = 0, tries = 0;
     while (Atomics.load(stop, 0) === 0) {
       const t = performance.now();
       db.exec('begin immediate'); db.exec('rollback');
       longest = Math.max(longest, performance.now() - t); tries++;
       Atomics.wait(stop, 0, 0, 1);
     }
     db.close();
     parentPort.postMessage({ longestMs: longest, tries });`,
    { eval: true, workerData: { path, stop: stopFlag } },
  );
  const result = new Promise<{ longestMs: number; tries: number }>((resolve, reject) => worker.once('message', resolve).once('error', reject));
  return {
    stop() {
      Atomics.store(stopFlag, 0, 1);
      Atomics.notify(stopFlag, 0);
      return result;
    },
  };
}

/** Creates sent every 50 ms until stopped: how each was answered, and the slowest. */
function createsMeanwhile(url: string, charity: { username: string; password: string }): { stop(): Promise<{ statuses: Record<string, number>; slowestMs: number }> } {
  const authorization = `Basic ${Buffer.from(`${charity.username}:${charity.password}`).toString('base64')}`;
  const statuses: Record<string, number> = {};
  let slowestMs = 0;
  let running = true;
  const sent: Promise<void>[] = [];
  const loop = (async () => {
    while (running) {
      sent.push((async () => {
        const t = performance.now();
        const res = await fetch(`${url}/api/v1/donation/create`, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ donor_email: 'meanwhile@example.org', gift_aid: 'no', amount: '5.00', donation_type: 'one-time' }),
        }).then((r) => r.status, () => 0);
        slowestMs = Math.max(slowestMs, performance.now() - t);
        statuses[res] = (statuses[res] ?? 0) + 1;
      })());
      await sleep(50);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await Promise.all(sent);
      return { statuses, slowestMs };
    },
  };
}

function almoner(url: string, args: string[]): Promise<{ ms: number; code: number; lines: number }> {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    own(
      execFile(join(ROOT, 'bin', 'almoner'), args, { env: { ...process.env, DATABASE_URL: url }, maxBuffer: 1 << 30 }, (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return reject(err);
        if (err) process.stderr.write(stderr);
        resolve({ ms: performance.now() - t, code: err ? Number(err.code) : 0, lines: stdout.split('\n').length - 1 });
      }),
    );
  });
}

async function main(): Promise<void> {
  const dir = makeTempDir();
  const db = sqliteDatabase(dir);
  const path = join(dir, 'almoner.db');
  const charity = await createCharity(db.url);
  await fill(db.url);
  const server = await startAlmoner(db.url, dir, 'erasure', 'warn');
  const erase = ['donor', 'erase', '--email', DONOR];
  // Each run's commands are started together.
  const runs: [string, string[][]][] = [
    ['retention apply --dry-run', [['retention', 'apply', '--dry-run']]],
    ['retention apply', [['retention', 'apply']]],
    ['donor erase --dry-run', [[...erase, '--dry-run']]],
    ['donor erase', [erase]],
    ['donor erase (again: found by reference)', [erase]],
    ['retention apply (erased, kept)', [['retention', 'apply']]],
    // Each erases again what the other erased after it had read it, and works those out afresh.
    ['donor erase, twice at once', [erase, erase]],
    ['donor erase and retention apply at once', [erase, ['retention', 'apply']]],
  ];
  console.log(`${KEPT.toLocaleString('en-GB')} gift-aided donations of one donor, kept for Gift Aid; 1,000 of another`);
  console.log('command | whole command | longest wait for the write lock | creates meanwhile | slowest create');
  for (const [name, args] of runs) {
    await sleep(200);
    const probe = lockProbe(path);
    const creates = createsMeanwhile(server.url, charity);
    const done = await Promise.all(args.map((a) => almoner(db.url, a)));
    const { longestMs } = await probe.stop();
    const { statuses, slowestMs } = await creates.stop();
    const commands = done.map((run) => `${(run.ms / 1000).toFixed(2)} s (exit ${run.code}, ${run.lines} lines)`).join(', ');
    console.log(`${name} | ${commands} | ${(longestMs / 1000).toFixed(3)} s | ${JSON.stringify(statuses)} | ${(slowestMs / 1000).toFixed(3)} s`);
  }
  await stop(server.child);
}

try {
  await main();
} finally {
  await cleanUp();
}
