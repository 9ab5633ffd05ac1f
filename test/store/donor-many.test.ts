// A donor with more donations than a statement may have parameters (SQLite's 32,766, PostgreSQL's
// 65,535): a charity that records cash collections under one placeholder address has them. Their
// export and their erasure named each donation's id as a parameter of its own and failed ("too many
// SQL variables"; PostgreSQL's bind message refused), and an erasure changed each donation with a
// statement of its own. Now the ids go as one parameter, and donations changed alike in one statement.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { signUpCharity } from '../../src/charities/signup.js';
import { openStore } from '../../src/store/open.js';
import type { Database } from '../../src/store/schema.js';
import { validDonation } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';

/** Just past each backend's limit on a statement's parameters. */
const PAST_THE_LIMIT = { sqlite: 33_000, postgres: 66_000 };

for (const backend of BACKENDS) {
  const MANY = PAST_THE_LIMIT[backend.name];
  describe(`a donor with ${MANY.toLocaleString('en-GB')} donations [${backend.name}]`, () => {
    test('is exported whole, and erased whole, and nobody else is', async () => {
      const database = await backend.createDatabase();
      const store = await openStore(database.location);
      try {
        const db = (store as unknown as { db: Kysely<Database> }).db;
        const { charity } = await signUpCharity(store, { name: 'Collections', email: 'collections@example.org' });
        const first = await store.recordDonation(charity.id, validDonation('cash@example.org'));
        const other = await store.recordDonation(charity.id, validDonation('someone.else@example.org'));
        // The first donation again, MANY - 1 times, in one statement.
        const row = await db.selectFrom('donations').selectAll().where('id', '=', first.id).executeTakeFirstOrThrow();
        const columns = sql.join(Object.keys(row).filter((c) => c !== 'id').map((c) => sql.ref(c)));
        const series = backend.name === 'postgres' ? sql`generate_series(1, ${MANY - 1})` : sql`(with recursive n(i) as (select 1 union all select i + 1 from n where i < ${MANY - 1}) select i from n)`;
        await sql`insert into donations (${columns}) select ${columns} from donations, ${series} as s where donations.id = ${first.id}`.execute(db);

        let exported = 0;
        for await (const d of store.exportDonations({ donorEmail: 'CASH@example.org' })) {
          assert.equal(d.donor_email, 'cash@example.org');
          exported++;
        }
        assert.equal(exported, MANY);

        // A dry run finds them all and changes nothing (the README says `--dry-run` is tested at this size too).
        const dry = await store.donors.erase({ email: 'CASH@example.org', today: '2040-01-01', dryRun: true });
        assert.equal(dry.donations.length, MANY);
        const still = await db.selectFrom('donations').select((eb) => eb.fn.countAll<number>().as('n')).where('donor_email', '=', 'cash@example.org').executeTakeFirstOrThrow();
        assert.equal(Number(still.n), MANY, 'a dry run erases nothing');

        const erasure = await store.donors.erase({ email: 'cash@example.org', today: '2040-01-01', dryRun: false });
        assert.equal(erasure.donations.length, MANY);
        const left = await db.selectFrom('donations').select((eb) => eb.fn.countAll<number>().as('n')).where('donor_email', '=', 'cash@example.org').executeTakeFirstOrThrow();
        assert.equal(Number(left.n), 0, 'every one of their donations erased');
        const untouched = await db.selectFrom('donations').select(['donor_email', 'erased_at']).where('id', '=', other.id).executeTakeFirstOrThrow();
        assert.deepEqual(untouched, { donor_email: 'someone.else@example.org', erased_at: null });
      } finally {
        await store.close();
        await database.drop();
      }
    });
  });
}
