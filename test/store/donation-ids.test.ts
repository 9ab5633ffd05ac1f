// PostgreSQL's donation ids taken ahead of need (DonationIds): under load a batch finds its ids
// ready and makes no round trip for them; at a quiet moment nothing is taken ahead, so nothing is
// left over; what is left over when a load stops is dropped a second later. The sequence here is a
// counter and the clock is moved by hand; the real sequence is used by every PostgreSQL create in
// the other tests (group-commit, scale-out, outage), which check each id is stored once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DonationIds, ID_BUSY_MS, ID_FRESH_MS, MAX_ID_BLOCK } from '../../src/store/donation-writes.js';
import { openStore } from '../../src/store/open.js';
import { signUpCharity } from '../../src/charities/signup.js';
import { validDonation } from '../support/app.js';
import { BACKENDS, queryPostgres } from '../support/backends.js';
import type { Query } from '../../src/store/statements.js';

/** A sequence that notes each count it is asked for, and answers a turn later. */
function sequence() {
  let last = 0;
  const asked: number[] = [];
  return {
    asked,
    take: async (count: number): Promise<number[]> => {
      asked.push(count);
      await Promise.resolve();
      return Array.from({ length: count }, () => ++last);
    },
  };
}

const noQuery = (() => {
  throw new Error('DonationIds passes the query on to the sequence, never runs it itself');
}) as unknown as Query;

describe('donation ids taken ahead (PostgreSQL)', () => {
  test('batches far apart take just their own ids: nothing left over, no gap', async () => {
    const seq = sequence();
    let now = 0;
    const ids = new DonationIds(seq.take, () => now);
    assert.deepEqual(await ids.take(3, noQuery), [1, 2, 3]);
    now += ID_BUSY_MS + 1;
    assert.deepEqual(await ids.take(2, noQuery), [4, 5]);
    now += 10 * ID_FRESH_MS;
    assert.deepEqual(await ids.take(1, noQuery), [6]);
    assert.deepEqual(seq.asked, [3, 2, 1]);
  });

  test('batches close together take more ahead, twice what was used, up to MAX_ID_BLOCK; then most batches make no round trip', async () => {
    const seq = sequence();
    let now = 0;
    const ids = new DonationIds(seq.take, () => now);
    const handedOut: number[] = [];
    for (let i = 0; i < 200; i++) {
      handedOut.push(...(await ids.take(20, noQuery)));
      now += 2; // a batch every 2 ms, 20 creates each: 10,000 a second
    }
    assert.deepEqual(handedOut, Array.from({ length: 4000 }, (_, i) => i + 1), 'every id once, rising, none skipped');
    assert.deepEqual(seq.asked.slice(0, 6), [20, 40, 80, 160, 320, MAX_ID_BLOCK]);
    assert.ok(seq.asked.every((n) => n <= MAX_ID_BLOCK));
    assert.ok(seq.asked.length < 20, `${seq.asked.length} round trips for 200 batches`);
  });

  test('ids left over when the load stops are dropped after ID_FRESH_MS, so id order stays near recording order', async () => {
    const seq = sequence();
    let now = 0;
    const ids = new DonationIds(seq.take, () => now);
    await ids.take(10, noQuery);
    now += 1;
    await ids.take(10, noQuery); // close together: 20 more taken ahead, 10 of them handed out
    assert.deepEqual(seq.asked, [10, 20]);
    now += ID_FRESH_MS - 1;
    assert.deepEqual(await ids.take(5, noQuery), [21, 22, 23, 24, 25], 'still fresh: handed out');
    now += 2;
    assert.deepEqual(await ids.take(1, noQuery), [31], 'stale: the 26 to 30 left over are dropped');
  });

  test('batches running at once each get their own ids, none handed out twice', async () => {
    const seq = sequence();
    let now = 0;
    const ids = new DonationIds(seq.take, () => now);
    await ids.take(4, noQuery);
    now += 1;
    // Started together: each finds too few, each asks, and the answers come in any order.
    const batches = await Promise.all([ids.take(30, noQuery), ids.take(3, noQuery), ids.take(50, noQuery), ids.take(7, noQuery)]);
    const all = batches.flat();
    assert.equal(new Set(all).size, all.length, 'no id twice');
    batches.forEach((b, i) => assert.equal(b.length, [30, 3, 50, 7][i]));
    for (const b of batches) assert.deepEqual(b, [...b].sort((x, y) => x - y), 'rising within a batch');
  });
});

for (const backend of BACKENDS.filter((b) => b.name === 'postgres')) {
  describe(`donation ids from the sequence [${backend.name}]`, () => {
    test('a create at a quiet moment takes its own id and no more; bursts take ahead, no further than MAX_ID_BLOCK, and each id is stored once', async () => {
      const database = await backend.createDatabase();
      const store = await openStore(database.location);
      try {
        const { charity } = await signUpCharity(store, { name: 'Ids', email: 'ids@example.org' });
        const lastValue = async () => {
          const [row] = await queryPostgres<{ last_value: string }>(database.url, "select last_value from pg_sequences where sequencename = 'donations_id_seq'");
          return Number(row!.last_value);
        };
        const one = await store.recordDonation(charity.id, validDonation('quiet@example.org'));
        assert.equal(await lastValue(), one.id, 'nothing taken ahead of a lone create');
        const recorded = [];
        for (let burst = 0; burst < 5; burst++) {
          recorded.push(...(await Promise.all(Array.from({ length: 100 }, (_, i) => store.recordDonation(charity.id, validDonation(`donor${burst}.${i}@example.org`))))));
        }
        const ids = recorded.map((d) => d.id);
        assert.equal(new Set(ids).size, ids.length, 'no id twice');
        const [stored] = await queryPostgres<{ n: string; rows: string }>(database.url, 'select count(distinct id) as n, count(*) as rows from donations');
        assert.equal(Number(stored!.n), ids.length + 1);
        assert.equal(Number(stored!.rows), ids.length + 1);
        const ahead = (await lastValue()) - Math.max(...ids);
        assert.ok(ahead >= 0 && ahead <= MAX_ID_BLOCK, `${ahead} ids taken ahead`);
      } finally {
        await store.close();
        await database.drop();
      }
    });
  });
}
