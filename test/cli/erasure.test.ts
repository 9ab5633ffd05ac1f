// Erasure and retention (issue 14, items 2 and 3), on both backends: `donor erase` replaces a
// donor's personal data (never deletes a row), keeping on a gift-aided donation inside its
// retention period what HMRC needs until that period ends; `retention apply` erases what is due;
// both have dry runs and audit entries, and exports, claims and replays agree afterwards. Without
// the commands every test here fails; with erasure that ignored Gift Aid, the kept fields fail.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { signUpCharity } from '../../src/charities/signup.js';
import { ERASED_EMAIL, erasureOf, giftAidKeptUntil, yearsLater } from '../../src/donations/erasure.js';
import type { StoredDonation } from '../../src/donations/fields.js';
import { validateDonation } from '../../src/donations/validate.js';
import { fingerprint, IDEMPOTENCY } from '../../src/http/idempotency.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { BACKENDS, rawSql, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { erasable } from '../support/app.js';

const SAM = {
  donor_first_name: 'Sam',
  donor_last_name: 'Smith',
  donor_phone: '07700 900123',
  donor_address: '12 High Street',
  donor_city: 'London',
  donor_postcode: 'SW1A 1AA',
  donor_ip: '203.0.113.7',
  donation_type: 'one-time',
  payment_method: 'card',
  payment_confirmation_number: 'PAY-1',
};

async function record(store: Store, charityId: number, body: Record<string, unknown>): Promise<StoredDonation> {
  const v = validateDonation(body);
  assert.ok(v.ok, JSON.stringify(!v.ok && v.errors));
  return store.recordDonation(charityId, v.donation);
}

test('a gift-aided donation is kept until the same day seven years on: past six years after any accounting period of up to 12 months that holds it', () => {
  assert.equal(giftAidKeptUntil('2026-01-02'), '2033-01-02');
  // On 5 April, the last day of a tax year: a period of 6 April 2025 to 5 April 2026 holds it, and HMRC's six years after it end on 5 April 2032.
  assert.equal(giftAidKeptUntil('2025-04-05'), '2032-04-05');
  // A period of 1 January to 31 December holds 2 January 2026 and ends on 31 December 2026: six years on is 31 December 2032, which 5 April 2032 (the old rule) missed.
  assert.ok(giftAidKeptUntil('2026-01-02') >= '2032-12-31');
  assert.equal(giftAidKeptUntil('2024-02-29'), '2031-03-01', 'no 29 February in 2031: the day after 28 February');
  // Days compare as strings: a year in four digits, and none past 9999.
  assert.equal(giftAidKeptUntil('0215-03-15'), '0222-03-15');
  assert.ok(giftAidKeptUntil('0215-03-15') < '2026-11-27');
  assert.equal(giftAidKeptUntil('9992-06-01'), '9999-06-01');
  assert.equal(giftAidKeptUntil('9996-06-01'), '9999-12-31');
});

test('a blank field is nothing kept: an erasure does not say it keeps a blank last name or postcode (it did)', () => {
  const d = { ...SAM, donor_email: 'sam@example.org', donor_last_name: '', donor_postcode: '', gift_aid: true, donation_date: '2026-01-02T00:00:00.000000Z' };
  const erasure = erasureOf(erasable(d), '2026-11-28');
  assert.deepEqual(erasure.kept, ['donor_first_name', 'donor_address']);
  assert.equal(erasure.keptUntil, '2033-01-02');
  const blankOnly = erasureOf(erasable({ ...d, donor_first_name: '', donor_address: '' }), '2026-11-28');
  assert.deepEqual([blankOnly.kept, blankOnly.keptUntil], [[], null]);
});

test('an erasure keeps the house alone, not the street and village run on after it with no comma (kept whole for seven years until 2026-11-29)', () => {
  for (const [address, kept] of [
    ['Hillview Farm Long Road Ambridge', 'Hillview Farm'],
    ['Flat 3 Ivy Court 5 Elm Road, Ambridge', 'Flat 3, Ivy Court, 5'],
    ['Mrs Jane Smith, 12 High Street', '12'],
    // Read as a claim reads it, beside the donor's names and city (Sam Smith of London): until 2026-11-29 an erasure kept "Sam Smith, 12" and "Flat 3, London".
    ['Sam Smith, 12 High Street', '12'],
    ['Flat 3, London', 'Flat 3'],
    ['12 High Street, Flat 3', 'Flat 3, 12'],
  ]) {
    const d = { ...SAM, donor_email: 'sam@example.org', donor_address: address, gift_aid: true, donation_date: '2026-01-02T00:00:00.000000Z' };
    assert.equal(erasureOf(erasable(d), '2026-11-28').set.donor_address, kept, address);
  }
});

for (const backend of BACKENDS) {
  describe(`donor erase and retention apply [${backend.name}]`, () => {
    let database: TestDatabase;
    let store: Store;
    let charityId: number;
    let ids: { recentGiftAid: number; noGiftAid: number; oldGiftAid: number; otherDonor: number; oldNoGiftAid: number };
    let claimId: number;

    before(async () => {
      assertBuilt();
      database = await backend.createDatabase();
      store = await openStore(database.location);
      charityId = (await signUpCharity(store, { name: 'Erasure', email: 'e@example.org' })).charity.id;
      ids = {
        recentGiftAid: (await record(store, charityId, { ...SAM, donor_email: 'Sam@Example.org', gift_aid: 'yes', amount: '25.00', donation_date: '02-01-2026' })).id,
        noGiftAid: (await record(store, charityId, { ...SAM, donor_email: 'sam@example.org', gift_aid: 'no', amount: '5.00' })).id,
        oldGiftAid: (await record(store, charityId, { ...SAM, donor_email: 'sam@example.org', gift_aid: 'yes', amount: '10.00', donation_date: '15-03-2015' })).id,
        otherDonor: (await record(store, charityId, { ...SAM, donor_email: 'alex@example.org', gift_aid: 'yes', amount: '7.00', donation_date: '15-03-2015' })).id,
        oldNoGiftAid: (await record(store, charityId, { ...SAM, donor_email: 'alex@example.org', gift_aid: 'no', amount: '3.00', donation_date: '15-03-2015' })).id,
      };
      // The 2015 gifts were recorded in 2015 (retention counts from no more than a year before a gift was recorded).
      await rawSql(database.url, "update donations set recorded_at = donation_date where donation_date < '2016'");
      const row = (donationId: number, day: string) => ({ donationId, firstName: 'Sam', lastName: 'Smith', houseNameOrNumber: '12', postcode: 'SW1A 1AA', donationDay: day, amountMinor: 100 });
      claimId = (await store.claims.prepare({ charityId, upTo: '2026-11-01', claimDate: '2026-11-24', rows: [row(ids.recentGiftAid, '2026-01-02'), row(ids.oldGiftAid, '2015-03-15')], needsAttention: 0 })).id;
    });
    after(async () => {
      await store?.close();
      await database?.drop();
    });

    const find = async (id: number) => (await store.findDonation(id))!;

    test('an idempotent replay after the erasure answers with the record as it now is', async () => {
      const v = validateDonation({ ...SAM, donor_email: 'replay.me@example.org', gift_aid: 'no', amount: '9.00' });
      assert.ok(v.ok);
      const key = { key: 'erase-then-replay', fingerprint: fingerprint(v.donation), ttlMicros: IDEMPOTENCY.ttlMicros };
      const first = await store.recordKeyedDonation(charityId, v.donation, key);
      assert.equal(first.outcome, 'created');
      assert.equal((await almoner(database.url, ['donor', 'erase', '--email', 'replay.me@example.org'])).code, 0);
      const again = await store.recordKeyedDonation(charityId, v.donation, key);
      assert.equal(again.outcome, 'replay');
      const d = (again as { donation: StoredDonation }).donation;
      assert.deepEqual([d.id, d.donor_email, d.donor_first_name, d.amount], [(first as { donation: StoredDonation }).donation.id, ERASED_EMAIL, null, '9.00']);
    });

    test('a dry run says what it would do and changes nothing', async () => {
      const before = await Promise.all(Object.values(ids).map(find));
      const run = await almoner(database.url, ['donor', 'erase', '--email', 'SAM@example.org', '--dry-run']);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /would erase/);
      assert.match(run.stdout, /3 donations \(a dry run: nothing was changed\)/);
      assert.deepEqual(await Promise.all(Object.values(ids).map(find)), before);
      // It took data out (which charities, which days): recorded, under the donor's reference, as its own action.
      const audit = (await almoner(database.url, ['audit', '--json'])).stdout.trim().split('\n').map((line) => JSON.parse(line) as { action: string; target: string; summary: unknown });
      const last = audit.at(-1)!;
      assert.equal(last.action, 'donor erase dry run');
      assert.match(last.target, /^donor [0-9a-f]{16}$/);
      assert.deepEqual(last.summary, { charity: null, donations: 3 });
    });

    test('erase: the e-mail, phone, IP, city and the address past the house go at once; Gift Aid keeps names, house and postcode for its period; nothing else is kept', async () => {
      const run = await almoner(database.url, ['donor', 'erase', '--email', 'SAM@example.org']);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, new RegExp(`donation ${ids.recentGiftAid} .*kept donor first name, donor last name, house name or number, donor postcode until 2033-01-02: HMRC`));
      // The address cut to its house is said, as the donor may be told what went (it was not, until 2026-12-02: a README walkthrough).
      assert.match(run.stdout, new RegExp(`donation ${ids.recentGiftAid} \\([^)]*\\): erased donor email, donor phone, donor address but its house name or number, donor city, donor ip; kept`));
      const recent = await find(ids.recentGiftAid);
      assert.deepEqual(
        [recent.donor_first_name, recent.donor_last_name, recent.donor_email, recent.donor_phone, recent.donor_address, recent.donor_city, recent.donor_postcode, recent.donor_ip],
        ['Sam', 'Smith', ERASED_EMAIL, null, '12', null, 'SW1A 1AA', null],
      );
      for (const id of [ids.noGiftAid, ids.oldGiftAid]) {
        const d = await find(id);
        assert.deepEqual(
          [d.donor_first_name, d.donor_last_name, d.donor_email, d.donor_phone, d.donor_address, d.donor_city, d.donor_postcode, d.donor_ip],
          [null, null, ERASED_EMAIL, null, null, null, null, null],
          `donation ${id}`,
        );
      }
      // What is not personal data stays, so totals and claims add up.
      assert.deepEqual([recent.amount, recent.gift_aid, recent.payment_method, recent.payment_confirmation_number, recent.donation_date], ['25.00', true, 'card', 'PAY-1', '2026-01-02T00:00:00.000000Z']);
      assert.equal((await find(ids.otherDonor)).donor_email, 'alex@example.org', "another donor's data is untouched");
      // The claim keeps its row for the donation in its period, and loses the old one's personal data.
      const rows = await store.claims.rows(claimId);
      assert.deepEqual(rows.map((r) => [r.donationId, r.firstName, r.postcode, r.amountMinor]), [
        [ids.recentGiftAid, 'Sam', 'SW1A 1AA', 100],
        [ids.oldGiftAid, '[erased]', '[erased]', 100],
      ]);
      const exported = await almoner(database.url, ['donations', 'export', '--format', 'jsonl']);
      assert.ok(!exported.stdout.toLowerCase().includes('sam@example.org'), "the export holds no erased donor's address");
      const audit = (await almoner(database.url, ['audit'])).stdout;
      assert.match(audit, /donor erase\s+donor [0-9a-f]{16}/);
      assert.ok(!audit.toLowerCase().includes('sam@example.org'));
      // A later access request finds what is still held, by the donor's own address (it found nothing: the address was gone).
      const asked = await almoner(database.url, ['donor', 'export', '--email', 'sam@EXAMPLE.org']);
      assert.equal(asked.code, 0, asked.stderr);
      const held = JSON.parse(asked.stdout) as { donations: { id: number; donor_first_name: string | null; donor_email: string }[] };
      assert.deepEqual(held.donations.map((d) => [d.id, d.donor_first_name, d.donor_email]), [[ids.recentGiftAid, 'Sam', ERASED_EMAIL]]);
      // Erased again: nothing new to erase, and what is still kept said (it found no donation at all).
      const again = await almoner(database.url, ['donor', 'erase', '--email', 'sam@example.org']);
      assert.match(again.stdout, new RegExp(`donation ${ids.recentGiftAid} .*nothing left to erase; kept donor first name, donor last name, house name or number, donor postcode until 2033-01-02`));
      // The placeholder is nobody's address: it gave every erased donor's kept details as one donor's.
      for (const command of ['export', 'erase']) {
        const placeholder = await almoner(database.url, ['donor', command, '--email', ERASED_EMAIL.toUpperCase()]);
        assert.equal(placeholder.code, 2, placeholder.stderr);
        assert.match(placeholder.stderr, /what Almoner puts in place of an erased address, not a donor's/);
      }
    });

    test('retention: kept Gift Aid data goes after its period, other donations after RETENTION_YEARS; a dry run changes nothing', async () => {
      assert.deepEqual((await store.donors.applyRetention({ today: '2033-01-02', retentionYears: 6, dryRun: false })).erased.map((d) => d.id), [ids.otherDonor, ids.oldNoGiftAid]);
      assert.equal((await find(ids.recentGiftAid)).donor_first_name, 'Sam', 'kept on the last day of its period');
      const dry = await store.donors.applyRetention({ today: '2033-01-03', retentionYears: 6, dryRun: true });
      assert.deepEqual(dry.erased.map((d) => d.id), [ids.recentGiftAid]);
      assert.equal((await find(ids.recentGiftAid)).donor_first_name, 'Sam', 'a dry run changes nothing');
      await store.donors.applyRetention({ today: '2033-01-03', retentionYears: 6, dryRun: false });
      const recent = await find(ids.recentGiftAid);
      assert.deepEqual([recent.donor_first_name, recent.donor_last_name, recent.donor_address, recent.donor_postcode], [null, null, null, null]);
      // Nothing of the donor's is held now, and nothing links the donation to them.
      assert.deepEqual(JSON.parse((await almoner(database.url, ['donor', 'export', '--email', 'sam@example.org'])).stdout).donations, []);
      assert.deepEqual(await store.donors.applyRetention({ today: '2040-01-01', retentionYears: 6, dryRun: false }), { erased: [] }, 'nothing is erased twice');
      const other = await find(ids.otherDonor);
      assert.equal(other.donor_email, ERASED_EMAIL);
      assert.equal(other.amount, '7.00');
    });

    test('retention apply from the command line: a dry run, the real run, its audit entry, and RETENTION_YEARS checked', async () => {
      const fresh = await record(store, charityId, { ...SAM, donor_email: 'old@example.org', gift_aid: 'no', amount: '1.00', donation_date: '01-01-2016' });
      await rawSql(database.url, `update donations set recorded_at = donation_date where id = ${fresh.id}`); // recorded then
      const dry = await almoner(database.url, ['retention', 'apply', '--dry-run']);
      assert.equal(dry.code, 0, dry.stderr);
      assert.match(dry.stdout, new RegExp(`donation ${fresh.id} .*would erase`));
      assert.equal((await find(fresh.id)).donor_email, 'old@example.org');
      const kept = await almoner(database.url, ['retention', 'apply'], { RETENTION_YEARS: '20' });
      assert.doesNotMatch(kept.stdout, new RegExp(`donation ${fresh.id} `), 'inside 20 years it stays');
      const run = await almoner(database.url, ['retention', 'apply']);
      assert.equal(run.code, 0, run.stderr);
      assert.equal((await find(fresh.id)).donor_email, ERASED_EMAIL);
      assert.match((await almoner(database.url, ['audit'])).stdout, /retention apply/);
      const bad = await almoner(database.url, ['retention', 'apply'], { RETENTION_YEARS: 'six' });
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /RETENTION_YEARS/);
    });
  });
}

for (const backend of BACKENDS) {
  test(`retention counts a donation dated more than a year after it was recorded (a year mistyped) from a year after it was recorded: it was kept for decades, or for ever [${backend.name}]`, async () => {
    // Until 2026-11-29 from its typed day: 31-12-9999 was never erased, 2062 only in 2068 (a review).
    const database = await backend.createDatabase();
    const store = await openStore(database.location);
    try {
      const charityId = (await signUpCharity(store, { name: 'Typos', email: 't@example.org' })).charity.id;
      const recordedDay = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London' }).format(new Date());
      const year = Number(recordedDay.slice(0, 4));
      const forEver = (await record(store, charityId, { ...SAM, donor_email: 'typo@example.org', gift_aid: 'no', amount: '5.00', donation_date: '31-12-9999' })).id;
      const giftAid = (await record(store, charityId, { ...SAM, donor_email: 'typo@example.org', gift_aid: 'yes', amount: '6.00', donation_date: `01-01-${year + 36}` })).id;
      const due = async (today: string) => (await store.donors.applyRetention({ today, retentionYears: 6, dryRun: true })).erased.map((d) => d.id).sort((a, b) => a - b);
      const dayAfter = (day: string) => new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
      // Dated within a year of its recording, a donation keeps its own day (a payment on a set day, in HMRC's period of that day).
      const nextMonth = new Date(Date.now() + 31 * 86_400_000).toISOString().slice(0, 10);
      const ahead = (await record(store, charityId, { ...SAM, donor_email: 'ahead@example.org', gift_aid: 'yes', amount: '7.00', donation_date: `${nextMonth.slice(8, 10)}-${nextMonth.slice(5, 7)}-${nextMonth.slice(0, 4)}` })).id;
      const yearOn = yearsLater(1, recordedDay);
      assert.deepEqual(await due(yearsLater(6, yearOn)), [], 'nothing until six years after a year past its recording');
      assert.deepEqual(await due(dayAfter(yearsLater(6, yearOn))), [forEver], 'then the one without Gift Aid');
      assert.deepEqual(await due(dayAfter(giftAidKeptUntil(yearOn))), [forEver, giftAid, ahead], 'seven with Gift Aid');
      const erased = await store.donors.erase({ email: 'typo@example.org', today: recordedDay, dryRun: true });
      assert.equal(erased.donations.find((e) => e.id === giftAid)?.erasure.keptUntil, giftAidKeptUntil(yearOn), 'kept for Gift Aid seven years from a year after it was recorded');
      const aheadErased = await store.donors.erase({ email: 'ahead@example.org', today: recordedDay, dryRun: true });
      assert.equal(aheadErased.donations[0]?.erasure.keptUntil, giftAidKeptUntil(nextMonth), 'its own day');
    } finally {
      await store.close();
      await database.drop();
    }
  });

  test(`retention counts a donation dated more than a year before it was recorded (2016 for 2026) from a year before it was recorded: its donor's details went the night it was recorded [${backend.name}]`, async () => {
    // Until 2026-11-29 from its typed day, already more than six years past (a review).
    const database = await backend.createDatabase();
    const store = await openStore(database.location);
    try {
      const charityId = (await signUpCharity(store, { name: 'Past Typos', email: 'p@example.org' })).charity.id;
      const recordedDay = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London' }).format(new Date());
      const year = Number(recordedDay.slice(0, 4));
      const dmy = (day: string) => `${day.slice(8, 10)}-${day.slice(5, 7)}-${day.slice(0, 4)}`;
      const past = (await record(store, charityId, { ...SAM, donor_email: 'past@example.org', gift_aid: 'no', amount: '5.00', donation_date: `01-01-${year - 10}` })).id;
      const giftAid = (await record(store, charityId, { ...SAM, donor_email: 'past@example.org', gift_aid: 'yes', amount: '6.00', donation_date: `01-01-${year - 10}` })).id;
      // Dated within a year before its recording (last year's gifts sent together), a donation keeps its own day.
      const halfYearBack = new Date(Date.now() - 180 * 86_400_000).toISOString().slice(0, 10);
      const withinTheYear = (await record(store, charityId, { ...SAM, donor_email: 'within@example.org', gift_aid: 'no', amount: '7.00', donation_date: dmy(halfYearBack) })).id;
      const due = async (today: string) => (await store.donors.applyRetention({ today, retentionYears: 6, dryRun: true })).erased.map((d) => d.id).sort((a, b) => a - b);
      const dayAfter = (day: string) => new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
      const yearBefore = yearsLater(-1, recordedDay);
      assert.deepEqual(await due(dayAfter(recordedDay)), [], 'nothing the night it was recorded');
      assert.deepEqual(await due(yearsLater(6, yearBefore)), [], 'nothing until six years after a year before its recording');
      assert.deepEqual(await due(dayAfter(yearsLater(6, yearBefore))), [past], 'then the one without Gift Aid');
      assert.deepEqual(await due(dayAfter(yearsLater(6, halfYearBack))), [past, withinTheYear], 'the one within the year six years after its own day');
      assert.ok((await due(dayAfter(giftAidKeptUntil(yearBefore)))).includes(giftAid), 'seven with Gift Aid');
      // A donor's own request counts from the gift's day, as HMRC's period does: a gift of ten years ago, which no claim can take, keeps nothing (a review of the first version kept it seven years).
      const erased = await store.donors.erase({ email: 'past@example.org', today: recordedDay, dryRun: true });
      assert.deepEqual(erased.donations.find((e) => e.id === giftAid)?.erasure.kept, [], 'nothing kept against the donor\'s wish');
    } finally {
      await store.close();
      await database.drop();
    }
  });
}
