import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashPassword } from '../../src/charities/credentials.js';
import { basic, startTestApp, type TestContext } from '../support/app.js';
import { until } from '../support/cli.js';
import { BACKENDS } from '../support/backends.js';

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

  test('valid credentials: 200 with the charity name and e-mail', async () => {
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
    const res = await me(other.authorization);
    assert.deepEqual(res.json().data, { name: 'Zakat Fund', email: 'hello@zakat.example' });
  });

  test('the scheme name is case-insensitive', async () => {
    const token = t.charity.authorization.slice('Basic '.length);
    for (const scheme of ['basic', 'BASIC', 'bAsIc']) {
      assert.equal((await me(`${scheme} ${token}`)).statusCode, 200, scheme);
    }
  });

  test('missing credentials: 401', async () => {
    assertUnauthorized(await me());
  });

  test('wrong password: 401', async () => {
    assertUnauthorized(await me(basic(t.charity.username, `${t.charity.password}x`)));
    assertUnauthorized(await me(basic(t.charity.username, '')));
  });

  test('unknown username: the same 401 as a wrong password', async () => {
    const unknown = await me(basic('nobody-abc123', t.charity.password));
    const wrong = await me(basic(t.charity.username, 'not-the-password'));
    assertUnauthorized(unknown);
    assert.equal(unknown.body, wrong.body);
  });

  for (const [what, header] of [
    ['another scheme', 'Bearer abc'],
    ['no token', 'Basic'],
    ['no colon in the decoded token', `Basic ${Buffer.from('justauser').toString('base64')}`],
    ['a token that is not base64', 'Basic !!!not-base64!!!'],
    ['a NUL in the username', `Basic ${Buffer.from('a\u0000b:c').toString('base64')}`],
  ] as const) {
    test(`malformed Authorization (${what}): 401`, async () => {
      assertUnauthorized(await me(header));
    });
  }

  test('a long username ending in an emoji is a plain 401 (it once broke the throttle key)', async () => {
    assertUnauthorized(await me(basic(`${'a'.repeat(99)}😀`, 'x')));
  });

  test('the hash of the password is not a password', async () => {
    assertUnauthorized(await me(basic(t.charity.username, hashPassword(t.charity.password))));
  });

  test('a disabled charity gets 401 within 5 s (credentials are reused for up to 2 s), and works again at once when enabled', async () => {
    const c = await t.signUp('Soon Disabled', 'x@example.org');
    assert.equal((await me(c.authorization)).statusCode, 200);
    await t.store.setActive(c.username, false);
    await until('disabled', 5000, async () => (await me(c.authorization)).statusCode === 401);
    assertUnauthorized(await me(c.authorization));
    await t.store.setActive(c.username, true);
    assert.equal((await me(c.authorization)).statusCode, 200);
  });

  test('after a rotation the new password works at once and the old one stops within 5 s', async () => {
    const c = await t.signUp('Rotating Live', 'rl@example.org');
    assert.equal((await me(c.authorization)).statusCode, 200); // now remembered
    await t.store.setPasswordHash(c.username, hashPassword('a-brand-new-password-0123456789ab'));
    assert.equal((await me(basic(c.username, 'a-brand-new-password-0123456789ab'))).statusCode, 200);
    await until('the old password is refused', 5000, async () => (await me(c.authorization)).statusCode === 401);
  });

  test('after a rotation the old password is refused and the new one works', async () => {
    const c = await t.signUp('Rotating', 'r@example.org');
    await t.store.setPasswordHash(c.username, hashPassword('the-new-password-0123456789abcdef'));
    assertUnauthorized(await me(c.authorization));
    assert.equal((await me(basic(c.username, 'the-new-password-0123456789abcdef'))).statusCode, 200);
  });

  test('a password containing a colon is split at the first colon only', async () => {
    const c = await t.signUp('Colon', 'c@example.org');
    await t.store.setPasswordHash(c.username, hashPassword('pass:with:colons'));
    assert.equal((await me(basic(c.username, 'pass:with:colons'))).statusCode, 200);
  });

  test('a request body is ignored', async () => {
    const res = await me(t.charity.authorization, { 'content-type': 'application/json' });
    assert.equal(res.statusCode, 200);
  });
});
