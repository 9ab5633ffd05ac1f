// A donor's erasure reads every address before its write transaction (donorScan), so that on SQLite
// the server's creates do not wait for the whole table; inside the transaction it reads again only
// what the scan found and what was recorded since. A donation of theirs recorded between the two is
// erased too, and one erased meanwhile is read as it is now.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { signUpCharity } from '../../src/charities/signup.js';
import { donationsWithCharity, donorScan } from '../../src/store/donation-query.js';
import { openStore } from '../../src/store/open.js';
import { validDonation } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import type { Database } from '../../src/store/schema.js';

for (const backend of BACKENDS) {
  describe(`a donor's scan, then the rows since [${backend.name}]`, () => {
    test('what the scan found, read again, and what was recorded after it: nothing else', async () => {
      const database = await backend.createDatabase();
      const store = await openStore(database.location);
      try {
        const db = (store as unknown as { db: Kysely<Database> }).db; // the store's own connection, as the erasure reads through it
        const { charity } = await signUpCharity(store, { name: 'Scan', email: 'scan@example.org' });
        const record = async (email: string) => (await store.recordDonation(charity.id, validDonation(email))).id;
        const first = await record('Ann.Donor@Example.org');
        await record('someone.else@example.org');
        const scanned = await donorScan(db, 'ann.donor@example.org');
        assert.deepEqual(scanned.ids, [first]);
        const after = await record('ann.donor@example.org'); // between the scan and the erasure's transaction
        await record('someone.else@example.org');
        const ids = async () => (await (await donationsWithCharity(db, backend.name, { donorEmail: 'ANN.DONOR@example.org', donorScanned: scanned })).execute()).map((r) => Number(r.id)).sort((a, b) => a - b);
        assert.deepEqual(await ids(), [first, after]);
        // Erased in full meanwhile (another erasure): no longer theirs by address or reference.
        await store.donors.erase({ email: 'ann.donor@example.org', today: '2040-01-01', dryRun: false });
        assert.deepEqual(await ids(), [], 'erased in full, nothing of theirs is left to find');
      } finally {
        await store.close();
        await database.drop();
      }
    });
  });
}

// On PostgreSQL a donation's id is taken from the sequence before its statement commits, ahead of need
// under load (DonationIds), and another instance or worker may commit a larger one first: id order is
// recording order only to within about a second. A donation of theirs committed after the scan under an
// id below the largest it read was read neither as one it found nor as one recorded since, and stayed
// unerased while the erasure said it had erased all of theirs (until a review of 2026-11-30). SQLite has
// one writer, whose ids commit in order: there the row is put under an id the scan did not see by hand,
// so that the same reading is tried on both.
for (const backend of BACKENDS) {
  describe(`a donor's scan, and a donation committed after it under a smaller id [${backend.name}]`, () => {
    test('is erased with the rest, as one transaction would have found it', async () => {
      const database = await backend.createDatabase();
      const store = await openStore(database.location);
      let late: pg.Client | undefined;
      try {
        const db = (store as unknown as { db: Kysely<Database> }).db;
        const { charity } = await signUpCharity(store, { name: 'Scan', email: 'scan@example.org' });
        const record = async (email: string) => (await store.recordDonation(charity.id, validDonation(email))).id;
        const first = await record('ann.donor@example.org');
        const columns = Object.keys(await db.selectFrom('donations').selectAll().where('id', '=', first).executeTakeFirstOrThrow()).filter((c) => c !== 'id');
        const copy = async (id: number, email: string) =>
          sql`insert into donations (id, ${sql.join(columns.map((c) => sql.ref(c)))}) select ${id}, ${sql.join(columns.map((c) => (c === 'donor_email' ? sql`${email}` : sql.ref(c))))} from donations where id = ${first}`.execute(db);
        let inFlight: number;
        let after: number;
        let commit: () => Promise<void>;
        if (backend.name === 'postgres') {
          // Another instance's statement: its id taken, not yet committed; then a create committed under a larger id.
          const client = (late = new pg.Client({ connectionString: database.url }));
          await client.connect();
          await client.query('begin');
          const names = columns.join(', ');
          inFlight = Number((await client.query<{ id: string }>(`insert into donations (${names}) select ${names} from donations where id = $1 returning id`, [first])).rows[0]!.id);
          after = await record('someone.else@example.org');
          commit = async () => void (await client.query('commit'));
        } else {
          inFlight = first + 1;
          after = first + 2;
          await copy(after, 'someone.else@example.org');
          commit = async () => void (await copy(inFlight, 'ann.donor@example.org'));
        }
        assert.ok(after > inFlight);

        let committed = false;
        const erasure = await store.donors.erase({
          email: 'ann.donor@example.org',
          today: '2040-01-01',
          dryRun: false,
          beforeWriting: async () => {
            await commit(); // after the scan, before the erasure's transaction
            committed = true;
          },
        });
        assert.ok(committed);
        assert.deepEqual(erasure.donations.map((d) => d.id), [first, inFlight], 'both of theirs found, as one transaction begun now would');
        const left = await db.selectFrom('donations').select('id').where('donor_email', '=', 'ann.donor@example.org').execute();
        assert.deepEqual(left, [], 'nothing of theirs left unerased');
        const untouched = await db.selectFrom('donations').select('donor_email').where('id', '=', after).executeTakeFirstOrThrow();
        assert.equal(untouched.donor_email, 'someone.else@example.org');
      } finally {
        await late?.end();
        await store.close();
        await database.drop();
      }
    });
  });
}
