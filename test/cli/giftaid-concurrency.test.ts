// No donation is ever in two live Gift Aid claims, however claims are prepared and rejected at
// once: real bin/almoner processes (as on separate instances) race each other on one database of
// each backend, in rounds that fast-check draws. After every round the claims are checked twice,
// independently of the ledger's own `live` flag: in the database, by each claim's status, and in
// the .ods files the processes wrote, read back by the independent reader.
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { signUpCharity } from '../../src/charities/signup.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { exampleDonation, tempDir } from '../support/app.js';
import { BACKENDS, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, startAlmoner } from '../support/cli.js';
import { giftAidRows, readOds } from '../support/ods.js';

/** Claimable donations per charity, dated over the last DAYS days; and some that never are. */
const CLAIMABLE = 120;
const UNCLAIMABLE = 6;
const DAYS = 40;

function todayInUk(): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
}
function daysBefore(day: string, n: number): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() - n);
  return d.toISOString().slice(0, 10);
}
const api = (day: string) => `${day.slice(8, 10)}-${day.slice(5, 7)}-${day.slice(0, 4)}`;

/** One round: claims started together (each up to some days back), then some of the live claims rejected. */
const round = fc.record({
  claimers: fc.array(fc.integer({ min: 0, max: DAYS }), { minLength: 2, maxLength: 4 }),
  rejectEvery: fc.integer({ min: 0, max: 3 }), // reject every n-th live claim afterwards (0: none)
});
const plan = fc.array(round, { minLength: 1, maxLength: 3 });

describe('concurrent claims never put a donation in two live claims', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`[${backend.name}]`, () => {
      let database: TestDatabase;
      let store: Store;
      let dir: string;
      const today = todayInUk();

      before(async () => {
        assertBuilt();
        database = await backend.createDatabase();
        store = await openStore(database.location);
        dir = tempDir();
      });
      after(async () => {
        await store?.close();
        await database?.drop();
        if (dir) rmSync(dir, { recursive: true, force: true });
      });

      /** A charity with its donations; the days of the claimable ones by their (unique) last name. */
      async function seed(run: number): Promise<{ username: string; dayOf: Map<string, string> }> {
        const { charity } = await signUpCharity(store, { name: `Racing Charity ${run}`, email: 'race@charity.example' });
        const dayOf = new Map<string, string>();
        for (let i = 0; i < CLAIMABLE + UNCLAIMABLE; i++) {
          const day = daysBefore(today, i % (DAYS + 1));
          const claimable = i < CLAIMABLE;
          const v = validateDonation(exampleDonation({ donor_last_name: `Racer${i}`, donor_postcode: claimable ? 'SW1A 1AA' : '', donation_date: api(day) }));
          assert.ok(v.ok);
          await store.recordDonation(charity.id, v.donation);
          if (claimable) dayOf.set(`Racer${i}`, day);
        }
        return { username: charity.username, dayOf };
      }

      test('rounds of racing claims and rejections', async () => {
        let run = 0;
        await fc.assert(
          fc.asyncProperty(plan, async (rounds) => {
            run++;
            const charity = await seed(run);
            /** Every claim made, with the last names in its files. */
            const made = new Map<number, string[]>();

            /** The live claims' last names, checked: no donation in two of them, by the database and by the files. */
            const liveNames = async (): Promise<Set<string>> => {
              assert.deepEqual(await inTwoLiveClaims(database), [], 'a donation in two live claims (database)');
              const statuses = await claimStatuses(database);
              const names = [...made].filter(([id]) => statuses.get(id) !== 'rejected').flatMap(([, n]) => n);
              assert.equal(new Set(names).size, names.length, 'a donation in two live claims (files)');
              return new Set(names);
            };

            for (const [r, { claimers, rejectEvery }] of rounds.entries()) {
              // The claims start together, and the database holds each one's write back until all
              // have read what they mean to claim: every round is a real race.
              const gate = await holdClaimWrites(database);
              const running = new Set<number>();
              const racing = Promise.all(
                claimers.map((back, k) => {
                  const claim = startAlmoner(database.url, ['giftaid', 'claim', '--charity', charity.username, '--to', daysBefore(today, back), '--out', join(dir, `run${run}-round${r}-${k}`), '--json']);
                  running.add(claim.pid);
                  return claim.done.finally(() => running.delete(claim.pid));
                }),
              );
              // A claim that finds nothing to claim finishes without waiting at the gate.
              await gate.release(() => [...running]);
              const results = await racing;
              for (const res of results) {
                assert.equal(res.code, 0, `a racing claim failed: exit ${res.code}\n${res.stderr}`);
                const out = JSON.parse(res.stdout) as { claim: number | null; files: string[] };
                if (out.claim === null) continue;
                made.set(out.claim, (await Promise.all(out.files.map(readOds))).flatMap((f) => giftAidRows(f).map((row) => row.lastName)));
              }

              // Nothing lost to the race: every claimable donation dated up to the latest --to of the
              // round is in a live claim now, whichever process took it.
              const live = await liveNames();
              const upTo = daysBefore(today, Math.min(...claimers));
              const due = [...charity.dayOf].filter(([, day]) => day <= upTo).map(([name]) => name);
              assert.deepEqual(
                due.filter((name) => !live.has(name)),
                [],
                'claimable donations that the racing claims reached but none took',
              );

              // Reject every n-th live claim; its donations go back into the pool for the next round.
              if (rejectEvery > 0) {
                const statuses = await claimStatuses(database);
                const liveIds = [...statuses].filter(([, status]) => status !== 'rejected').map(([id]) => id);
                for (const [k, id] of liveIds.entries()) {
                  if ((k + 1) % rejectEvery !== 0) continue;
                  const res = await almoner(database.url, ['giftaid', 'mark', String(id), 'rejected']);
                  assert.equal(res.code, 0, res.stderr);
                }
                await liveNames();
              }
            }
          }),
          { numRuns: 3 },
        );
      });
    });
  }
});

/**
 * Holds every write to giftaid_claims back: the claims read their donations, then wait at the insert
 * that records them until release(), so that they all write at once. On PostgreSQL an exclusive table
 * lock (reads still pass), released once every claim still running waits on it or behind it (a
 * charity's claims take turns: claims.ts takeTurn); on SQLite the write
 * lock, released once every claim still running sleeps in SQLite's busy handler (its main thread in
 * nanosleep, seen in /proc twice in a row: a claim's one write comes after its reads), or RACE_HOLD_MS
 * has passed (under the claims' 5 s busy timeout): a claim that arrives later only races less.
 */
async function holdClaimWrites(database: TestDatabase): Promise<{ release(running: () => number[]): Promise<void> }> {
  if (database.location.dialect === 'sqlite') {
    const db = new BetterSqlite3(database.location.path);
    db.exec('begin immediate');
    return {
      async release(running) {
        const deadline = Date.now() + RACE_HOLD_MS;
        let allWaiting = 0; // looks in a row that found every running claim waiting for the lock
        while (running().length > 0 && allWaiting < 2 && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          allWaiting = running().every(sleepsInBusyHandler) ? allWaiting + 1 : 0;
        }
        db.exec('rollback');
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: database.location.url });
  await client.connect();
  await client.query('begin');
  await client.query('lock table giftaid_claims in exclusive mode');
  return {
    async release(running) {
      const deadline = Date.now() + 20_000;
      // At the table lock, or, behind the one there, at the lock a claim of the charity takes its turn with (claims.ts takeTurn).
      const waiting = async () =>
        Number(
          (
            await client.query(
              `select count(*) as n from pg_locks where not granted and (relation = 'giftaid_claims'::regclass ` +
                `or (locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())))`,
            )
          ).rows[0].n,
        );
      while ((await waiting()) < running().length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      await client.query('rollback');
      await client.end();
    },
  };
}

/** Whether process `pid`'s main thread is asleep in nanosleep, as SQLite's busy handler sleeps (Linux). */
function sleepsInBusyHandler(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/wchan`, 'utf8').includes('nanosleep');
  } catch {
    return false; // gone, or no /proc: RACE_HOLD_MS decides
  }
}

const RACE_HOLD_MS = 2500;

/** Runs a query straight through the database's own driver, not through the store under test. */
async function query<T>(database: TestDatabase, text: string): Promise<T[]> {
  if (database.location.dialect === 'sqlite') {
    const db = new BetterSqlite3(database.location.path, { readonly: true });
    try {
      return db.prepare(text).all() as T[];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: database.location.url });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

/** Donations in more than one claim that is not rejected, by the claims' status alone (not the ledger's live flag). */
function inTwoLiveClaims(database: TestDatabase): Promise<unknown[]> {
  return query(
    database,
    `select d.donation_id from giftaid_claim_donations d join giftaid_claims c on c.id = d.claim_id
     where c.status <> 'rejected' group by d.donation_id having count(*) > 1`,
  );
}

async function claimStatuses(database: TestDatabase): Promise<Map<number, string>> {
  const rows = await query<{ id: number | string; status: string }>(database, 'select id, status from giftaid_claims order by id');
  return new Map(rows.map((r) => [Number(r.id), r.status]));
}
