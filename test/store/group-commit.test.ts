// Group commit: creates arriving together are committed together, yet each one is acknowledged only
// once committed, and one write that fails does not take its neighbours down with it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { signUpCharity } from '../../src/charities/signup.js';
import { fingerprint, IDEMPOTENCY } from '../../src/http/idempotency.js';
import { openStore } from '../../src/store/open.js';
import { DatabaseBudget, DatabaseDeadlineError } from '../../src/store/budget.js';
import { CommitOutcomeUnknownError } from '../../src/store/group-commit.js';
import type { Store } from '../../src/store/store.js';
import { validDonation as donation } from '../support/app.js';
import { BACKENDS, type TestDatabase } from '../support/backends.js';

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

    test('a burst of keyed creates, new keys, replays and a reused key together: each gets its own outcome and its own donation', async () => {
      const keyed = (i: number, email = `keyed-${i}@example.org`) => {
        const d = donation(email);
        return store.recordKeyedDonation(charityId, d, { key: `burst-key-${i}`, fingerprint: fingerprint(d), ttlMicros: IDEMPOTENCY.ttlMicros });
      };
      const first = await Promise.all(Array.from({ length: 50 }, (_, i) => keyed(i)));
      for (const [i, outcome] of first.entries()) {
        assert.equal(outcome.outcome, 'created');
        if (outcome.outcome === 'created') assert.equal(outcome.donation.donor_email, `keyed-${i}@example.org`);
      }
      // Replays, reused keys with another body and new keys, all at once (so in shared batches).
      const again = await Promise.all(Array.from({ length: 75 }, (_, i) => (i < 50 && i % 5 === 4 ? keyed(i, `other-${i}@example.org`) : keyed(i))));
      for (const [i, outcome] of again.entries()) {
        if (i >= 50) {
          assert.equal(outcome.outcome, 'created', `key ${i}`);
        } else if (i % 5 === 4) {
          assert.equal(outcome.outcome, 'mismatch', `key ${i}`);
          continue;
        } else {
          assert.equal(outcome.outcome, 'replay', `key ${i}`);
        }
        const { donation: answered } = outcome as { donation: { id: number; donor_email: string } };
        assert.equal(answered.donor_email, `keyed-${i}@example.org`, `key ${i} answers with its own donation`);
        if (i < 50) assert.equal(answered.id, (first[i] as { donation: { id: number } }).donation.id);
        assert.ok(await visible(answered.id));
      }
      const emails: string[] = [];
      for await (const d of observer.exportDonations({})) emails.push(d.donor_email);
      assert.equal(emails.filter((e) => e.startsWith('keyed-')).length, 75, 'one donation per key');
      assert.ok(!emails.some((e) => e.startsWith('other-')), 'a reused key stored nothing');
    });

    test('after a failed batch, a write whose deadline passes while it waits its turn is told and not stored (or, its commit sent, told the outcome is unknown); every write told it is stored is', async (t) => {
      await Promise.all(Array.from({ length: 10 }, (_, i) => store.recordDonation(charityId, donation(`warm-${i}@example.org`)))); // open the pool's connections
      const results = await Promise.allSettled(
        Array.from({ length: 40 }, (_, i) =>
          i === 0
            ? store.recordDonation(NO_SUCH_CHARITY, donation('poison-2@example.org')) // fails the batch: the others go one by one
            : store.recordDonation(charityId, donation(`turn-${i}@example.org`), { budget: new DatabaseBudget(i >= 35 ? 30 : 10_000) }),
        ),
      );
      const stored = new Set<string>();
      for await (const d of observer.exportDonations({})) stored.add(d.donor_email);
      for (const [i, r] of results.entries()) {
        if (i === 0) continue;
        const email = `turn-${i}@example.org`;
        if (r.status === 'fulfilled') assert.ok(stored.has(email), `${email} was acknowledged but is not stored`);
        else if (r.reason instanceof CommitOutcomeUnknownError) {
          // Its deadline passed after its commit was sent (PostgreSQL): told that nobody knows, which is true either way.
          assert.match(r.reason.message, /^the outcome of a commit is unknown: the database did not answer within the request's time/);
        } else {
          assert.ok(r.reason instanceof DatabaseDeadlineError, `${email}: ${String(r.reason)}`);
          assert.ok(!stored.has(email), `${email} was refused but is stored`);
        }
      }
      // A batch commits as one (a transaction on SQLite, a statement on PostgreSQL): a write with time to spare that shares one with a late write is
      // told with it, so how many are stored depends on timing. What matters is that no answer is wrong.
      const unknown = results.filter((r) => r.status === 'rejected' && r.reason instanceof CommitOutcomeUnknownError).length;
      t.diagnostic(`${results.filter((r) => r.status === 'fulfilled').length} stored, ${results.filter((r) => r.status === 'rejected').length - 1 - unknown} refused, ${unknown} unknown`);
    });
  });
}
