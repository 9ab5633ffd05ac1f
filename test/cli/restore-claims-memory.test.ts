// A restore over a database with a large claim ledger: a scale review (2026-11-30) measured
// `restore --replace` at about 1 GB for a ledger of 629,000 claim rows, every row read at once (each
// an object, with its donor's reference), and on PostgreSQL written to the claims file as one
// string, though a restore takes in only the claims the backup lacks. Their rows are now read a
// claim's at a time, a page at a time, and written as they are read; on PostgreSQL the claims file
// is written a page at a time, and read back the same way. Scaled down here: a claim of 60,000 rows
// made after the backup, 1,000 of them of donations recorded after it too, kept under a 32 MB heap
// (it ran out of heap before, on both backends), every row as it was, in its place.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { donorReference } from '../../src/store/donation-query.js';
import { BACKENDS, queryPostgres, tempDir, type Backend, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

/** One statement on the database; its rows (int8 columns as numbers). */
async function query(backend: Backend, database: TestDatabase, statement: string): Promise<Array<Record<string, unknown>>> {
  if (backend.name === 'postgres') {
    const rows = await queryPostgres<Record<string, unknown>>(database.url, statement);
    return rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' && /^\d+$/.test(v) && k !== 'house' ? Number(v) : v])));
  }
  const location = parseDatabaseUrl(database.url);
  const db = new BetterSqlite3(location.dialect === 'sqlite' ? location.path : '', {});
  try {
    const prepared = db.prepare(statement);
    return prepared.reader ? (prepared.all() as Array<Record<string, unknown>>) : (prepared.run(), []);
  } finally {
    db.close();
  }
}

/** Gift Aid donations `from` to `to` of charity 1 (ids from..to in a new database), each its own donor, on 300 days of 2025. */
function donations(backend: Backend, from: number, to: number): string {
  const numbers = backend.name === 'postgres' ? `generate_series(${from}, ${to}) as i(k)` : `(with recursive i(k) as (select ${from} union all select k + 1 from i where k < ${to}) select k from i) as i`;
  const day = (hour: string) =>
    backend.name === 'postgres' ? `to_char(date '2025-01-01' + (k % 300), 'YYYY-MM-DD') || 'T${hour}:00:00.000000Z'` : `strftime('%Y-%m-%dT${hour}:00:00.000000Z', '2025-01-01', '+' || (k % 300) || ' days')`;
  return `insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, donor_phone, donor_address, donor_city, donor_postcode, donor_ip,
      gift_aid, amount, amount_minor, payment_method, payment_confirmation_number, donation_type, donation_date, zakat_donation, recorded_at)
    select 1, 'Jane', 'Doe', 'donor' || k || '@example.org', '07700 900123', (k % 9000 + 1) || ' High Street', 'London',
      'SW' || (k % 20 + 1) || ' ' || (k % 9 + 1) || 'AA', '192.0.2.1', 1, '5.00', 500, 'card', 'ch_' || k, 'one-time', ${day('10')}, 0, ${day('11')} from ${numbers}`;
}

const ROW = 'claim_id, donation_id, position, first_name, last_name, house, postcode, donation_day, amount_minor';
/** A claim's rows, both kinds, in position order. */
const claimRows = (claim: number) =>
  `select ${ROW} from giftaid_claim_donations where claim_id = ${claim} union all select ${ROW} from giftaid_claim_rows_without_donation where claim_id = ${claim} order by position`;

for (const backend of BACKENDS) {
  test(`restore --replace keeps a claim of 60,000 rows the backup lacks in a 32 MB heap, every row as it was [${backend.name}]`, async () => {
    assertBuilt();
    const database = await backend.createDatabase();
    try {
      const made = await almoner(database.url, ['charity', 'create', '--name', 'Many Gifts', '--email', 'many@example.org', '--json']);
      assert.equal(made.code, 0, made.stderr);
      await query(backend, database, donations(backend, 1, 59_000));
      const backup = join(tempDir(), backend.name === 'sqlite' ? 'before.db' : 'before.dump');
      if (backend.name === 'sqlite') assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
      else execFileSync('pg_dump', ['--format=custom', `--file=${backup}`, database.url]);
      // After the backup: 1,000 more donations, and a claim of all 60,000 (submitted), its rows in the order of their days.
      await query(backend, database, donations(backend, 59_001, 60_000));
      await query(
        backend,
        database,
        `insert into giftaid_claims (id, charity_id, status, up_to, claim_date, donation_count, total_minor, prepared_at, submitted_at, moves)
         ${backend.name === 'postgres' ? 'overriding system value' : ''} values (1, 1, 'submitted', '2025-12-31', '2026-01-02', 60000, 30000000, '2026-01-02T10:00:00.000Z', '2026-01-03T10:00:00.000Z', 1)`,
      );
      await query(
        backend,
        database,
        `insert into giftaid_claim_donations (claim_id, donation_id, position, live, first_name, last_name, house, postcode, donation_day, amount_minor)
         select 1, id, row_number() over (order by substr(donation_date, 1, 10), id), 1, 'Jane', 'Doe', (id % 9000 + 1) || '',
           'SW' || (id % 20 + 1) || ' ' || (id % 9 + 1) || 'AA', substr(donation_date, 1, 10), 500 from donations`,
      );
      const sent = await query(backend, database, claimRows(1));
      assert.equal(sent.length, 60_000);

      const run = await almoner(database.url, ['restore', backup, '--replace'], { NODE_OPTIONS: '--max-old-space-size=32' }, { timeoutMs: 90_000 }); // a small heap's work, slowed several times over on a loaded machine
      assert.equal(run.code, 0, run.stderr.slice(-2000));
      assert.match(run.stdout, /claim 1 \(submitted\) added; 1000 of its donations are not in the backup \(recorded after it\)/);
      // Every row as it went to HMRC, in its place: those of the backup's donations made from them, the others kept without.
      assert.deepEqual(await query(backend, database, claimRows(1)), sent);
      const [linked] = await query(backend, database, 'select count(*) as n from giftaid_claim_donations where claim_id = 1 and live = 1 and donation_id <= 59000');
      assert.equal(Number(linked!.n), 59_000);
      const kept = await query(backend, database, 'select donation_id, donor from giftaid_claim_rows_without_donation where claim_id = 1 order by position');
      assert.equal(kept.length, 1000);
      assert.deepEqual(kept.filter((r) => r.donor !== donorReference(`donor${Number(r.donation_id)}@example.org`)), [], "each kept with its donor's reference");
      if (backend.name === 'postgres') assert.deepEqual(readdirSync(dirname(backup)).filter((f) => f.includes('replaced-claims')), [], 'the claims file, once its claims are kept, goes');
    } finally {
      await database.drop();
    }
  });
}
