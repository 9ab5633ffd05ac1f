// Group commit: creates arriving together share a transaction, yet each one is acknowledged only
// once committed, and one write that fails does not take its neighbours down with it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { signUpCharity } from '../../src/charities/signup.js';
import type { NewDonation } from '../../src/donations/donation.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { exampleDonation } from '../support/app.js';
import { BACKENDS, type TestDatabase } from '../support/backends.js';

function donation(email: string): NewDonation {
  const v = validateDonation(exampleDonation({ donor_email: email }));
  if (!v.ok) assert.fail(JSON.stringify(v.errors));
  return v.donation;
}

const NO_SUCH_CHARITY = 999_999;

for (const backend of BACKENDS) {
  describe(`group commit [${backend.name}]`, () => {
    let database: TestDatabase;
    let store: Store;
    let observer: Store; // a second connection: what is committed, and nothing else, is visible to it
    let charityId: number;

    before(async () => {
      database = await backend.createDatabase();
      store = await openStore(database.location);
      observer = await openStore(database.location);
      charityId = (await signUpCharity(store, { name: 'Batch', email: 'b@example.org' })).charity.id;
    });
    after(async () => {
      await store?.close();
      await observer?.close();
      await database?.drop();
    });

    const visible = async (id: number) => (await observer.findDonation(id)) !== undefined;

    test('a burst of creates: each is committed (seen from another connection) when it resolves', async () => {
      const ids = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const stored = await store.recordDonation(charityId, donation(`burst-${i}@example.org`));
          assert.ok(await visible(stored.id), `donation ${stored.id} resolved before it was visible elsewhere`);
          return stored.id;
        }),
      );
      assert.equal(new Set(ids).size, 60);
    });

    test('one failing write in a burst fails alone; the others are stored', async () => {
      const results = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) =>
          i === 13
            ? store.recordDonation(NO_SUCH_CHARITY, donation('poison@example.org')) // refused by the foreign key
            : store.recordDonation(charityId, donation(`neighbour-${i}@example.org`)),
        ),
      );
      const failed = results.filter((r) => r.status === 'rejected');
      assert.equal(failed.length, 1);
      assert.match(String((failed[0] as PromiseRejectedResult).reason), /foreign key/i);
      for (const r of results) if (r.status === 'fulfilled') assert.ok(await visible(r.value.id));
      const emails: string[] = [];
      for await (const d of observer.exportDonations({})) emails.push(d.donor_email);
      assert.ok(!emails.includes('poison@example.org'), 'the failed write left nothing behind');
      assert.equal(emails.filter((e) => e.startsWith('neighbour-')).length, 29);
    });
  });
}
