import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AlmonerError, ConflictError, type CreatedDonation, type DonationInput, ValidationError } from '../../src/client/index.js';
import { validateDonation } from '../../src/donations/validate.js';
import type { NewDonation } from '../../src/donations/donation.js';
import { DONATION_FIELDS } from '../../src/donations/fields.js';
import { fingerprint, formerFingerprints } from '../../src/http/idempotency.js';
import { exampleDonation, startTestApp, type TestCharity, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { rejection } from '../support/client.js';

const MINIMAL = { donor_email: 'a@example.org', gift_aid: 'no', amount: 10, donation_type: 'renewal' };

test('the fingerprint leaves out what an unsent field becomes, so a field added later, of any kind, does not change it for bodies without that field', () => {
  // A stored key holds its body's fingerprint: a change to the keys, their order or a value's form
  // would turn every stored key's retry into a 422. Change these only with a way for stored keys to match.
  const validated = (body: Record<string, unknown>) => {
    const result = validateDonation(body);
    assert.ok(result.ok);
    return result.donation;
  };
  assert.equal(fingerprint(validated(exampleDonation())), 'v2:64e5b10fa85b7fe27469fcb1c3488c65e23972d8f39fed77af5408560ca74986');
  assert.equal(fingerprint(validated(MINIMAL)), 'v2:e82da6ae9ad59ce1d9594c964bea2d87b05d739285ff0eeb0e1d0666af8c9656');
  assert.equal(fingerprint(validated({ ...MINIMAL, some_later_field: null, donor_city: null, zakat_donation: 'no' })), fingerprint(validated(MINIMAL)));
  // Each optional field, whatever its kind, as if the table did not have it yet: the donation
  // without its key at all hashes as the one where it was not sent.
  for (const f of DONATION_FIELDS.filter((f) => !f.required)) {
    const before = { ...validated(MINIMAL) } as Record<string, unknown>;
    delete before[f.name];
    assert.equal(fingerprint(before as NewDonation), fingerprint(validated(MINIMAL)), f.name);
  }
  // What earlier versions stored for the same bodies: this rule's, unmarked, until 2026-11-28;
  // until 2026-11-27, nulls left out (an unsent flag's false counted); Almoner 0.1's, nulls included.
  assert.deepEqual(formerFingerprints(validated(exampleDonation())), [
    '64e5b10fa85b7fe27469fcb1c3488c65e23972d8f39fed77af5408560ca74986',
    '64e5b10fa85b7fe27469fcb1c3488c65e23972d8f39fed77af5408560ca74986',
    '64e5b10fa85b7fe27469fcb1c3488c65e23972d8f39fed77af5408560ca74986',
  ]);
  assert.deepEqual(formerFingerprints(validated(MINIMAL)), [
    'e82da6ae9ad59ce1d9594c964bea2d87b05d739285ff0eeb0e1d0666af8c9656',
    '6ee38abae4323e5d0624694b144c8cfc3a1ea3f0693f332c43dbf119121cf623',
    '7749bf9a5659649514d45d726a7b240ec67fead4fc84d450f850ee143ed8dc0b',
  ]);
  // ... and a field added since, null, false or any value, is in none of the last two: they never hashed one.
  const later = { ...validated(MINIMAL), some_later_field: null, a_later_flag: false, another: 'x' } as NewDonation;
  assert.deepEqual(formerFingerprints(later).slice(1), formerFingerprints(validated(MINIMAL)).slice(1));
});

test("a field added later: a key this version stored for a body without it never matches a body with it, though an earlier version's fingerprint of that body would", () => {
  // The example donation has every flag true, so 2026-11-27's fingerprint over FORMER_KEYS of the
  // body with a new field is this rule's fingerprint of the body without it. A key stored by this
  // version is marked as this rule's, and only compared with this rule's fingerprint.
  const without = validateDonation(exampleDonation({ zakat_donation: 'yes' }));
  assert.ok(without.ok);
  const withTitle = { ...without.donation, donor_title: 'Dr' } as NewDonation; // as if the table had a field donor_title
  assert.notEqual(fingerprint(withTitle), fingerprint(without.donation));
  assert.ok(!formerFingerprints(withTitle).includes(fingerprint(without.donation)), 'a retry with the new field would replay the donation stored without it');
});

for (const backend of BACKENDS) {
  describe(`Idempotency-Key on create [${backend.name}]`, () => {
    let t: TestContext;
    before(async () => {
      t = await startTestApp(backend);
    });
    after(() => t.close());

    let n = 0;
    const uniqueKey = () => `key-${backend.name}-${++n}-${Date.now()}`;

    // Through the typed client. exampleDonation and the invalid donation are plain records, so they
    // are cast: the request is still well-formed JSON, as the client sends it.
    const create = async (body: Record<string, unknown>, key?: string, charity: TestCharity = t.charity): Promise<CreatedDonation> =>
      (await t.client(charity)).createDonation(body as unknown as DonationInput, key === undefined ? {} : { idempotencyKey: key });
    const count = async () => (await t.donations()).length;
    const donation = (email = 'idem@example.org') => exampleDonation({ donor_email: email });
    const validated = (body: Record<string, unknown>) => {
      const v = validateDonation(body);
      if (!v.ok) assert.fail(JSON.stringify(v.errors));
      return v.donation;
    };
    const keyed = (key: string, body: Record<string, unknown>, ttlMicros: number) => ({ key, fingerprint: fingerprint(validated(body)), ttlMicros });

    test('without the header, the same request twice records two donations', async () => {
      const before = await count();
      const a = await create(donation());
      const b = await create(donation());
      assert.notEqual(a.record.id, b.record.id);
      assert.equal(a.replayed, false);
      assert.equal(b.replayed, false);
      assert.equal(await count(), before + 2);
    });

    test('the same key and body replays the first answer: same record, no new donation', async () => {
      const key = uniqueKey();
      const first = await create(donation(), key);
      assert.equal(first.replayed, false);
      const before = await count();
      for (let i = 0; i < 3; i++) {
        const again = await create(donation(), key);
        assert.equal(again.replayed, true);
        // The same record, key order included.
        assert.equal(JSON.stringify(again.record), JSON.stringify(first.record));
      }
      assert.equal(await count(), before);
    });

    test('the same donation sent as a form, or with extra fields, is the same body', async () => {
      const key = uniqueKey();
      const first = await create(donation(), key);
      // Raw: the client only sends JSON.
      const form = await t.app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization: t.charity.authorization, 'content-type': 'application/x-www-form-urlencoded', 'idempotency-key': key },
        payload: new URLSearchParams({ ...(donation() as Record<string, string>), ignored: 'x' }).toString(),
      });
      assert.equal(form.statusCode, 200);
      assert.equal(form.headers['idempotent-replayed'], 'true');
      assert.equal(form.json().data.id, first.record.id);
    });

    test('the same key with a different body: 422 with a message, nothing recorded', async () => {
      const key = uniqueKey();
      await create(donation(), key);
      const before = await count();
      const other = await rejection(create(exampleDonation({ donor_email: 'idem@example.org', amount: '99.00' }), key), ValidationError);
      assert.equal(other.status, 422);
      assert.match(other.message, /Idempotency-Key/);
      assert.ok(Array.isArray(other.errors.idempotency_key));
      assert.equal(await count(), before);
    });

    for (const [i, version] of ['before 2026-11-28 (unmarked)', 'before 2026-11-27 (an unsent flag counted)', 'by Almoner 0.1 (nulls counted)'].entries()) {
      test(`a key stored ${version} still replays for the same body, and still refuses another`, async () => {
        const key = uniqueKey();
        const body = { ...MINIMAL, donor_email: `former-${i}@example.org` };
        const former = formerFingerprints(validated(body))[i]!;
        assert.notEqual(former, fingerprint(validated(body)));
        const stored = await t.store.recordKeyedDonation(t.charity.id, validated(body), { key, fingerprint: former, ttlMicros: 60_000_000 });
        assert.equal(stored.outcome, 'created');
        const before = await count();
        const again = await create(body, key);
        assert.equal(again.replayed, true);
        assert.equal(again.record.id, stored.outcome === 'created' && stored.donation.id);
        await rejection(create({ ...body, amount: '11' }, key), ValidationError);
        assert.equal(await count(), before);
      });
    }

    test('keys belong to a charity: another charity may use the same key', async () => {
      const other = await t.signUp('Other Idem', 'other-idem@example.org');
      const key = uniqueKey();
      const mine = await create(donation(), key);
      const theirs = await create(donation(), key, other);
      assert.equal(theirs.replayed, false);
      assert.notEqual(theirs.record.id, mine.record.id);
    });

    test('while the first request is in flight: 409 with a message; the first then records its donation', async () => {
      const key = uniqueKey();
      const body = donation();
      const before = await count();
      const release = await t.holdDonationWrites();
      let first: Promise<CreatedDonation>;
      try {
        first = create(body, key); // waits for the lock, in flight
        await new Promise((r) => setTimeout(r, 100));
        const err = await rejection(create(body, key), ConflictError);
        assert.equal(err.status, 409);
        assert.match(err.message, /in progress/);
      } finally {
        await release();
      }
      assert.equal((await first).replayed, false);
      assert.equal(await count(), before + 1);
      assert.equal((await create(body, key)).replayed, true);
    });

    test('many concurrent requests with one key record exactly one donation', async () => {
      const key = uniqueKey();
      const before = await count();
      const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => create(donation('race@example.org'), key)));
      const ok = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
      const statuses = outcomes.map((o) => (o.status === 'fulfilled' ? 200 : o.reason instanceof AlmonerError ? o.reason.status : String(o.reason)));
      assert.ok(ok.length >= 1);
      assert.ok(
        outcomes.every((o) => o.status === 'fulfilled' || o.reason instanceof ConflictError),
        statuses.join(),
      );
      assert.equal(new Set(ok.map((r) => r.record.id)).size, 1);
      assert.equal(await count(), before + 1);
    });

    test('an expired key is forgotten: the same key records a new donation, and purging removes old keys', async () => {
      const key = uniqueKey();
      const body = donation();
      const old = await t.store.recordKeyedDonation(t.charity.id, validated(body), keyed(key, body, 1));
      assert.equal(old.outcome, 'created');
      await new Promise((r) => setTimeout(r, 5));
      const res = await create(body, key);
      assert.equal(res.replayed, false);
      assert.notEqual(res.record.id, old.outcome === 'created' && old.donation.id);

      const stale = uniqueKey();
      await t.store.recordKeyedDonation(t.charity.id, validated(body), keyed(stale, body, 1));
      await new Promise((r) => setTimeout(r, 5));
      assert.ok((await t.store.purgeExpired()).idempotencyKeys >= 1);
      const fresh = await create(body, stale);
      assert.equal(fresh.replayed, false);
    });

    test('an invalid request does not use up its key', async () => {
      const key = uniqueKey();
      const bad = await rejection(create({ donor_email: 'nope' }, key), ValidationError);
      assert.equal(bad.status, 422);
      assert.ok(bad.errors.donor_email);
      const good = await create(donation(), key);
      assert.equal(good.replayed, false);
    });

    for (const [what, value] of [
      ['empty', ''],
      ['256 characters', 'k'.repeat(256)],
      ['a control character', 'abc\u0001def'],
      ['non-ASCII', 'clé-unique'],
    ] as const) {
      test(`a malformed key (${what}): 400 with a message, nothing recorded`, async () => {
        // Raw: the client refuses such a key itself (a TypeError) and never sends it.
        const before = await count();
        const res = await t.app.inject({
          method: 'POST',
          url: '/api/v1/donation/create',
          headers: { authorization: t.charity.authorization, 'content-type': 'application/json', 'idempotency-key': Buffer.from(value, 'latin1').toString('latin1') },
          payload: JSON.stringify(donation()),
        });
        assert.equal(res.statusCode, 400);
        assert.match(res.json().message, /Idempotency-Key/);
        assert.equal(await count(), before);
      });
    }

    test('a key of 255 printable characters is fine', async () => {
      const res = await create(donation(), `${'k'.repeat(250)}${String(++n).padStart(5, '0')}`);
      assert.equal(res.replayed, false);
    });
  });
}
