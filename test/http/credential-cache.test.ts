import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CharityCredential } from '../../src/charities/charity.js';
import { cachedCredentials } from '../../src/http/credential-cache.js';

const TTL = 2000;
const credential = (password_hash: string, active = true): CharityCredential => ({ id: 1, name: 'Hope', email: 'hope@example.org', password_hash, active });

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
  clock.now += TTL - 1;
  assert.equal(credentials.recent('hope'), found);
  clock.now += 1;
  assert.equal(credentials.recent('hope'), undefined);
  assert.equal(db.reads, 1);
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
