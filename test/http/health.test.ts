import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { openStore } from '../../src/store/open.js';
import { startTestApp, type TestContext } from '../support/app.js';
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

    test('the health paths sit outside /api/v1 and take GET only', async () => {
      assert.equal((await t.app.inject({ method: 'GET', url: '/api/v1/health' })).statusCode, 404);
      const post = await t.app.inject({ method: 'POST', url: '/health' });
      assert.equal(post.statusCode, 405);
      assert.equal(post.headers.allow, 'GET, HEAD');
    });
  });
}
