// A PostgreSQL restore's claims file, written a page of rows at a time and read back without holding
// its rows since 2026-12-01 (ledger-file.ts, JSON lines), and a file an older version wrote (one JSON
// object: no charities, no rows kept without their donation, no donor references) read as it was,
// each claim's rows in position order, a page at a time.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { ERASED_EMAIL } from '../../src/donations/erasure.js';
import { LEDGER_PAGE, pagesOf, readLedger, type LedgerCopy, type LedgerRow } from '../../src/store/claims.js';
import { readLedgerFile, writeLedgerFile } from '../../src/store/ledger-file.js';
import { openStore } from '../../src/store/open.js';
import { tempDir } from '../support/backends.js';

/** Every page of each claim's rows, as `rowsOf` gives them. */
async function pagesByClaim(ledger: { claims: Array<{ id: number }>; rowsOf(id: number): AsyncIterable<LedgerRow[]> }): Promise<Record<number, LedgerRow[][]>> {
  const pages: Record<number, LedgerRow[][]> = {};
  for (const { id } of ledger.claims) {
    pages[id] = [];
    for await (const page of ledger.rowsOf(id)) pages[id].push(page);
  }
  return pages;
}

test("a claims file holds the ledger, a line a row after a first line of the rest, and reads back as that ledger's rows, a page at a time", async () => {
  const path = join(tempDir(), 'almoner.db');
  await (await openStore(parseDatabaseUrl(`sqlite:${path}`))).close(); // the schema
  const db = new BetterSqlite3(path);
  try {
    const now = '2026-11-30T10:00:00.000Z';
    db.exec(`insert into charities (id, name, email, username, password_hash, active, created_at, updated_at) values (1, 'Alpha', 'a@example.org', 'alpha', 'x', 1, '${now}', '${now}')`);
    db.exec(`with recursive i(k) as (select 1 union all select k + 1 from i where k < 1200)
      insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, gift_aid, amount, amount_minor, donation_type, donation_date, zakat_donation, recorded_at)
      select 1, 'Jane', 'Doe', 'donor' || k || '@example.org', 1, '5.00', 500, 'one-time', '2025-01-01T10:00:00.000000Z', 0, '${now}' from i`);
    db.exec(`update donations set donor_email = '${ERASED_EMAIL}', erased_donor = 'kept-reference' where id = 2`);
    for (const id of [1, 2]) {
      db.exec(`insert into giftaid_claims (id, charity_id, status, up_to, claim_date, donation_count, total_minor, prepared_at, moves) values (${id}, 1, 'prepared', '2025-12-31', '2026-01-02', 1, 500, '${now}', 0)`);
    }
    // Claim 1: 1,200 rows, of which every seventh position is a row kept without its donation; claim 2: one of each.
    db.exec(`insert into giftaid_claim_donations (claim_id, donation_id, position, live, first_name, last_name, house, postcode, donation_day, amount_minor)
      select 1, id, id, 1, 'Jane', 'Doe', '1', 'SW1A 1AA', '2025-01-01', 500 from donations where id % 7 <> 0`);
    db.exec(`insert into giftaid_claim_rows_without_donation (claim_id, donation_id, position, first_name, last_name, house, postcode, donation_day, amount_minor, donor)
      select 1, 90000 + id, id, 'Gone', 'Doe', '1', 'SW1A 1AA', '2025-01-01', 500, 'ref-' || id from donations where id % 7 = 0`);
    db.exec(`insert into giftaid_claim_donations (claim_id, donation_id, position, live, first_name, last_name, house, postcode, donation_day, amount_minor) values (2, 7, 2, 1, 'Jane', 'Doe', '1', 'SW1A 1AA', '2025-01-01', 500)`);
    db.exec(`insert into giftaid_claim_rows_without_donation (claim_id, donation_id, position, first_name, last_name, house, postcode, donation_day, amount_minor, donor) values (2, 99999, 1, 'Gone', 'Doe', '1', 'SW1A 1AA', '2025-01-01', 500, null)`);

    const ledger = await readLedger(
      (table) => db.prepare("select 1 from sqlite_master where type = 'table' and name = ?").get(table) !== undefined,
      (query) => db.prepare(query).all() as Record<string, unknown>[],
    );
    const file = join(tempDir(), 'x.dump.replaced-claims-2026-12-01T00-00-00-000Z.json');
    const besideTrail = { entries: 3, last: '["a","b"]' };
    await writeLedgerFile(file, ledger, besideTrail);

    // The ledger read whole, as readLedger gave it until 2026-12-01, and written as JSON.stringify wrote it.
    const whole = async (kind: 'rows' | 'withoutDonation') => {
      const rows: LedgerRow[] = [];
      for await (const page of ledger.every(kind)) rows.push(...page);
      return rows;
    };
    const { claims, charities, largestDonationId, donationCount } = ledger;
    const copy = { claims, rows: await whole('rows'), withoutDonation: await whole('withoutDonation'), charities, largestDonationId, donationCount } as LedgerCopy;
    assert.equal(copy.rows.length + copy.withoutDonation.length, 1202);
    assert.equal(copy.rows.find((r) => r.donation_id === 2)?.donor, 'kept-reference', "an erased donation's row keeps its donor's kept reference");
    const lines = readFileSync(file, 'utf8').split('\n');
    assert.equal(lines.pop(), '', 'every line ended');
    assert.deepEqual(JSON.parse(lines[0]!), { format: 'almoner claims file, JSON lines', claims, charities, largestDonationId, donationCount, besideTrail });
    assert.deepEqual(lines.slice(1).map((l) => JSON.parse(l) as unknown), [...copy.rows.map((r) => ({ rows: r })), ...copy.withoutDonation.map((r) => ({ withoutDonation: r }))]);

    const read = readLedgerFile(file);
    assert.ok(read);
    assert.deepEqual(read.fields, { claims, charities, largestDonationId, donationCount, besideTrail });
    const pages = await pagesByClaim({ claims, rowsOf: read.rowsOf });
    assert.deepEqual(pages, await pagesByClaim(pagesOf(copy)));
    assert.deepEqual(pages, await pagesByClaim(ledger), 'as read from the database');
    assert.deepEqual(pages[1]!.map((p) => p.length), [LEDGER_PAGE, LEDGER_PAGE, 200]);
    assert.deepEqual(pages[1]!.flat().map((r) => r.position), Array.from({ length: 1200 }, (_, i) => i + 1));
    assert.deepEqual(pages[2]!.flat().map((r) => [r.position, r.donation_id]), [[1, 99999], [2, 7]]);
  } finally {
    db.close();
  }
});

test('a claims file an older version wrote is read as it was: its rows out of order put in order, a claim at a time', async () => {
  const row = (claim: number, position: number) => ({ claim_id: claim, donation_id: claim * 1000 + position, position, live: 1, first_name: 'A', last_name: 'B', house: '1', postcode: 'SW1A 1AA', donation_day: '2025-01-01', amount_minor: 500 });
  const claim = (id: number) => ({ id, charity_id: 1, status: 'submitted', up_to: '2025-12-31', claim_date: '2026-01-02', donation_count: 1, total_minor: 500, prepared_at: 'x', submitted_at: 'y', paid_at: null, rejected_at: null });
  // As written before 2026-11-29: no charities, no rows kept without their donation, no donor; claim 1's rows on either side of claim 2's, one out of order.
  const old = { claims: [claim(1), claim(2)], rows: [row(1, 2), row(1, 1), row(2, 1), ...Array.from({ length: 600 }, (_, i) => row(1, i + 3))] };
  const file = join(tempDir(), 'old.json');
  writeFileSync(file, JSON.stringify(old));
  const read = readLedgerFile(file);
  assert.ok(read);
  assert.deepEqual(read.fields, { claims: old.claims });
  const pages = await pagesByClaim({ claims: old.claims, rowsOf: read.rowsOf });
  assert.deepEqual(pages[1]!.map((p) => p.length), [LEDGER_PAGE, 102]);
  assert.deepEqual(pages[1]!.flat(), Array.from({ length: 602 }, (_, i) => row(1, i + 1)));
  assert.deepEqual(pages[2], [[row(2, 1)]]);

  // Neither: for the caller to read otherwise (a trail's lines), or refuse; so is a file of the lines cut short, or with a line of something else.
  const first = '{"format":"almoner claims file, JSON lines","claims":[]}\n';
  for (const text of ['{"claims":[],"rows":[]}\n{"claims":[],"rows":[]}\n', '[]', '{"claims":[],"rows":[1,]}', '{"claims":[],"rows":[{"claim_id":1}]', 'not json', `${first}{"rows":{"claim_id":1}}`, `${first}{"other":1}\n`, `${first}[1]\n`]) {
    writeFileSync(file, text);
    assert.equal(readLedgerFile(file), undefined, text);
  }
});
