// A donor's erasure reads every address before its write transaction (donorScan), so that on SQLite
// the server's creates do not wait for the whole table; inside the transaction it reads again only
// what the scan found and what was recorded since. A donation of theirs recorded between the two is
// erased too, and one erased meanwhile is read as it is now.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Kysely } from 'kysely';
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
