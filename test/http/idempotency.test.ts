import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AlmonerError, ConflictError, type CreatedDonation, type DonationInput, ValidationError } from '../../src/client/index.js';
import { validateDonation } from '../../src/donations/validate.js';
import { fingerprint } from '../../src/http/idempotency.js';
import { ClaimLostError } from '../../src/store/store.js';
import { exampleDonation, startTestApp, type TestCharity, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { rejection } from '../support/client.js';

const HOUR = 3600 * 1_000_000;

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
    const claimFor = (body: Record<string, unknown>) => fingerprint(validated(body));
    const tokenOf = (claim: Awaited<ReturnType<TestContext['store']['claimIdempotencyKey']>>) => {
      if (claim.outcome !== 'claimed') assert.fail(`expected a claim, got ${claim.outcome}`);
      return claim.token;
    };

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

    test('keys belong to a charity: another charity may use the same key', async () => {
      const other = await t.signUp('Other Idem', 'other-idem@example.org');
      const key = uniqueKey();
      const mine = await create(donation(), key);
      const theirs = await create(donation(), key, other);
      assert.equal(theirs.replayed, false);
      assert.notEqual(theirs.record.id, mine.record.id);
    });

    test('while the first request is in flight: 409 with a message', async () => {
      const key = uniqueKey();
      const body = donation();
      tokenOf(await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: HOUR, ttlMicros: 24 * HOUR }));
      const before = await count();
      const err = await rejection(create(body, key), ConflictError);
      assert.equal(err.status, 409);
      assert.match(err.message, /in progress/);
      assert.equal(await count(), before);
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

    test('a claim whose request died is taken over once its lease lapses', async () => {
      const key = uniqueKey();
      const body = donation();
      await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: 1, ttlMicros: 24 * HOUR });
      await new Promise((r) => setTimeout(r, 5));
      const res = await create(body, key);
      assert.equal(res.replayed, false);
    });

    test('an expired key is forgotten: the same key records a new donation, and purging removes old keys', async () => {
      const key = uniqueKey();
      const body = donation();
      const claim = await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: HOUR, ttlMicros: 1 });
      const old = await t.store.recordDonation(t.charity.id, validated(body), { claim: { key, token: tokenOf(claim) } });
      await new Promise((r) => setTimeout(r, 5));
      const res = await create(body, key);
      assert.equal(res.replayed, false);
      assert.notEqual(res.record.id, old.id);

      const stale = uniqueKey();
      await t.store.claimIdempotencyKey(t.charity.id, stale, claimFor(body), { leaseMicros: HOUR, ttlMicros: 1 });
      await new Promise((r) => setTimeout(r, 5));
      assert.ok((await t.store.purgeExpired()).idempotencyKeys >= 1);
      const fresh = await create(body, stale);
      assert.equal(fresh.replayed, false);
    });

    test('a request whose claim was taken over records nothing (the donation rolls back)', async () => {
      const key = uniqueKey();
      const body = donation();
      const first = await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: 1, ttlMicros: 24 * HOUR });
      await new Promise((r) => setTimeout(r, 5));
      const second = await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: HOUR, ttlMicros: 24 * HOUR });
      assert.equal(second.outcome, 'claimed');
      const before = await count();
      await assert.rejects(t.store.recordDonation(t.charity.id, validated(body), { claim: { key, token: tokenOf(first) } }), ClaimLostError);
      assert.equal(await count(), before);
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
