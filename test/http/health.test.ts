import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { openStore } from '../../src/store/open.js';
import { READY_STANDS_MS } from '../../src/http/routes/health.js';
import { startTestApp, type TestContext } from '../support/app.js';
import { TestClock } from '../support/clock.js';
import { BACKENDS } from '../support/backends.js';

for (const backend of BACKENDS) {
  describe(`health endpoints [${backend.name}]`, () => {
    let t: TestContext;
    before(async () => {
      t = await startTestApp(backend);
    });
    after(() => t.close());

    test('GET /health: 200 JSON, no credentials needed', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/health' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { status: 'ok' });
      assert.match(String(res.headers['content-type']), /^application\/json/);
    });

    test('GET /health/ready: 200 while the database answers', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { status: 'ready' });
    });

    test('GET /health/ready: 503 JSON when the database does not answer, while /health stays 200', async () => {
      const database = await backend.createDatabase();
      const store = await openStore(database.location);
      const app = await buildApp({ store });
      try {
        await store.close(); // the database is gone from this app's point of view
        const ready = await app.inject({ method: 'GET', url: '/health/ready' });
        assert.equal(ready.statusCode, 503);
        assert.deepEqual(ready.json(), { status: 'unavailable', message: 'The database is unavailable.' });
        assert.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200);
      } finally {
        await app.close();
        await database.drop();
      }
    });

    test('GET /health/ready under a flood of checks: those that come together share one query, and for READY_STANDS_MS after it answered none queries (each queried: a review starved the pool with them)', async () => {
      const { store } = t;
      const ping = store.ping.bind(store);
      let queries = 0;
      store.ping = (budget) => (queries++, ping(budget));
      t.clock.hold(); // the margins below are the app's clock's, whatever this machine's speed
      try {
        t.clock.advance(READY_STANDS_MS); // past any earlier check's answer
        const together = await Promise.all(Array.from({ length: 50 }, () => t.app.inject({ method: 'GET', url: '/health/ready' })));
        assert.deepEqual(new Set(together.map((r) => r.statusCode)), new Set([200]));
        assert.equal(queries, 1, 'fifty checks at once, one query');
        t.clock.advance(READY_STANDS_MS - 1);
        assert.equal((await t.app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);
        assert.equal(queries, 1, 'the answer still stands');
        t.clock.advance(2); // past it, whatever the floating point of the clock's sum (1 fell short of it once)
        assert.equal((await t.app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);
        assert.equal(queries, 2, 'asked again once it no longer stands');
      } finally {
        store.ping = ping;
        t.clock.release();
      }
    });

    test('GET /health/ready: a database gone is said by the first check after the last answer stops standing, and checks waiting on that one say it too', async () => {
      const database = await backend.createDatabase();
      const store = await openStore(database.location);
      const clock = new TestClock();
      const app = await buildApp({ store, clock: clock.now });
      try {
        assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200);
        await store.close();
        clock.advance(READY_STANDS_MS);
        const checks = await Promise.all(Array.from({ length: 5 }, () => app.inject({ method: 'GET', url: '/health/ready' })));
        assert.deepEqual(checks.map((r) => r.statusCode), [503, 503, 503, 503, 503]);
        assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 503, 'a failure does not stand: the next check asks again');
      } finally {
        await app.close();
        await database.drop();
      }
    });

    test('the health paths sit outside /api/v1 and take GET only', async () => {
      assert.equal((await t.app.inject({ method: 'GET', url: '/api/v1/health' })).statusCode, 404);
      const post = await t.app.inject({ method: 'POST', url: '/health' });
      assert.equal(post.statusCode, 405);
      assert.equal(post.headers.allow, 'GET, HEAD');
    });
  });
}
