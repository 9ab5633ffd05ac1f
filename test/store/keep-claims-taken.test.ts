// keepFrom writes a claim's rows as it reads them, a page at a time (since 2026-12-01: it read every
// row of the other ledger first), after a savepoint: a claim one of whose donations is in another
// live claim here is found so only on the page that holds it, and is then left out whole, what was
// written of it undone, as when it was looked at whole before anything was written.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { signUpCharity } from '../../src/charities/signup.js';
import { hmrcLastName, hmrcPostcode } from '../../src/giftaid/schedule.js';
import { LEDGER_PAGE, type LedgerCopy } from '../../src/store/claims.js';
import { openStore } from '../../src/store/open.js';
import { BACKENDS, queryPostgres, type Backend, type TestDatabase } from '../support/backends.js';

async function run(backend: Backend, database: TestDatabase, statement: string): Promise<Array<Record<string, unknown>>> {
  if (backend.name === 'postgres') return await queryPostgres<Record<string, unknown>>(database.url, statement);
  const db = new BetterSqlite3(database.location.dialect === 'sqlite' ? database.location.path : '');
  try {
    const prepared = db.prepare(statement);
    return prepared.reader ? (prepared.all() as Array<Record<string, unknown>>) : (prepared.run(), []);
  } finally {
    db.close();
  }
}

for (const backend of BACKENDS) {
  test(`a claim kept from another ledger whose donation on its second page is in a live claim here is left out whole, and the next kept [${backend.name}]`, async () => {
    const database = await backend.createDatabase();
    try {
      const setUp = await openStore(database.location);
      const { charity } = await signUpCharity(setUp, { name: 'Taken', email: 'taken@example.org' });
      await setUp.close();
      const n = LEDGER_PAGE + 200;
      const numbers = backend.name === 'postgres' ? `generate_series(1, ${n}) as i(k)` : `(with recursive i(k) as (select 1 union all select k + 1 from i where k < ${n}) select k from i) as i`;
      await run(
        backend,
        database,
        `insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, donor_postcode, gift_aid, amount, amount_minor, donation_type, donation_date, zakat_donation, recorded_at)
         select ${charity.id}, 'Jane', 'Doe', 'donor' || k || '@example.org', 'SW1A 1AA', 1, '5.00', 500, 'one-time', '2025-01-01T10:00:00.000000Z', 0, '2025-01-01T10:00:00.000000Z' from ${numbers}`,
      );
      // Claim 9 here, live, holds the donation on claim 1's second page.
      const taken = LEDGER_PAGE + 100;
      await run(
        backend,
        database,
        `insert into giftaid_claims (id, charity_id, status, up_to, claim_date, donation_count, total_minor, prepared_at, moves)
         ${backend.name === 'postgres' ? 'overriding system value' : ''} values (9, ${charity.id}, 'prepared', '2025-12-31', '2026-01-02', 1, 500, '2026-01-02T10:00:00.000Z', 0)`,
      );
      await run(
        backend,
        database,
        `insert into giftaid_claim_donations (claim_id, donation_id, position, live, first_name, last_name, house, postcode, donation_day, amount_minor) values (9, ${taken}, 1, 1, 'Jane', 'DOE', '1', 'SW1A 1AA', '2025-01-01', 500)`,
      );

      const at = '2026-01-05T10:00:00.000Z';
      const claim = (id: number, count: number) => ({ id, charity_id: charity.id, status: 'submitted' as const, up_to: '2025-12-31', claim_date: '2026-01-05', donation_count: count, total_minor: count * 500, prepared_at: at, submitted_at: at, paid_at: null, rejected_at: null, moves: 1 });
      const row = (claimId: number, donation: number, position: number) => ({
        claim_id: claimId, donation_id: donation, position, live: 1 as const, first_name: 'Jane', last_name: hmrcLastName('Doe'), house: '1', postcode: hmrcPostcode('SW1A 1AA').value, donation_day: '2025-01-01', amount_minor: 500,
      });
      // Claim 1: every donation (the first page's are free here); claim 2: the first donation alone, free once claim 1 is left out.
      const copy: LedgerCopy = {
        claims: [claim(1, n), claim(2, 1)],
        rows: [...Array.from({ length: n }, (_, i) => row(1, i + 1, i + 1)), row(2, 1, 1)],
        withoutDonation: [],
      };
      const store = await openStore(database.location);
      try {
        const kept = await store.claims.keepFrom(copy);
        assert.deepEqual(kept.refused, [{ id: 1, why: 'taken' }]);
        assert.deepEqual(kept.added, [{ id: 2, status: 'submitted', withoutDonation: 0 }]);
      } finally {
        await store.close();
      }
      assert.deepEqual((await run(backend, database, 'select id from giftaid_claims order by id')).map((r) => Number(r.id)), [2, 9]);
      const rows = await run(backend, database, 'select claim_id, donation_id, live from giftaid_claim_donations order by claim_id, donation_id');
      assert.deepEqual(rows.map((r) => [Number(r.claim_id), Number(r.donation_id), r.live === null ? null : Number(r.live)]), [[2, 1, 1], [9, taken, 1]], 'nothing of claim 1 is left');
      assert.deepEqual(await run(backend, database, 'select claim_id from giftaid_claim_rows_without_donation'), []);
    } finally {
      await database.drop();
    }
  });
}
