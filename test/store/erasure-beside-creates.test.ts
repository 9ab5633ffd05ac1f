// A donor's erasure works out each donation's erasure (reading its house and postcode) before its
// write transaction, and within it reads again only each donation's id and erased_at. Worked out
// within it, 30,000 gift-aided donations still kept held SQLite's write lock for 5 s, and a running
// server answered creates 503 meanwhile. Here the erasure is paused once it has worked them out
// (its beforeWriting hook, so nothing depends on the machine's speed): a real server's creates all
// succeed meanwhile, and what changes meanwhile (a donation of theirs recorded, some of theirs
// erased by another request, a claim made) is erased as one transaction would have erased it.
// bench/erasure-lock.ts times the same with the commands themselves.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { signUpCharity } from '../../src/charities/signup.js';
import { ERASED_EMAIL } from '../../src/donations/erasure.js';
import { ERASED_CLAIM_DETAILS } from '../../src/store/claims.js';
import { openStore } from '../../src/store/open.js';
import type { Database } from '../../src/store/schema.js';
import type { Store } from '../../src/store/store.js';
import { basic, exampleDonation } from '../support/app.js';
import { BACKENDS, type TestDatabase } from '../support/backends.js';
import { assertBuilt } from '../support/cli.js';
import { create } from '../support/load.js';
import { ServerProcess } from '../support/server.js';

const TODAY = '2026-12-01';
const DONOR = 'kept.donor@example.org';
/** The donor's gift-aided donations still kept for Gift Aid: enough that working them out is real work, and the test no slower for it. */
const KEPT = 500;

const donation = (overrides: Record<string, unknown>) =>
  exampleDonation({ donor_email: DONOR, donor_address: 'Flat 2, 12 High Street', donor_postcode: 'SW1A 1AA', gift_aid: 'yes', donation_date: '01-06-2026', ...overrides });

for (const backend of BACKENDS) {
  describe(`a donor's erasure beside a running server [${backend.name}]`, () => {
    let database: TestDatabase;
    let store: Store;
    let server: ServerProcess;
    let charities: { id: number; username: string; authorization: string }[];

    before(async () => {
      assertBuilt();
      database = await backend.createDatabase();
      store = await openStore(database.location); // the CLI's settings, as `donor erase` opens it
      charities = [];
      for (const name of ['Kept', 'Other']) {
        const { charity, password } = await signUpCharity(store, { name, email: `${name.toLowerCase()}@example.org` });
        charities.push({ id: charity.id, username: charity.username, authorization: basic(charity.username, password) });
      }
      server = await new ServerProcess(database.url).listening();
    });
    after(async () => {
      server?.kill();
      await server?.exited;
      await store?.close();
      await database?.drop();
    });

    test('creates succeed while it works its erasures out, and what changed meanwhile is erased as one transaction would', async () => {
      const db = (store as unknown as { db: Kysely<Database> }).db;
      const record = async (charity: number, overrides: Record<string, unknown>) => {
        const answer = await create(server.url, charities[charity]!.authorization, donation(overrides));
        assert.ok(answer.kind === 'answered' && answer.status === 200, JSON.stringify(answer));
        return (answer.body as { data: { id: number } }).data.id;
      };
      const kept = await record(0, {});
      // The first of them again, KEPT - 1 times, in one statement.
      const columns = sql.join(Object.keys(await db.selectFrom('donations').selectAll().where('id', '=', kept).executeTakeFirstOrThrow()).filter((c) => c !== 'id').map((c) => sql.ref(c)));
      const series = backend.name === 'postgres' ? sql`generate_series(1, ${KEPT - 1})` : sql`(with recursive n(i) as (select 1 union all select i + 1 from n where i < ${KEPT - 1}) select i from n)`;
      await sql`insert into donations (${columns}) select ${columns} from donations, ${series} as s where donations.id = ${kept}`.execute(db);
      const old = await record(0, { donation_date: '15-03-2015' }); // its Gift Aid retention has ended: erased in full, and so is its claim's row
      const otherCharity = [await record(1, {}), await record(1, { gift_aid: 'no' })];

      let paused = false;
      let claimId = 0;
      let reference: Awaited<ReturnType<Store['donors']['erase']>> | undefined;
      let meanwhile: number | undefined;
      const erasure = await store.donors.erase({
        email: DONOR,
        today: TODAY,
        dryRun: false,
        beforeWriting: async () => {
          paused = true;
          // Creates, while the erasure has worked out the erasures of the donations it read: all answered at once.
          const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => create(server.url, charities[i % 2]!.authorization, exampleDonation({ donor_email: `meanwhile-${i}@example.org` }))));
          assert.deepEqual(answers.map((a) => (a.kind === 'answered' ? a.status : a.kind)), Array(20).fill(200));
          // A donation of theirs recorded meanwhile; theirs at the other charity erased meanwhile by a request of its own; a claim made.
          meanwhile = await record(0, { donation_date: '01-11-2026' });
          await store.donors.erase({ email: DONOR, charity: charities[1]!.username, today: TODAY, dryRun: false });
          claimId = (await store.claims.prepare({
            charityId: charities[0]!.id, upTo: '2026-11-01', claimDate: '2026-11-24', needsAttention: 0,
            rows: [{ donationId: old, firstName: 'Jane', lastName: 'Doe', houseNameOrNumber: 'Flat 2, 12', postcode: 'SW1A 1AA', donationDay: '2015-03-15', amountMinor: 2500 }],
          })).id;
          // What one transaction would do now, said by a dry run made now.
          reference = await store.donors.erase({ email: DONOR, today: TODAY, dryRun: true });
        },
      });

      assert.ok(paused, 'the erasure stopped once it had worked its erasures out');
      assert.deepEqual(erasure, reference, 'the erasure did what one transaction would have done once everything meanwhile was done');
      const ids = erasure.donations.map((d) => d.id);
      // Their KEPT, the old one and the one recorded meanwhile here, and the one kept at the other charity: the other one there, erased in full meanwhile, is theirs no longer.
      assert.equal(ids.length, KEPT + 3);
      assert.ok(ids.includes(meanwhile!) && ids.includes(otherCharity[0]!) && !ids.includes(otherCharity[1]!));
      const againAtOther = erasure.donations.find((d) => d.id === otherCharity[0])!;
      assert.deepEqual(againAtOther.erasure.erased, [], 'erased meanwhile: read as it is now, nothing left to erase');

      const row = (id: number) => db.selectFrom('donations').select(['donor_email', 'donor_address']).where('id', '=', id).executeTakeFirstOrThrow();
      assert.deepEqual(await row(meanwhile!), { donor_email: ERASED_EMAIL, donor_address: 'Flat 2, 12' }, 'recorded meanwhile, erased, its house kept for Gift Aid');
      assert.deepEqual(await row(old), { donor_email: ERASED_EMAIL, donor_address: null });
      const claimed = await db.selectFrom('giftaid_claim_donations').select(['first_name', 'last_name', 'house', 'postcode']).where('claim_id', '=', claimId).executeTakeFirstOrThrow();
      assert.deepEqual(claimed, ERASED_CLAIM_DETAILS, "the claim made meanwhile: its row's details erased with its donation's");
    });
  });
}
