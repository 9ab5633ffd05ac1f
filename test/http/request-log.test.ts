// Each request's log lines carry its request id: the one line per request at info, and whatever
// is written through request.log, which is made only when a line is written (http/request-log.ts).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import pino from 'pino';
import { accessLog, type AccessEntry } from '../../src/http/access-log.js';
import { lazyRequestLogger } from '../../src/http/request-log.js';
import { exampleDonation, startTestApp } from '../support/app.js';
import { until } from '../support/cli.js';

type Line = Record<string, unknown>;

function capture(): { stream: { write(line: string): void }; lines: Line[] } {
  const lines: Line[] = [];
  return { stream: { write: (line) => lines.push(JSON.parse(line) as Line) }, lines };
}

describe('request log lines', () => {
  test("at info: one line per request and request.log's lines, each with the request's id; a 401's line names the client's address", async () => {
    const { stream, lines } = capture();
    const t = await startTestApp(undefined, { logger: { level: 'info', stream } });
    try {
      const me = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization, 'x-request-id': 'req-log-1' } });
      assert.equal(me.statusCode, 200);
      const access = lines.filter((l) => l.msg === 'request');
      assert.deepEqual(
        access.map(({ reqId, method, route, status, charity, level }) => ({ reqId, method, route, status, charity, level })),
        [{ reqId: 'req-log-1', method: 'POST', route: '/api/v1/me', status: 200, charity: t.charity.id, level: 30 }],
      );

      // A refused authentication's line names the client's address, so an operator can see who is
      // guessing; an authenticated request's does not (its charity says who it is).
      assert.equal(Object.hasOwn(access[0]!, 'client'), false, JSON.stringify(access[0]));
      const wrong = `Basic ${Buffer.from(`${t.charity.username}:wrong`).toString('base64')}`;
      const refused = await t.app.inject({ method: 'POST', url: '/api/v1/me', remoteAddress: '198.51.100.23', headers: { authorization: wrong, 'x-request-id': 'req-log-401' } });
      assert.equal(refused.statusCode, 401);
      const refusedLine = lines.find((l) => l.msg === 'request' && l.reqId === 'req-log-401');
      assert.equal(refusedLine?.client, '198.51.100.23', JSON.stringify(refusedLine));
      assert.equal(refusedLine?.charity, undefined);
      // It names the charity whose username was tried, by its id (never the username as sent), so the operator
      // can tell a charity that its integration still sends an old password; an unknown username names none.
      assert.equal(refusedLine?.charity_tried, t.charity.id, JSON.stringify(refusedLine));
      const unknown = `Basic ${Buffer.from(`${t.charity.username}x:wrong`).toString('base64')}`;
      assert.equal((await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: unknown, 'x-request-id': 'req-log-401-unknown' } })).statusCode, 401);
      const unknownLine = lines.find((l) => l.msg === 'request' && l.reqId === 'req-log-401-unknown');
      assert.equal(Object.hasOwn(unknownLine!, 'charity_tried'), false, JSON.stringify(unknownLine));
      assert.doesNotMatch(JSON.stringify(lines), new RegExp(`${t.charity.username}`), 'no username in the log');

      // A failure the route logs itself, through request.log.
      await t.store.close();
      const ready = await t.app.inject({ method: 'GET', url: '/health/ready' });
      assert.equal(ready.statusCode, 503);
      const id = ready.headers['x-request-id'];
      const warned = lines.filter((l) => l.msg === 'readiness check failed');
      assert.equal(warned.length, 1, JSON.stringify(lines));
      assert.equal(warned[0]!.reqId, id);
      assert.equal(warned[0]!.level, 40);
      assert.ok(lines.some((l) => l.msg === 'request' && l.reqId === id && l.status === 503));
    } finally {
      await t.close(); // the store a second time: a no-op
    }
  });

  test('a client that goes before its body is all sent is not "database unavailable" (it was, at warn: a false alarm)', async () => {
    const { stream, lines } = capture();
    const t = await startTestApp(undefined, { logger: { level: 'info', stream } });
    try {
      const url = new URL(await t.app.listen({ port: 0, host: '127.0.0.1' }));
      const socket = connect(Number(url.port), '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"donor_email":`);
      await new Promise((r) => setTimeout(r, 100));
      socket.resetAndDestroy();
      const deadline = Date.now() + 5000;
      while (!lines.some((l) => l.msg === 'the client closed the connection before its request body was all sent') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.ok(lines.some((l) => l.msg === 'the client closed the connection before its request body was all sent' && l.level === 30), JSON.stringify(lines));
      assert.ok(!lines.some((l) => l.msg === 'database unavailable' || (l.level as number) >= 40), JSON.stringify(lines));
    } finally {
      await t.close();
    }
  });

  test('a client that leaves before its answer is logged and counted, as 499, once; its create is stored all the same', async () => {
    // Its answer was never sent, so onResponse never came: no line and no count for a request that stored a donation (a review, 2026-11-29).
    const { stream, lines } = capture();
    const t = await startTestApp(undefined, { logger: { level: 'info', stream } });
    try {
      const url = new URL(await t.baseUrl());
      const release = await t.holdDonationWrites();
      const body = JSON.stringify(exampleDonation({ donor_email: 'left-early@example.org' }));
      const socket = connect(Number(url.port), '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nX-Request-Id: left-early\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      await new Promise((r) => setTimeout(r, 200)); // the create waits for the lock
      // A reset, as a client that gives up mid-request sends: a plain close (a FIN) is a half-close to the
      // server, which answers it still (RFC 9112; see test/http/protocol.test.ts), so its answer counts as sent.
      socket.resetAndDestroy();
      await new Promise((r) => setTimeout(r, 100));
      await release();
      await until('the create is stored', 5000, async () => (await t.donations()).some((d) => d.donor_email === 'left-early@example.org'));
      await new Promise((r) => setTimeout(r, 200)); // any later line would be written by now
      const access = lines.filter((l) => l.msg === 'request' && l.reqId === 'left-early');
      assert.deepEqual(access.map(({ route, status, charity }) => ({ route, status, charity })), [{ route: '/api/v1/donation/create', status: 499, charity: t.charity.id }]);
      assert.equal(typeof access[0]!.ms, 'number');
    } finally {
      await t.close();
    }
  });

  test('at warn: nothing for a request that goes well', async () => {
    const { stream, lines } = capture();
    const t = await startTestApp(undefined, { logger: { level: 'warn', stream } });
    try {
      const me = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization } });
      assert.equal(me.statusCode, 200);
      assert.deepEqual(lines, []);
    } finally {
      await t.close();
    }
  });

  test("request.log writes a level that is on with the request's bindings, and nothing below it", () => {
    const { stream, lines } = capture();
    const parent = pino({ level: 'warn' }, stream);
    const log = lazyRequestLogger(parent, { reqId: 'r-1' }, {});
    assert.equal(log.level, 'warn');
    log.info({ a: 1 }, 'not written');
    log.debug('not written either');
    log.warn({ a: 2 }, 'written');
    log.error('also written');
    log.child({ part: 'inner' }).warn('from a child');
    assert.deepEqual(
      lines.map(({ level, reqId, a, part, msg }) => ({ level, reqId, a, part, msg })),
      [
        { level: 40, reqId: 'r-1', a: 2, part: undefined, msg: 'written' },
        { level: 50, reqId: 'r-1', a: undefined, part: undefined, msg: 'also written' },
        { level: 40, reqId: 'r-1', a: undefined, part: 'inner', msg: 'from a child' },
      ],
    );
  });

  test("the access line is, byte for byte, the line pino writes for the same fields", () => {
    const entries: AccessEntry[] = [
      { reqId: '3f1c2a4e-0d7b-4c1e-9a55-6b1f0e2d7c91', method: 'POST', route: '/api/v1/me', status: 200, ms: 0.4, charity: 7 },
      { reqId: 'a "quoted" \\ id~', method: 'GET', route: '(no route)', status: 404, ms: 12, charity: undefined },
      { reqId: 'r', method: 'POST', route: '/api/v1/donation/create', status: 503, ms: 4501.3, charity: 123456 },
      { reqId: 'r401', method: 'POST', route: '/api/v1/me', status: 401, ms: 1.2, charity: undefined, client: '203.0.113.9' },
      { reqId: 'r401-known', method: 'POST', route: '/api/v1/me', status: 401, ms: 1.2, charity: undefined, charityTried: 12, client: '203.0.113.9' },
      { reqId: 'r429', method: 'POST', route: '/api/v1/donation/create', status: 429, ms: 0.1, charity: 3, client: '2001:db8::"1\\' },
      // Written as one template, with its own quoting and its own way with the time: anything JSON escapes, and tenths.
      { reqId: 'tab\there, new\nline, \u0001, é, \u2028, \ud83d\ude00 and a lone \ud800', method: 'PATCH', route: '/x', status: 200, ms: 0, charity: 0 },
      ...[0.1, 0.3, 0.7, 1, 9.9, 10, 99.9, 100, 1234567.8, 0.30000000000000004, 2.05].map((ms, i) => ({ reqId: `t-${i}`, method: 'POST', route: '/api/v1/me', status: 200, ms: Math.round(ms * 10) / 10, charity: 1 })),
    ];
    // As the server makes its logger (redaction included), with a fixed time so the lines can be compared.
    const options = { level: 'info', redact: { paths: ['authorization', 'password', 'donor_email'], censor: '[redacted]' }, timestamp: () => ',"time":42' };
    const ours: string[] = [];
    const theirs: string[] = [];
    const write = accessLog(pino(options, { write: (line: string) => ours.push(line) }))!;
    const log = pino(options, { write: (line: string) => theirs.push(line) });
    for (const entry of entries) {
      write(entry);
      const { charityTried, client, ...rest } = entry;
      log.info({ ...rest, charity_tried: charityTried, client }, 'request');
    }
    assert.deepEqual(ours, theirs);
    assert.equal(accessLog(pino({ level: 'warn' }, { write: () => {} })), undefined, 'no access line below info');
  });
});
