// One gift recorded twice (src/giftaid/twins.ts): which donations a claim leaves for a person to claim by hand.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { erasureOf } from '../../src/donations/erasure.js';
import { TwinFinder, twinsAmong, type GiftFacts } from '../../src/giftaid/twins.js';
import { erasable } from '../support/app.js';

const gift = (id: number, overrides: Partial<GiftFacts> = {}): GiftFacts => ({
  id,
  payment_confirmation_number: null,
  donor_email: 'jane.doe@example.com',
  donor_first_name: 'Jane',
  donor_last_name: 'Doe',
  donor_address: 'Flat 3, 12 High Street',
  donor_city: 'London',
  donor_postcode: 'SW1A 1AA',
  amount_minor: 2500,
  donation_date: '2026-03-02T10:00:00.000000Z',
  recorded_at: '2026-03-02T10:00:01.000000Z',
  gift_aid: true,
  ...overrides,
});

/** A gift sent without a date: dated the moment it was recorded. */
const undated = (id: number, at: string, overrides: Partial<GiftFacts> = {}): GiftFacts => gift(id, { donation_date: at, recorded_at: at, ...overrides });

/** The twin found for each donation, by id, among them all. */
async function twins(...donations: GiftFacts[]): Promise<Record<number, number | undefined>> {
  const twinOf = await twinsAmong(donations, donations);
  // As a claim finds them (cli/giftaid.ts): each candidate's twin by its id alone, from what TwinFinder kept of it.
  const finder = new TwinFinder();
  for (const d of donations) finder.add(d);
  await finder.read(donations);
  for (const d of donations) assert.deepEqual(finder.twinOfCandidate(d.id), twinOf(d), `donation ${d.id}`);
  return Object.fromEntries(donations.map((d) => [d.id, twinOf(d)?.id]));
}

describe('one gift recorded twice', () => {
  test('the same donor, day and amount: the later record is the earlier one again, sent without a reference or with the same one', async () => {
    assert.deepEqual(await twins(gift(1), gift(2)), { 1: undefined, 2: 1 });
    assert.deepEqual(await twins(gift(1, { payment_confirmation_number: 'ch_1' }), gift(2, { payment_confirmation_number: 'ch_1' })), { 1: undefined, 2: 1 });
    // In any order: the lower id is the first record.
    assert.deepEqual(await twins(gift(7), gift(3), gift(5)), { 7: 3, 3: undefined, 5: 3 });
  });

  test("read as HMRC's schedule reads the donor: names in any case, titles aside, the house from the address, the postcode as meant; the same UK day at other hours", async () => {
    const again = gift(2, { donor_email: 'Jane.Doe@Example.COM', donor_first_name: 'Mrs JANE', donor_address: 'flat 3, 12 high street, London', donor_postcode: 'sw1a1aa', donation_date: '2026-03-02T23:30:00.000000Z' });
    assert.deepEqual(await twins(gift(1), again), { 1: undefined, 2: 1 });
    // 23:30 UTC on 1 July is 00:30 on 2 July in London: the UK day is the gift's day, as in the schedule.
    const summer = gift(3, { donation_date: '2026-07-02T09:00:00.000000Z' });
    assert.deepEqual(await twins(summer, gift(4, { donation_date: '2026-07-01T23:30:00.000000Z' })), { 3: undefined, 4: 3 });
  });

  test("after the donor's erasure too: what it keeps (names, house, postcode) is what tells the gift (an erased donor's twin was claimed; a review)", async () => {
    const erased = (d: GiftFacts): GiftFacts => ({ ...d, ...erasureOf(erasable({ ...d, gift_aid: true }), '2026-11-29').set }) as GiftFacts;
    assert.equal(erased(gift(1)).donor_address, 'Flat 3, 12', 'the house alone is kept');
    assert.equal(erased(gift(1)).donor_city, null);
    assert.deepEqual(await twins(erased(gift(1)), gift(2)), { 1: undefined, 2: 1 });
    assert.deepEqual(await twins(erased(gift(1)), erased(gift(2))), { 1: undefined, 2: 1 });
    assert.deepEqual(await twins(gift(1), erased(gift(2, { payment_confirmation_number: 'ch_1' }))), { 1: undefined, 2: 1 });
  });

  test('a record without Gift Aid is never claimed, so a gift sent again with it (to add Gift Aid) is no twin of it (set aside as claimed once; a review)', async () => {
    assert.deepEqual(await twins(gift(1, { gift_aid: false }), gift(2)), { 1: undefined, 2: undefined });
    // Of a third record, the Gift Aid one is the first: claimed once, through it.
    assert.deepEqual(await twins(gift(1, { gift_aid: false }), gift(2), gift(3)), { 1: undefined, 2: undefined, 3: 2 });
  });

  test('two different payment references are two payments, however alike; one with a reference and one without may be one', async () => {
    assert.deepEqual(await twins(gift(1, { payment_confirmation_number: 'ch_1' }), gift(2, { payment_confirmation_number: 'ch_2' })), { 1: undefined, 2: undefined });
    assert.deepEqual(await twins(gift(1, { payment_confirmation_number: 'ch_1' }), gift(2)), { 1: undefined, 2: 1 });
    assert.deepEqual(await twins(gift(1), gift(2, { payment_confirmation_number: 'ch_1' })), { 1: undefined, 2: 1 });
    // The second of three: ch_2 differs from ch_1, but the first (none) may be it.
    assert.deepEqual(await twins(gift(1), gift(2, { payment_confirmation_number: 'ch_1' }), gift(3, { payment_confirmation_number: 'ch_2' })), { 1: undefined, 2: 1, 3: 1 });
  });

  test('two e-mail addresses are two people, however alike (a couple by initials, a parent and child at one house), unless one was erased', async () => {
    const couple = [gift(1, { donor_first_name: 'Mr J', donor_email: 'john@example.com' }), gift(2, { donor_first_name: 'Mrs J', donor_email: 'jane@example.com' })];
    assert.deepEqual(await twins(...couple), { 1: undefined, 2: undefined });
  });

  test('another day, amount, name, house or postcode is another gift', async () => {
    for (const other of [
      { donation_date: '2026-03-03T10:00:00.000000Z' },
      { amount_minor: 2501 },
      { donor_first_name: 'John' },
      { donor_last_name: 'Dee' },
      { donor_address: 'Flat 4, 12 High Street' },
      { donor_address: '14 High Street' },
      { donor_postcode: 'SW1A 2AA' },
    ]) {
      assert.deepEqual(await twins(gift(1, other), gift(2)), { 1: undefined, 2: undefined }, JSON.stringify(other));
    }
  });

  test('sent again without a date across a UK midnight: recorded within an hour of each other, one gift; further apart, or either sent with its date, two', async () => {
    // A review's retry: 23:59:58 and, 3 s later, 00:00:01 the next day (winter: UTC is UK time).
    assert.deepEqual(await twins(undated(1, '2026-11-28T23:59:58.000000Z'), undated(2, '2026-11-29T00:00:01.000000Z'), undated(3, '2026-11-29T00:00:01.500000Z')), { 1: undefined, 2: 1, 3: 1 });
    // In summer, UK midnight is 23:00 UTC.
    assert.deepEqual(await twins(undated(1, '2026-07-01T22:59:00.000000Z'), undated(2, '2026-07-01T23:01:00.000000Z')), { 1: undefined, 2: 1 });
    assert.deepEqual(await twins(undated(1, '2026-11-28T23:30:00.000000Z'), undated(2, '2026-11-29T00:30:00.000000Z')), { 1: undefined, 2: 1 }, 'an hour apart');
    assert.deepEqual(await twins(undated(1, '2026-11-28T23:29:59.000000Z'), undated(2, '2026-11-29T00:30:00.000000Z')), { 1: undefined, 2: undefined }, 'more than an hour apart');
    // Gifts sent with their date are told by it: a daily gift imported at once is a gift a day.
    assert.deepEqual(
      await twins(gift(1, { donation_date: '2026-11-28T00:00:00.000000Z', recorded_at: '2026-11-29T09:00:00.000000Z' }), gift(2, { donation_date: '2026-11-29T00:00:00.000000Z', recorded_at: '2026-11-29T09:00:00.000001Z' })),
      { 1: undefined, 2: undefined },
    );
    assert.deepEqual(await twins(undated(1, '2026-11-28T23:59:58.000000Z'), gift(2, { donation_date: '2026-11-29T00:00:00.000000Z', recorded_at: '2026-11-29T00:00:01.000000Z' })), { 1: undefined, 2: undefined });
    // Said as it is: across midnight, not on the same day.
    const pair = [undated(1, '2026-11-28T23:59:58.000000Z'), undated(2, '2026-11-29T00:00:01.000000Z')];
    assert.deepEqual((await twinsAmong(pair, pair))(pair[1]!), { id: 1, acrossMidnight: true });
    // Away from midnight, only the day tells (what was looked for across days is only what can cross one: a review found every gift sent without a date looked for, twice as slow).
    assert.deepEqual(await twins(undated(1, '2026-11-28T12:00:00.000000Z'), undated(2, '2026-11-28T12:30:00.000000Z')), { 1: undefined, 2: 1 });
    // Another donor or amount is another gift, however close.
    assert.deepEqual(await twins(undated(1, '2026-11-28T23:59:58.000000Z'), undated(2, '2026-11-29T00:00:01.000000Z', { amount_minor: 2600 })), { 1: undefined, 2: undefined });
    assert.deepEqual(await twins(undated(1, '2026-11-28T23:59:58.000000Z'), undated(2, '2026-11-29T00:00:01.000000Z', { donor_first_name: 'John' })), { 1: undefined, 2: undefined });
  });

  test('only the candidates are looked up; the others are where their earlier records are found', async () => {
    const twinOf = await twinsAmong([gift(5)], [gift(2, { donor_first_name: 'John' }), gift(3), gift(5), gift(4)]);
    assert.deepEqual(twinOf(gift(5)), { id: 3, acrossMidnight: false });
    assert.equal(twinOf(gift(9, { donor_first_name: 'John' })), undefined, 'not a candidate: not looked for');
  });

  test('a payment reference alone is not enough: the same placeholder sent with every gift ("N/A") makes no twins of different donors', async () => {
    assert.deepEqual(await twins(gift(1, { payment_confirmation_number: 'N/A' }), gift(2, { payment_confirmation_number: 'N/A', donor_first_name: 'John' })), {
      1: undefined,
      2: undefined,
    });
  });
});
