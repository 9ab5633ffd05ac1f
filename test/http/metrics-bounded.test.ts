// A server runs for weeks: nothing a client chooses may add series to /metrics without end. Labels
// come from the route's pattern, the method (Node's parser knows a fixed set) and the status, so a
// second round of requests of the same kinds, every value in them new (paths, query strings, Host,
// Origin, X-Request-Id, X-Forwarded-For addresses, usernames, passwords, Idempotency-Keys), adds no
// series at all. Guards the soak review of 2026-11-30, which found the series count level at 540 to
// 544 under three 12-minute loads of such requests.
import assert from 'node:assert/strict';
import { METHODS, request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { Metrics } from '../../src/http/metrics.js';
import { basic, exampleDonation, NO_FAILURE_DELAY, startTestApp, type TestContext } from '../support/app.js';
import { SQLITE } from '../support/backends.js';
import { urlOf } from '../support/client.js';

/** The series in a Prometheus text body: its lines that are not comments. */
const seriesOf = (text: string): string[] => text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
/** A series without its value, so a count that moved is the same series. */
const nameOf = (line: string): string => line.slice(0, line.lastIndexOf(' '));

describe('GET /metrics after many distinct requests', () => {
  let t: TestContext;
  let app: FastifyInstance;
  let port: number;
  before(async () => {
    t = await startTestApp(SQLITE);
    // TRUST_PROXY=true: every request may name its own client address, as a soak's load did.
    app = await buildApp({ store: t.store, metrics: new Metrics(), trustProxy: true, failureDelay: NO_FAILURE_DELAY });
    await app.ready();
    port = Number(new URL(await urlOf(app)).port);
  });
  after(async () => {
    await app?.close();
    await t?.close();
  });

  const fresh = () => randomBytes(6).toString('hex');
  const send = (method: string, path: string, headers: Record<string, string>, body?: string) =>
    new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method, path, agent: false, headers: { accept: 'application/json', ...headers } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(body);
    });

  /** One round: every kind of request once, each with values never sent before. */
  async function round(): Promise<void> {
    const v4 = () => `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}`;
    const v6 = () => `2001:db8:${fresh().slice(0, 4)}:${fresh().slice(0, 4)}::${fresh().slice(0, 4)}`;
    const common = () => ({ host: `h-${fresh()}.example`, 'x-request-id': fresh(), 'x-forwarded-for': Math.random() < 0.5 ? v4() : v6() });
    const json = { 'content-type': 'application/json' };
    const donation = JSON.stringify(exampleDonation({ donor_email: `d-${fresh()}@example.org` }));
    const statuses: number[] = [];
    const s = async (p: Promise<number>) => statuses.push(await p);
    await s(send('POST', '/api/v1/me', { ...common(), authorization: t.charity.authorization }));
    await s(send('POST', '/api/v1/me', { ...common(), authorization: basic(t.charity.username, `wrong-${fresh()}`) }));
    await s(send('POST', '/api/v1/me', { ...common(), authorization: basic(`nobody-${fresh()}`, fresh()) }));
    await s(send('POST', '/api/v1/donation/create', { ...common(), ...json, authorization: t.charity.authorization, 'idempotency-key': fresh() }, donation));
    await s(send('POST', '/api/v1/donation/create', { ...common(), ...json, authorization: t.charity.authorization }, donation));
    await s(send('POST', `/api/v1/donation/create?${fresh()}=1`, { ...common(), ...json, authorization: t.charity.authorization }, donation));
    await s(send('POST', '/api/v1/me', { ...common(), authorization: t.charity.authorization, origin: `https://o-${fresh()}.example` }));
    for (const path of ['/health', '/health/ready', '/api/v1/openapi.json', '/docs', `/health/?${fresh()}`]) await s(send('GET', path, common()));
    // Every method Node's parser reads (CONNECT is answered apart), on an unknown path, an unknown
    // path under the API, and a known path it does not serve.
    for (const method of METHODS.filter((m) => m !== 'CONNECT')) {
      for (const path of [`/${fresh()}/${fresh()}?q=${fresh()}`, `/api/v1/${fresh()}`, '/api/v1/me']) await s(send(method, path, common()));
    }
    assert.ok(statuses.includes(200) && statuses.includes(401) && statuses.includes(404) && statuses.includes(405), `statuses: ${[...new Set(statuses)].join(', ')}`);
  }

  test('a second round of the same kinds of request, every value new, adds no series', async () => {
    // Almoner's own series (Node's GC histogram gains a kind of collection when V8 first makes one: not the client's doing).
    const scrape = async () => seriesOf((await app.inject({ method: 'GET', url: '/metrics' })).body).map(nameOf).filter((name) => name.startsWith('almoner_'));
    await scrape(); // so that GET /metrics's own series are there before the first count
    await round();
    const first = await scrape();
    await round();
    const second = await scrape();
    const added = second.filter((name) => !first.includes(name));
    assert.deepEqual(added, [], 'series added by values alone');
    // And the whole is of the size the soak saw (540 to 544 almoner_http_ series under its load): a bound by kinds, not by values.
    const http = second.filter((name) => name.startsWith('almoner_http_'));
    assert.ok(http.length < 1500, `${http.length} almoner_http_ series`);
  });
});
