// Slow and idle clients cannot exhaust the server: a request whose headers or body stall is closed
// at its deadline, and one client address holds a bounded number of connections. The deadlines are
// the app's options, shortened here: the test does not wait out production's.
import assert from 'node:assert/strict';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { connect as connectTls } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import selfsigned from 'selfsigned';
import { buildApp } from '../../src/app.js';
import { MAX_WAITING_PER_CONNECTION } from '../../src/http/connections.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore } from '../../src/store/open.js';
import { BACKENDS, SQLITE } from '../support/backends.js';
import { startTestApp, type TestContext } from '../support/app.js';
import { proxyFor } from '../support/proxy.js';
import { TestClock } from '../support/clock.js';
import { READY_STANDS_MS } from '../../src/http/routes/health.js';

const SHORT = { headersMs: 400, requestMs: 400, checkEveryMs: 50 };

/** A raw connection, and everything it receives until the server closes it. */
function open(port: number): { socket: Socket; closed: Promise<string>; text: () => string } {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let text = '';
  socket.on('data', (d) => (text += d.toString('latin1')));
  const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(text)));
  return { socket, closed, text: () => text };
}

/** Resolves with what arrived once the server closed the connection, or fails after `ms`. */
function closedWithin(conn: { closed: Promise<string> }, ms: number, what: string): Promise<string> {
  return Promise.race([conn.closed, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: still open after ${ms} ms`)), ms).unref())]);
}

describe('connection limits', () => {
  let t: TestContext;
  const apps: FastifyInstance[] = [];
  before(async () => {
    t = await startTestApp(SQLITE);
  });
  after(async () => {
    for (const app of apps) await app.close();
    await t.close();
  });

  async function listening(options: Parameters<typeof buildApp>[0]['connections'], trustProxy: string | boolean = false, https?: { cert: Buffer; key: Buffer }): Promise<number> {
    const app = await buildApp({ store: t.store, connections: options, trustProxy, https });
    apps.push(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    return (app.server.address() as AddressInfo).port;
  }

  test('a body that stalls is answered 408 and closed at the request deadline', async () => {
    const port = await listening(SHORT);
    const conn = open(port);
    conn.socket.write(`POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"amo`);
    const text = await closedWithin(conn, 3000, 'a stalled body');
    assert.match(text, /^HTTP\/1\.1 408 /);
    assert.match(text, /"message":"The request took too long to arrive\."/);
  });

  test('headers that never end are closed at the headers deadline', async () => {
    const port = await listening(SHORT);
    const conn = open(port);
    conn.socket.write('POST /api/v1/me HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n');
    const text = await closedWithin(conn, 3000, 'stalled headers');
    assert.match(text, /^(HTTP\/1\.1 408 |$)/);
  });

  test('HTTPS: a handshake never begun, or stalled halfway, is closed at the headers deadline (it stayed open for good); a completed one is served', async () => {
    const pems = await selfsigned.generate([{ name: 'commonName', value: '127.0.0.1' }], { keySize: 2048 });
    const port = await listening(SHORT, false, { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private) });
    const silent = open(port);
    const halfHello = open(port);
    halfHello.socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])); // the start of a ClientHello, then nothing
    try {
      assert.equal(await closedWithin(silent, 3000, 'a connection that never began its handshake'), '');
      assert.equal(await closedWithin(halfHello, 3000, 'a handshake stalled halfway'), '');
    } finally {
      for (const c of [silent, halfHello]) c.socket.destroy(); // else the app's close would wait for them
    }
    const secure = connectTls({ port, host: '127.0.0.1', ca: pems.cert, checkServerIdentity: () => undefined });
    let text = '';
    secure.on('data', (d: Buffer) => (text += d.toString('latin1')));
    await new Promise((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    secure.write(`POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nConnection: close\r\n\r\n`);
    await new Promise((resolve) => secure.once('close', resolve));
    assert.match(text, /^HTTP\/1\.1 200 /);
  });

  test('an idle keep-alive connection is closed after keepAliveMs (72 s in production), its answer given first', async () => {
    const keepAliveMs = 600;
    const port = await listening({ ...SHORT, keepAliveMs });
    const conn = open(port);
    const began = Date.now();
    conn.socket.write(`POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Length: 0\r\n\r\n`);
    const text = await closedWithin(conn, 5000, 'an idle keep-alive connection');
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.ok(Date.now() - began >= keepAliveMs - 50, `closed after ${Date.now() - began} ms, before keepAliveMs`);
  });

  test('a client that stops reading its answers is closed once nothing has moved for stalledMs (80 s in production); it held its connection for good (a review)', async () => {
    const stalledMs = 500;
    const port = await listening({ ...SHORT, stalledMs });
    const conn = open(port);
    await new Promise((resolve) => conn.socket.once('connect', resolve));
    conn.socket.pause(); // reads nothing: the answers fill the kernel's buffers, and then nothing moves
    conn.socket.write('GET /docs/swagger-ui-bundle.js HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(8));
    // Long after stalledMs it reads again: what the server had sent, and then the end, as the server closed it meanwhile.
    await new Promise((resolve) => setTimeout(resolve, stalledMs * 4));
    conn.socket.resume();
    const text = await closedWithin(conn, 10_000, 'a connection whose client read nothing for a while');
    const answers = text.split('HTTP/1.1 200 ').length - 1;
    assert.ok(answers >= 1 && answers < 8, `${answers} of the 8 answers arrived: the server closed the connection while the client read nothing`);
  });

  test('one address holds at most its limit of connections: the next gets a 429 and is closed; others are not affected', async () => {
    const port = await listening({ ...SHORT, perAddress: 5 });
    const held = Array.from({ length: 5 }, () => open(port));
    await new Promise((r) => setTimeout(r, 100));
    const refused = open(port);
    const text = await closedWithin(refused, 3000, 'the connection over the limit');
    assert.match(text, /^HTTP\/1\.1 429 Too Many Requests\r\n/);
    assert.match(text, /\r\nRetry-After: 1\r\n/);
    assert.match(text, /"message":"Too many open connections from this address\./);
    assert.doesNotMatch(text, /X-Request-Id/i, 'sent before any request was read: no request id, as the OpenAPI document says');
    // One let go: room for another, which is served.
    held[0]!.socket.destroy();
    await held[0]!.closed;
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/me`, { method: 'POST', headers: { authorization: t.charity.authorization } });
    assert.equal(res.status, 200);
    for (const c of held) c.socket.destroy();
  });

  test('a CONNECT is answered and its connection closed, even by a client that keeps its side open: its slot is free again', async () => {
    const port = await listening({ ...SHORT, perAddress: 1 });
    const proxyCall = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    proxyCall.on('error', () => {});
    let text = '';
    proxyCall.on('data', (d) => (text += d.toString('latin1')));
    proxyCall.write('CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n');
    await new Promise((resolve) => proxyCall.once('end', resolve)); // the answer, and the server's side closed
    assert.match(text, /^HTTP\/1\.1 400 /);
    try {
      // Half-open, it held the address's one slot for good: a 429 here.
      await new Promise((r) => setTimeout(r, 100));
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/me`, { method: 'POST', headers: { authorization: t.charity.authorization } });
      assert.equal(res.status, 200);
    } finally {
      proxyCall.destroy();
    }
  });

  test('connections from a trusted proxy are not counted', async () => {
    const port = await listening({ ...SHORT, perAddress: 2 }, '127.0.0.1');
    const held = Array.from({ length: 6 }, () => open(port));
    await new Promise((r) => setTimeout(r, 100));
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/me`, { method: 'POST', headers: { authorization: t.charity.authorization } });
    assert.equal(res.status, 200);
    for (const c of held) c.socket.destroy();
  });
});

const postgres = BACKENDS.find((b) => b.name === 'postgres');

describe('requests pipelined on one connection [postgres]', { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  test('behind one whose answer waits (a readiness check on a stalled database), the connection is read no further once a bounded number wait; all are answered once it answers', async () => {
    // Only creates were bounded (MAX_WAITING_PER_CONNECTION): 118,000 GET /health/ready pipelined on
    // one connection to a PostgreSQL server held 1.1 GB and queued ahead of every other request's
    // database work; GET /metrics under WORKERS the same in the primary (a review, 2026-11-29).
    const database = await postgres!.createDatabase();
    const { proxy, url } = await proxyFor(database.url); // the server's connections pass through it, and it can stall them
    const store = await openStore(parseDatabaseUrl(url, 4));
    const clock = new TestClock();
    const app = await buildApp({ store, clock: clock.now });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      assert.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200); // a live connection in the pool
      let received = 0;
      app.server.on('request', () => received++);
      proxy.pause();
      clock.advance(READY_STANDS_MS); // that check's answer no longer stands: the next asks the stalled database, and those after it wait for it
      const total = 5_000; // before the bound, every one was taken in at once
      const conn = open((app.server.address() as AddressInfo).port);
      conn.socket.write('GET /health/ready HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(total));
      // Until the server has taken in all it will: the count stops moving.
      for (let last = -1; received !== last; ) {
        last = received;
        await new Promise((r) => setTimeout(r, 200));
      }
      // What Node had read before reading stopped is parsed all the same: a chunk's worth at most (about 1,500 of these).
      assert.ok(received <= MAX_WAITING_PER_CONNECTION + 2000, `${received} of ${total} requests taken in while the first still waited`);
      proxy.resume();
      const answers = () => (conn.text().match(/HTTP\/1\.1 \d+ /g) ?? []).length;
      for (const deadline = Date.now() + 60_000; answers() < total && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
      conn.socket.destroy();
      const statuses = new Map<string, number>();
      for (const [, status] of conn.text().matchAll(/HTTP\/1\.1 (\d+) /g)) statuses.set(status!, (statuses.get(status!) ?? 0) + 1);
      // Each answered: 200, or 503 for one whose time for the database ran out (waiting for the stall, then its turn at the pool).
      assert.equal(answers(), total, `every one answered once the database answers: ${JSON.stringify([...statuses])}`);
      assert.deepEqual([...statuses.keys()].filter((status) => status !== '200' && status !== '503'), []);
      assert.ok((statuses.get('200') ?? 0) > total / 2, JSON.stringify([...statuses]));
    } finally {
      await app.close();
      await store.close();
      await proxy.close();
      await database.drop();
    }
  });
});
