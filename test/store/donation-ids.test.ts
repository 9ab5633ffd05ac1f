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

/**
 * A sequence that notes each count it is asked for. Its answers come a few turns later, and with
 * `laterFirst` the later questions are answered first; `whileAnswering` runs before each answer.
 */
function sequence({ laterFirst = false, whileAnswering = () => {} }: { laterFirst?: boolean; whileAnswering?: () => void } = {}) {
  let last = 0;
  const asked: number[] = [];
  return {
    asked,
    take: async (count: number): Promise<number[]> => {
      asked.push(count);
      const ids = Array.from({ length: count }, () => ++last);
      for (let turn = laterFirst ? 10 - asked.length : 1; turn > 0; turn--) await new Promise((resolve) => setImmediate(resolve));
      whileAnswering();
      return ids;
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

  test('batches running at once each get all their own ids, none handed out twice, rising, whatever order the sequence answers in', async () => {
    const seq = sequence({ laterFirst: true });
    let now = 0;
    const ids = new DonationIds(seq.take, () => now);
    await ids.take(1, noQuery);
    now += 1;
    await ids.take(1, noQuery); // close together: 2 more taken ahead, 1 handed out: 1 waiting
    const sizes = [3, 2, 30, 1, 50, 7];
    // Started together: the first finds 1 waiting where it needs 3, and while it waits for the
    // sequence the others take what is waiting or ask for more; the answers come last question first.
    const batches = await Promise.all(sizes.map((n) => ids.take(n, noQuery)));
    batches.forEach((b, i) => assert.equal(b.length, sizes[i], `batch ${i} got ${b.length} of its ${sizes[i]} ids`));
    const all = batches.flat();
    assert.equal(new Set(all).size, all.length, 'no id twice');
    assert.ok(!all.includes(1) && !all.includes(2), 'none of those handed out before');
    for (const b of batches) assert.deepEqual(b, [...b].sort((x, y) => x - y), 'rising within a batch');
  });

  test('what several answers leave waiting is handed out in rising order', async () => {
    const seq = sequence({ laterFirst: true });
    let now = 0;
    const ids = new DonationIds(seq.take, () => now);
    await ids.take(20, noQuery);
    now += 1;
    await ids.take(20, noQuery); // 40 taken ahead (21 to 60), 21 to 40 handed out: 41 to 60 waiting
    // Two batches of 30 find 20 waiting and each takes 40 more, 61 to 100 and 101 to 140; the second
    // answer comes first, and its batch takes what is waiting then (41 to 60, 101 to 110).
    const resolved: number[][] = [];
    await Promise.all([30, 30].map((n) => ids.take(n, noQuery).then((b) => resolved.push(b))));
    assert.deepEqual(seq.asked, [20, 40, 40, 40]);
    const last = resolved[1]!;
    const next: number[] = [];
    for (let i = 0; i < 5; i++) next.push(...(await ids.take(10, noQuery)));
    const handedOut = [...last, ...next];
    assert.deepEqual(handedOut, [...handedOut].sort((x, y) => x - y), `rising: ${handedOut.join(' ')}`);
  });

  test('ids that go stale while the sequence answers are dropped too', async () => {
    let now = 0;
    let slow = false;
    const seq = sequence({ whileAnswering: () => void (slow && (now += ID_FRESH_MS + 1)) });
    const ids = new DonationIds(seq.take, () => now);
    await ids.take(2, noQuery);
    now += 1;
    await ids.take(2, noQuery); // 4 more taken ahead (3 to 6), 3 and 4 handed out: 5 and 6 waiting
    now += 1;
    slow = true;
    assert.deepEqual(await ids.take(4, noQuery), [7, 8, 9, 10], 'the sequence answered after 5 and 6 had gone stale');
  });
});

for (const backend of BACKENDS.filter((b) => b.name === 'postgres')) {
  describe(`donation ids from the sequence [${backend.name}]`, () => {
    test('a create at a quiet moment takes its own id and no more; bursts take ahead, each id stored once; what is left over goes stale', async () => {
      const database = await backend.createDatabase();
      let now = 0;
      const store = await openStore(database.location, { clock: () => now });
      try {
        const { charity } = await signUpCharity(store, { name: 'Ids', email: 'ids@example.org' });
        const lastValue = async () => {
          const [row] = await queryPostgres<{ last_value: string }>(database.url, "select last_value from pg_sequences where sequencename = 'donations_id_seq'");
          return Number(row!.last_value);
        };
        const first = await store.recordDonation(charity.id, validDonation('first@example.org'));
        now += 1; // close together: the next taking takes ahead
        const second = await store.recordDonation(charity.id, validDonation('second@example.org'));
        assert.ok((await lastValue()) > second.id, 'taken ahead of a create close after another');
        now += ID_FRESH_MS + 1;
        const quiet = await store.recordDonation(charity.id, validDonation('quiet@example.org'));
        assert.ok(quiet.id > second.id + 1, 'the ids left over had gone stale');
        assert.equal(await lastValue(), quiet.id, 'nothing taken ahead of a create at a quiet moment');
        const recorded = [first, second, quiet];
        for (let burst = 0; burst < 5; burst++) {
          recorded.push(...(await Promise.all(Array.from({ length: 100 }, (_, i) => store.recordDonation(charity.id, validDonation(`donor${burst}.${i}@example.org`))))));
          now += 1;
        }
        const ids = recorded.map((d) => d.id);
        assert.equal(new Set(ids).size, ids.length, 'no id twice');
        const [stored] = await queryPostgres<{ n: string; rows: string }>(database.url, 'select count(distinct id) as n, count(*) as rows from donations');
        assert.equal(Number(stored!.n), ids.length);
        assert.equal(Number(stored!.rows), ids.length);
        // Each taking is at most MAX_ID_BLOCK beyond its batch's own, and up to poolMax batches take at once.
        assert.ok((await lastValue()) - Math.max(...ids) <= MAX_ID_BLOCK * 10);
      } finally {
        await store.close();
        await database.drop();
      }
    });
  });
}
