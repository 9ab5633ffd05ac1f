import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CharityCredential } from '../../src/charities/charity.js';
import { cachedCredentials } from '../../src/http/credential-cache.js';

const TTL = 2000;
const credential = (password_hash: string, active = true): CharityCredential => ({ id: 1, name: 'Hope', email: 'hope@example.org', password_hash, active, old_password_hash: null, old_password_until: null });

/** The cache over a database of one username, whose credential the test replaces; and a clock the test moves. */
function setUp() {
  const clock = { now: 1_000 };
  const db = { found: credential('h1') as CharityCredential | undefined, reads: 0 };
  const credentials = cachedCredentials(
    async () => {
      db.reads++;
      return db.found;
    },
    { ttlMs: TTL, clock: () => clock.now },
  );
  return { clock, db, credentials };
}

test('a remembered credential is given again until its time is up, then read afresh', async () => {
  const { clock, db, credentials } = setUp();
  assert.equal(credentials.recent('hope'), undefined);
  const found = await credentials.fresh('hope');
  assert.equal(credentials.recent('hope'), found);
  clock.now += TTL * 0.75 - 1;
  assert.equal(credentials.recent('hope'), found);
  // Not used in the last quarter of its time: nothing is read ahead, and it runs out.
  clock.now += TTL * 0.25 + 1;
  assert.equal(credentials.recent('hope'), undefined);
  await settled();
  assert.equal(db.reads, 1);
});

/** Lets reads started in the background finish (the test's database answers in a microtask). */
const settled = () => new Promise((resolve) => setImmediate(resolve));

test('a credential used in the last quarter of its time is read again in the background, once, and served meanwhile', async () => {
  const { clock, db, credentials } = setUp();
  const found = await credentials.fresh('hope');
  clock.now += TTL * 0.75 - 1;
  assert.equal(credentials.recent('hope'), found);
  await settled();
  assert.equal(db.reads, 1, 'not yet in its last quarter');

  clock.now += 1;
  const changed = credential('h2');
  db.found = changed;
  assert.equal(credentials.recent('hope'), found, 'served from memory while it is read again');
  assert.equal(credentials.recent('hope'), found);
  assert.equal(db.reads, 2, 'one read for all the requests that use it');
  await settled();
  assert.equal(credentials.recent('hope'), changed, 'what the read found, at once');

  // Remembered for the whole time again, counted from when that read began.
  clock.now += TTL * 0.75 - 1;
  assert.equal(credentials.recent('hope'), changed);
  await settled();
  assert.equal(db.reads, 2);
  clock.now += TTL * 0.25 + 1;
  assert.equal(credentials.recent('hope'), undefined);
});

test('a credential read again and found disabled, or gone, stops being remembered', async () => {
  const { clock, db, credentials } = setUp();
  await credentials.fresh('hope');
  clock.now += TTL * 0.8;
  db.found = credential('h1', false);
  credentials.recent('hope');
  await settled();
  assert.equal(credentials.recent('hope')?.active, false, 'the disabled credential: authenticatedCharity refuses it');
  clock.now += TTL * 0.8;
  db.found = undefined;
  credentials.recent('hope');
  await settled();
  assert.equal(credentials.recent('hope'), undefined);
});

test('a read ahead that fails leaves the credential to run out at its time, and is tried again', async () => {
  const clock = { now: 1_000 };
  let reads = 0;
  let failing = false;
  const credentials = cachedCredentials(
    async () => {
      reads++;
      if (failing) throw new Error('connection reset');
      return credential('h1');
    },
    { ttlMs: TTL, clock: () => clock.now },
  );
  const found = await credentials.fresh('hope');
  failing = true;
  clock.now += TTL * 0.8;
  assert.equal(credentials.recent('hope'), found);
  await settled();
  assert.equal(reads, 2);
  assert.equal(credentials.recent('hope'), found, 'still its own time');
  await settled();
  assert.equal(reads, 3, 'the next use reads again');
  clock.now += TTL * 0.2;
  assert.equal(credentials.recent('hope'), undefined, 'run out at its time');
});

test('a read never replaces what a read begun after it found', async () => {
  const clock = { now: 1_000 };
  const answers: Array<(c: CharityCredential) => void> = [];
  const credentials = cachedCredentials(() => new Promise((resolve) => answers.push(resolve)), { ttlMs: TTL, clock: () => clock.now });
  const older = credentials.fresh('hope');
  clock.now += 10;
  const newer = credentials.fresh('hope');
  clock.now += 100; // both still being read
  const rotated = credential('h2');
  answers[1]!(rotated);
  await newer;
  answers[0]!(credential('h1'));
  await older;
  assert.equal(credentials.recent('hope'), rotated);
  // And its time counts from when its read began, not from when it answered.
  clock.now += TTL - 100 - 1;
  assert.equal(credentials.recent('hope'), rotated);
  clock.now += 1;
  assert.equal(credentials.recent('hope'), undefined);
});

test('a username a later-begun read did not find is not brought back by an earlier read answering after it', async () => {
  const clock = { now: 1_000 };
  const answers: Array<(c: CharityCredential | undefined) => void> = [];
  const credentials = cachedCredentials(() => new Promise((resolve) => answers.push(resolve)), { ttlMs: TTL, clock: () => clock.now });
  const first = credentials.fresh('hope');
  answers[0]!(credential('h1'));
  await first;
  clock.now += 10;
  const older = credentials.fresh('hope');
  clock.now += 10;
  const newer = credentials.fresh('hope');
  answers[2]!(undefined); // gone
  await newer;
  answers[1]!(credential('h1'));
  await older;
  assert.equal(credentials.recent('hope'), undefined);
});

test('a header that matched stands for its credential only while that credential is the one remembered', async () => {
  const { clock, db, credentials } = setUp();
  const header = 'Basic aG9wZTpzZWNyZXQ=';
  const found = (await credentials.fresh('hope'))!;
  credentials.matched(header, 'hope', found);
  assert.equal(credentials.matchedBy(header), found);
  assert.equal(credentials.matchedBy('Basic aG9wZTpvdGhlcg=='), undefined, 'another header');

  // Rotated (or disabled): once the cache reads the new credential, the old header is checked afresh.
  db.found = credential('h2');
  await credentials.fresh('hope');
  assert.equal(credentials.matchedBy(header), undefined);

  // Its credential's time up: checked afresh, though the header was noted a moment before.
  const again = (await credentials.fresh('hope'))!;
  credentials.matched(header, 'hope', again);
  clock.now += TTL;
  assert.equal(credentials.matchedBy(header), undefined);
});

test('forget() drops, with no request coming, a header past twice the time and a credential past its own', async () => {
  const { clock, credentials } = setUp();
  const header = 'Basic aG9wZTpzZWNyZXQ=';
  credentials.matched(header, 'hope', (await credentials.fresh('hope'))!);
  assert.equal(credentials.forget(), 2, 'the credential and its header');
  clock.now += TTL;
  assert.equal(credentials.forget(), 1, 'its time up, the credential goes; the header stays a generation more');
  clock.now += TTL;
  assert.equal(credentials.forget(), 0, 'twice the time: the header (a password) is gone too');
});

test('a header that matched is forgotten within twice the time a credential is remembered', async () => {
  const { clock, credentials } = setUp();
  const header = 'Basic aG9wZTpzZWNyZXQ=';
  credentials.matched(header, 'hope', (await credentials.fresh('hope'))!);
  clock.now += TTL * 2 - 1;
  // The database gives the very same credential again (nothing changed), so only the header's own age can tell.
  await credentials.fresh('hope');
  assert.ok(credentials.matchedBy(header), 'still held just under twice the time');
  clock.now += 1;
  await credentials.fresh('hope');
  assert.equal(credentials.matchedBy(header), undefined, 'held past twice the time');
});

test('a client cannot fill the memory of headers with variants of its own: only the plain form of a credential is remembered', async () => {
  // Base64 decodes anything after its padding to nothing, and the scheme's name may be in any case:
  // 'Basic <credentials>=<any 16 KB>' each matched, and each was remembered, 10,000 of them a
  // generation, two generations: hundreds of MB from one charity's client (a review, 2026-11-29).
  const { default: Fastify } = await import('fastify');
  const { basicAuth } = await import('../../src/http/auth.js');
  const { Throttle } = await import('../../src/http/throttle.js');
  const { hashPassword } = await import('../../src/charities/credentials.js');
  const credentials = cachedCredentials(async (username) => (username === 'hope' ? credential(hashPassword('secret')) : undefined), { ttlMs: TTL, clock: () => 1_000 });
  const app = Fastify();
  app.addHook('onRequest', basicAuth(credentials, new Throttle({ createsPerSecond: 0 }), { failureDelay: { floorMs: 0, jitterMs: 0 } }));
  app.get('/', async () => 'ok');
  try {
    const plain = `Basic ${Buffer.from('hope:secret').toString('base64')}`;
    assert.ok(plain.endsWith('='));
    for (const header of [plain, plain, `basic ${plain.slice(6)}`, ...Array.from({ length: 50 }, (_, i) => `${plain}${'A'.repeat(i + 1)}`)]) {
      assert.equal((await app.inject({ url: '/', headers: { authorization: header } })).statusCode, 200, header);
    }
    assert.equal(credentials.forget(), 2, 'the credential and its one plain header');
    assert.equal(credentials.matchedBy(plain)?.name, 'Hope', 'the plain header is still answered by itself');
  } finally {
    await app.close();
  }
});
