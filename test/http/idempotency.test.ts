import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { validateDonation } from '../../src/donations/validate.js';
import { fingerprint } from '../../src/http/idempotency.js';
import { ClaimLostError } from '../../src/store/store.js';
import { exampleDonation, startTestApp, type TestCharity, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';

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

    const create = (body: Record<string, unknown>, key?: string, charity: TestCharity = t.charity) =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: {
          authorization: charity.authorization,
          'content-type': 'application/json',
          ...(key !== undefined ? { 'idempotency-key': key } : {}),
        },
        payload: JSON.stringify(body),
      });
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
      assert.notEqual(a.json().data.id, b.json().data.id);
      assert.equal(a.headers['idempotent-replayed'], undefined);
      assert.equal(await count(), before + 2);
    });

    test('the same key and body replays the first answer: same record, no new donation', async () => {
      const key = uniqueKey();
      const first = await create(donation(), key);
      assert.equal(first.statusCode, 200);
      assert.equal(first.headers['idempotent-replayed'], undefined);
      const before = await count();
      for (let i = 0; i < 3; i++) {
        const again = await create(donation(), key);
        assert.equal(again.statusCode, 200);
        assert.equal(again.headers['idempotent-replayed'], 'true');
        assert.equal(again.body, first.body);
      }
      assert.equal(await count(), before);
    });

    test('the same donation sent as a form, or with extra fields, is the same body', async () => {
      const key = uniqueKey();
      const first = await create(donation(), key);
      const form = await t.app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization: t.charity.authorization, 'content-type': 'application/x-www-form-urlencoded', 'idempotency-key': key },
        payload: new URLSearchParams({ ...(donation() as Record<string, string>), ignored: 'x' }).toString(),
      });
      assert.equal(form.statusCode, 200);
      assert.equal(form.headers['idempotent-replayed'], 'true');
      assert.equal(form.json().data.id, first.json().data.id);
    });

    test('the same key with a different body: 422 with a message, nothing recorded', async () => {
      const key = uniqueKey();
      await create(donation(), key);
      const before = await count();
      const other = await create(exampleDonation({ donor_email: 'idem@example.org', amount: '99.00' }), key);
      assert.equal(other.statusCode, 422);
      assert.match(other.json().message, /Idempotency-Key/);
      assert.ok(Array.isArray(other.json().errors.idempotency_key));
      assert.equal(await count(), before);
    });

    test('keys belong to a charity: another charity may use the same key', async () => {
      const other = await t.signUp('Other Idem', 'other-idem@example.org');
      const key = uniqueKey();
      const mine = await create(donation(), key);
      const theirs = await create(donation(), key, other);
      assert.equal(theirs.statusCode, 200);
      assert.equal(theirs.headers['idempotent-replayed'], undefined);
      assert.notEqual(theirs.json().data.id, mine.json().data.id);
    });

    test('while the first request is in flight: 409 with a message', async () => {
      const key = uniqueKey();
      const body = donation();
      tokenOf(await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: HOUR, ttlMicros: 24 * HOUR }));
      const before = await count();
      const res = await create(body, key);
      assert.equal(res.statusCode, 409);
      assert.match(res.json().message, /in progress/);
      assert.equal(await count(), before);
    });

    test('many concurrent requests with one key record exactly one donation', async () => {
      const key = uniqueKey();
      const before = await count();
      const responses = await Promise.all(Array.from({ length: 20 }, () => create(donation('race@example.org'), key)));
      const ok = responses.filter((r) => r.statusCode === 200);
      assert.ok(ok.length >= 1);
      assert.ok(responses.every((r) => r.statusCode === 200 || r.statusCode === 409), responses.map((r) => r.statusCode).join());
      assert.equal(new Set(ok.map((r) => r.json().data.id)).size, 1);
      assert.equal(await count(), before + 1);
    });

    test('a claim whose request died is taken over once its lease lapses', async () => {
      const key = uniqueKey();
      const body = donation();
      await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: 1, ttlMicros: 24 * HOUR });
      await new Promise((r) => setTimeout(r, 5));
      const res = await create(body, key);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['idempotent-replayed'], undefined);
    });

    test('an expired key is forgotten: the same key records a new donation, and purging removes old keys', async () => {
      const key = uniqueKey();
      const body = donation();
      const claim = await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: HOUR, ttlMicros: 1 });
      const old = await t.store.recordDonation(t.charity.id, validated(body), { key, token: tokenOf(claim) });
      await new Promise((r) => setTimeout(r, 5));
      const res = await create(body, key);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['idempotent-replayed'], undefined);
      assert.notEqual(res.json().data.id, old.id);

      const stale = uniqueKey();
      await t.store.claimIdempotencyKey(t.charity.id, stale, claimFor(body), { leaseMicros: HOUR, ttlMicros: 1 });
      await new Promise((r) => setTimeout(r, 5));
      assert.ok((await t.store.purgeExpiredIdempotencyKeys()) >= 1);
      const fresh = await create(body, stale);
      assert.equal(fresh.statusCode, 200);
    });

    test('a request whose claim was taken over records nothing (the donation rolls back)', async () => {
      const key = uniqueKey();
      const body = donation();
      const first = await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: 1, ttlMicros: 24 * HOUR });
      await new Promise((r) => setTimeout(r, 5));
      const second = await t.store.claimIdempotencyKey(t.charity.id, key, claimFor(body), { leaseMicros: HOUR, ttlMicros: 24 * HOUR });
      assert.equal(second.outcome, 'claimed');
      const before = await count();
      await assert.rejects(t.store.recordDonation(t.charity.id, validated(body), { key, token: tokenOf(first) }), ClaimLostError);
      assert.equal(await count(), before);
    });

    test('an invalid request does not use up its key', async () => {
      const key = uniqueKey();
      const bad = await create({ donor_email: 'nope' }, key);
      assert.equal(bad.statusCode, 422);
      assert.ok(bad.json().errors.donor_email);
      const good = await create(donation(), key);
      assert.equal(good.statusCode, 200);
      assert.equal(good.headers['idempotent-replayed'], undefined);
    });

    for (const [what, value] of [
      ['empty', ''],
      ['256 characters', 'k'.repeat(256)],
      ['a control character', 'abc\u0001def'],
      ['non-ASCII', 'clé-unique'],
    ] as const) {
      test(`a malformed key (${what}): 400 with a message, nothing recorded`, async () => {
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
      assert.equal(res.statusCode, 200);
    });
  });
}
