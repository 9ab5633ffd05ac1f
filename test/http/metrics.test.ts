// Prometheus metrics: GET /metrics scrapes, counts what it should, and never names a donor or a
// charity. METRICS_PORT moves it to a port of its own; METRICS=off removes it.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { AlmonerClient, AuthenticationError, type DonationInput, ValidationError } from '../../src/client/index.js';
import { Metrics } from '../../src/http/metrics.js';
import { exampleDonation, startTestApp, type TestContext } from '../support/app.js';
import { BACKENDS, SQLITE } from '../support/backends.js';
import { urlOf } from '../support/client.js';
import { watchConformance } from '../support/openapi.js';
import { ServerProcess } from '../support/server.js';

function sample(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

for (const backend of BACKENDS) {
  describe(`GET /metrics [${backend.name}]`, () => {
    let t: TestContext;
    let app: FastifyInstance;
    /** The typed client of the app with metrics (not of t.app, so t.client() will not do), over a real socket. */
    let client: (password?: string) => AlmonerClient;
    before(async () => {
      t = await startTestApp(backend);
      app = await buildApp({ store: t.store, metrics: new Metrics() });
      watchConformance(app);
      await app.ready();
      const baseUrl = await urlOf(app);
      client = (password = t.charity.password) => new AlmonerClient({ baseUrl, username: t.charity.username, password });
    });
    after(async () => {
      try {
        await app?.close(); // fails if an exchange did not conform to the OpenAPI document
      } finally {
        await t?.close();
      }
    });

    // exampleDonation and the invalid donation are plain records: cast, the request is still well-formed JSON.
    const create = (body: Record<string, unknown>, key?: string) =>
      client().createDonation(body as unknown as DonationInput, key ? { idempotencyKey: key } : {});

    test('counts requests, failures, donations and commits, with no personal data in it', async () => {
      await client().me();
      await assert.rejects(client('wrong').me(), (e) => e instanceof AuthenticationError && e.status === 401);
      assert.equal((await create(exampleDonation({ donor_email: 'metrics.donor@example.org' }), 'metrics-key-1')).replayed, false);
      assert.equal((await create(exampleDonation({ donor_email: 'metrics.donor@example.org' }), 'metrics-key-1')).replayed, true); // a replay
      assert.equal((await create(exampleDonation({ gift_aid: 'no', donation_type: 'renewal' }))).replayed, false);
      await assert.rejects(create({ donor_email: 'bad' }), (e) => e instanceof ValidationError && e.status === 422);

      // Raw: /metrics is not part of the API the client speaks.
      const res = await app.inject({ method: 'GET', url: '/metrics' });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/plain/);
      const text = res.body;
      assert.equal(sample(text, 'almoner_http_requests_total', '{route="/api/v1/me",method="POST",status="200"}'), 1);
      assert.equal(sample(text, 'almoner_http_requests_total', '{route="/api/v1/me",method="POST",status="401"}'), 1);
      assert.equal(sample(text, 'almoner_http_requests_total', '{route="/api/v1/donation/create",method="POST",status="200"}'), 3);
      assert.equal(sample(text, 'almoner_http_requests_total', '{route="/api/v1/donation/create",method="POST",status="422"}'), 1);
      assert.equal(sample(text, 'almoner_authentication_failures_total'), 1);
      assert.equal(sample(text, 'almoner_donations_recorded_total', '{gift_aid="yes",donation_type="one-time"}'), 1, 'a replay is not a new donation');
      assert.equal(sample(text, 'almoner_donations_recorded_total', '{gift_aid="no",donation_type="renewal"}'), 1);
      assert.ok(sample(text, 'almoner_db_batch_size_count') >= 2);
      assert.ok(sample(text, 'almoner_db_commit_seconds_count') >= 2);
      assert.ok(sample(text, 'almoner_http_request_duration_seconds_count', '{route="/api/v1/me",method="POST"}') >= 2);
      assert.match(text, /^process_cpu_user_seconds_total /m);
      for (const secret of ['metrics.donor@example.org', t.charity.username, t.charity.password, 'Jane', 'SW1A 1AA']) {
        assert.ok(!text.includes(secret), `the metrics mention ${secret}`);
      }
    });

    test('unknown paths are counted under one label, not by their URL', async () => {
      // Raw: not an API call.
      await app.inject({ method: 'GET', url: '/some/secret/path/jane@example.org' });
      const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      assert.ok(!text.includes('jane@example.org'));
      assert.ok(sample(text, 'almoner_http_requests_total', '{route="(no route)",method="GET",status="404"}') >= 1);
    });
  });
}

describe('serve: METRICS_PORT and METRICS=off', () => {
  const freePort = () =>
    new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as AddressInfo;
        s.close(() => resolve(port));
      });
    });

  test('METRICS_PORT serves /metrics there and not on the API port; METRICS=off serves none', async () => {
    const database = await SQLITE.createDatabase();
    const metricsPort = await freePort();
    const separate = await new ServerProcess(database.url, { METRICS_PORT: String(metricsPort) }).listening();
    try {
      assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status, 200);
      assert.equal((await fetch(`${separate.url}/metrics`)).status, 404);
    } finally {
      await separate.stop('SIGTERM', 10_000);
    }
    const off = await new ServerProcess(database.url, { METRICS: 'off' }).listening();
    try {
      assert.equal((await fetch(`${off.url}/metrics`)).status, 404);
    } finally {
      await off.stop('SIGTERM', 10_000);
      await database.drop();
    }
  });
});

describe('GET /metrics under a flood', () => {
  test('scrapes that arrive while one is being gathered share it: a flood of them costs one gathering at a time', async () => {
    // Under WORKERS each gathering is a round of messages through the primary and work in every
    // worker: 77,000 GET /metrics pipelined on one connection queued thousands of them, and the
    // server answered nobody else for seconds (a review, 2026-11-29).
    const { default: Fastify } = await import('fastify');
    const { metricsRoute } = await import('../../src/http/metrics.js');
    let gatherings = 0;
    let finish!: () => void;
    const app = Fastify();
    await app.register(
      metricsRoute(async () => {
        gatherings++;
        await new Promise<void>((resolve) => (finish = resolve));
        return `scrape ${gatherings}\n`;
      }),
    );
    try {
      const answers = Promise.all(Array.from({ length: 200 }, () => app.inject({ method: 'GET', url: '/metrics' })));
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(gatherings, 1, 'one gathering for 200 scrapes at once');
      finish();
      for (const res of await answers) assert.equal(res.body, 'scrape 1\n');
      // One that comes once the gathering is done gets a fresh one.
      const later = app.inject({ method: 'GET', url: '/metrics' });
      await new Promise((r) => setTimeout(r, 50));
      finish();
      assert.equal((await later).body, 'scrape 2\n');
    } finally {
      await app.close();
    }
  });
});
