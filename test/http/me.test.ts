import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashPassword } from '../../src/charities/credentials.js';
import { AuthenticationError } from '../../src/client/index.js';
import { CREDENTIAL_TTL_MS } from '../../src/http/credential-cache.js';
import { HONOURED_WITHIN_MS, startTestApp, type TestCharity, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { rejection } from '../support/client.js';

for (const backend of BACKENDS) describe(`POST /api/v1/me [${backend.name}]`, () => {
  let t: TestContext;
  before(async () => {
    t = await startTestApp(backend);
  });
  after(() => t.close());

  const me = (authorization?: string, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/me',
      headers: { accept: 'application/json', ...(authorization ? { authorization } : {}), ...headers },
    });

  function assertUnauthorized(res: Awaited<ReturnType<typeof me>>) {
    assert.equal(res.statusCode, 401);
    assert.deepEqual(res.json(), { message: 'Unauthorized' });
    assert.equal(res.headers['www-authenticate'], 'Basic realm="Almoner", charset="UTF-8"');
    assert.match(String(res.headers['content-type']), /^application\/json/);
  }

  /** `me()` through the typed client, for these credentials. */
  const meAs = async (charity: Pick<TestCharity, 'username' | 'password'>) => (await t.client(charity)).me();

  /**
   * The client's view of the same 401. Its headers, which the client does not expose, are checked
   * by the raw tests (one code path answers every 401), and the JSON content type, body and
   * WWW-Authenticate value of every 401 by the OpenAPI conformance check at close().
   */
  async function assertRefused(call: Promise<unknown>): Promise<AuthenticationError> {
    const err = await rejection(call, AuthenticationError);
    assert.equal(err.status, 401);
    assert.deepEqual(err.body, { message: 'Unauthorized' });
    assert.equal(err.message, 'Unauthorized');
    return err;
  }

  test('valid credentials: 200 with the charity name and e-mail', async () => {
    // Raw: the whole answer as the interface defines it; the client returns only its data.
    const res = await me(t.charity.authorization);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), {
      success: true,
      message: 'Authenticated',
      data: { name: 'Helping Hands', email: 'info@helpinghands.example' },
    });
  });

  test('each charity sees its own identity', async () => {
    const other = await t.signUp('Zakat Fund', 'hello@zakat.example');
    assert.deepEqual(await meAs(other), { name: 'Zakat Fund', email: 'hello@zakat.example' });
  });

  test('the scheme name is case-insensitive', async () => {
    // Raw: the client always writes the scheme as "Basic".
    const token = t.charity.authorization.slice('Basic '.length);
    for (const scheme of ['basic', 'BASIC', 'bAsIc']) {
      assert.equal((await me(`${scheme} ${token}`)).statusCode, 200, scheme);
    }
  });

  test('missing credentials: 401', async () => {
    // Raw: the client always sends an Authorization header.
    assertUnauthorized(await me());
  });

  test('wrong password: 401', async () => {
    await assertRefused(meAs({ username: t.charity.username, password: `${t.charity.password}x` }));
    await assertRefused(meAs({ username: t.charity.username, password: '' }));
  });

  test('unknown username: the same 401 as a wrong password', async () => {
    const unknown = await assertRefused(meAs({ username: 'nobody-abc123', password: t.charity.password }));
    const wrong = await assertRefused(meAs({ username: t.charity.username, password: 'not-the-password' }));
    assert.deepEqual(unknown.body, wrong.body);
    assert.equal(unknown.message, wrong.message);
  });

  for (const [what, header] of [
    ['another scheme', 'Bearer abc'],
    ['no token', 'Basic'],
    ['no colon in the decoded token', `Basic ${Buffer.from('justauser').toString('base64')}`],
    ['a token that is not base64', 'Basic !!!not-base64!!!'],
    ['a NUL in the username', `Basic ${Buffer.from('a\u0000b:c').toString('base64')}`],
  ] as const) {
    test(`malformed Authorization (${what}): 401`, async () => {
      // Raw: a header the client would never write.
      assertUnauthorized(await me(header));
    });
  }

  test('a long username ending in an emoji is a plain 401 (it once broke the throttle key)', async () => {
    await assertRefused(meAs({ username: `${'a'.repeat(99)}😀`, password: 'x' }));
  });

  test('the hash of the password is not a password', async () => {
    await assertRefused(meAs({ username: t.charity.username, password: hashPassword(t.charity.password) }));
  });

  test('a disabled charity gets 401 within 5 s (credentials are reused for up to 2 s), and works again at once when enabled', async () => {
    const c = await t.signUp('Soon Disabled', 'x@example.org');
    assert.deepEqual(await meAs(c), { name: 'Soon Disabled', email: 'x@example.org' });
    await t.store.setActive(c.username, false);
    t.clock.advance(HONOURED_WITHIN_MS);
    await assertRefused(meAs(c));
    await t.store.setActive(c.username, true);
    assert.deepEqual(await meAs(c), { name: 'Soon Disabled', email: 'x@example.org' });
  });

  test('after a rotation the new password works at once and the old one stops within 5 s', async () => {
    const c = await t.signUp('Rotating Live', 'rl@example.org');
    const identity = { name: 'Rotating Live', email: 'rl@example.org' };
    assert.deepEqual(await meAs(c), identity); // now remembered
    await t.store.setPasswordHash(c.username, hashPassword('a-brand-new-password-0123456789ab'));
    assert.deepEqual(await meAs({ username: c.username, password: 'a-brand-new-password-0123456789ab' }), identity);
    t.clock.advance(HONOURED_WITHIN_MS);
    await assertRefused(meAs(c));
  });

  test('a rotation with a grace period: the old password works too, past anything remembered, until it ends', async () => {
    const c = await t.signUp('Rotating Gently', 'rg@example.org');
    const identity = { name: 'Rotating Gently', email: 'rg@example.org' };
    const fresh = { username: c.username, password: 'the-new-password-with-grace-01234' };
    assert.deepEqual(await meAs(c), identity); // now remembered
    await t.store.setPasswordHash(c.username, hashPassword(fresh.password), '9999-12-31T23:59:59.999999Z');
    assert.deepEqual(await meAs(fresh), identity);
    for (let i = 0; i < 3; i++) {
      t.clock.advance(HONOURED_WITHIN_MS);
      assert.deepEqual(await meAs(c), identity, 'the old password, in its grace');
      assert.deepEqual(await meAs(fresh), identity);
    }
    assert.equal(await t.store.endGrace(c.username), 'ended');
    t.clock.advance(HONOURED_WITHIN_MS);
    await assertRefused(meAs(c));
    assert.deepEqual(await meAs(fresh), identity);
    assert.equal(await t.store.endGrace(c.username), 'none');
    assert.equal(await t.store.endGrace('no-such-charity-000000'), 'unknown');
  });

  test('a rotation whose grace period is over: the old password is refused at once', async () => {
    const c = await t.signUp('Grace Over', 'go@example.org');
    await t.store.setPasswordHash(c.username, hashPassword('the-new-password-grace-over-01234'), '2000-01-01T00:00:00.000000Z');
    await assertRefused(meAs(c));
    assert.deepEqual(await meAs({ username: c.username, password: 'the-new-password-grace-over-01234' }), { name: 'Grace Over', email: 'go@example.org' });
  });

  test('after a rotation the old password is refused and the new one works', async () => {
    const c = await t.signUp('Rotating', 'r@example.org');
    await t.store.setPasswordHash(c.username, hashPassword('the-new-password-0123456789abcdef'));
    await assertRefused(meAs(c));
    assert.deepEqual(await meAs({ username: c.username, password: 'the-new-password-0123456789abcdef' }), { name: 'Rotating', email: 'r@example.org' });
  });

  test('a credential in use does not run out under its requests: one read, ahead of time, for all of them', async () => {
    const c = await t.signUp('Busy', 'busy@example.org');
    t.clock.hold(); // the margins below are the app's clock's, whatever this machine's speed
    assert.equal((await me(c.authorization)).statusCode, 200); // now remembered
    // Counts the app's reads of this charity's credential (the real store answers them).
    const reads: Promise<unknown>[] = [];
    const findCredential = t.store.findCredential.bind(t.store);
    t.store.findCredential = (username, budget) => {
      const reading = findCredential(username, budget);
      if (username === c.username) reads.push(reading);
      return reading;
    };
    const burst = async () => {
      const answers = await Promise.all(Array.from({ length: 20 }, () => me(c.authorization)));
      for (const res of answers) assert.equal(res.statusCode, 200, res.body);
    };
    try {
      t.clock.advance(CREDENTIAL_TTL_MS * 0.8); // its last quarter
      await burst();
      assert.equal(reads.length, 1, 'read again once, in the background, while the requests were answered from memory');
      await Promise.all(reads);
      await new Promise((resolve) => setImmediate(resolve));
      // Past the time the first read gave it: remembered still, from the read ahead.
      t.clock.advance(CREDENTIAL_TTL_MS * 0.5);
      await burst();
      assert.equal(reads.length, 1, 'no request had to read it for itself');
    } finally {
      delete (t.store as Partial<typeof t.store>).findCredential; // the store's own method again
      t.clock.release();
    }
  });

  test('a password containing a colon is split at the first colon only', async () => {
    const c = await t.signUp('Colon', 'c@example.org');
    await t.store.setPasswordHash(c.username, hashPassword('pass:with:colons'));
    assert.deepEqual(await meAs({ username: c.username, password: 'pass:with:colons' }), { name: 'Colon', email: 'c@example.org' });
  });

  test('a request body is ignored, whatever it is: Laravel\'s client sends [] as JSON, fetch sends "" as text/plain (a 400 and a 415 before 2026-11-28)', async () => {
    // Raw: a Content-Type on /me, which the client never sends there.
    const res = await me(t.charity.authorization, { 'content-type': 'application/json' });
    assert.equal(res.statusCode, 200);
    for (const [type, payload] of [
      ['application/json', '[]'],
      ['application/json', 'null'],
      ['application/json', '{"not json'],
      ['text/plain;charset=UTF-8', ''],
      ['text/plain', 'hello'],
      ['application/x-www-form-urlencoded', '%zz'],
      ['application/octet-stream', '\u0000\u00ff'],
    ]) {
      const answer = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { accept: 'application/json', authorization: t.charity.authorization, 'content-type': type! }, payload });
      assert.equal(answer.statusCode, 200, `${type} ${JSON.stringify(payload)}: ${answer.body}`);
      assert.equal(answer.json().message, 'Authenticated');
    }
    // Still bounded: the body's limit holds here as everywhere.
    const huge = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization, 'content-type': 'text/plain' }, payload: 'x'.repeat(2 * 1024 * 1024) });
    assert.equal(huge.statusCode, 413, huge.body);
    // And the create route's parsers are as strict as ever.
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/donation/create', headers: { authorization: t.charity.authorization, 'content-type': 'application/json' }, payload: '[]' });
    assert.equal(created.statusCode, 400, created.body);
    // Only a Content-Type that is no media type is refused, and the 415 says that, not to send JSON or a form (an integrator's review).
    const garbled = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { accept: 'application/json', authorization: t.charity.authorization, 'content-type': 'text plain' }, payload: 'x' });
    assert.equal(garbled.statusCode, 415, garbled.body);
    assert.equal(garbled.json().message, 'Unsupported media type: the Content-Type header is not a media type (type/subtype, such as application/json); this request reads no body, so send any valid one, or none.');
    const garbledCreate = await t.app.inject({ method: 'POST', url: '/api/v1/donation/create', headers: { accept: 'application/json', authorization: t.charity.authorization, 'content-type': 'text plain' }, payload: 'x' });
    assert.equal(garbledCreate.json().message, 'Unsupported media type: send the body as application/json or application/x-www-form-urlencoded.');
  });
});
