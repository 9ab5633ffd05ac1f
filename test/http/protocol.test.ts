// The HTTP edges: content types, bodies, sizes, unknown paths and methods, error shapes.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import type { AddressInfo } from 'node:net';
import { exampleDonation, startTestApp, type TestContext } from '../support/app.js';
import { BACKENDS, SQLITE } from '../support/backends.js';
import { until } from '../support/cli.js';
import { BODY_LIMIT, BODY_LIMIT_TEXT, TOO_LARGE_MESSAGE } from '../../src/http/body.js';
import { MAX_WAITING_PER_CONNECTION } from '../../src/http/connections.js';
import { Throttle } from '../../src/http/throttle.js';

const MiB = 1024 * 1024;

/**
 * Sends one request over a raw socket the way a blocking client does (PHP streams, Python's
 * sendall): the whole body is written before a byte of the answer is read. If the server closes
 * the connection while the body is still arriving, the client's kernel resets it and the answer
 * is lost; that is what this reports as `error`.
 */
async function rawRequest(port: number, head: string, body: Buffer | null, chunked = false): Promise<{ status: number; text: string; error?: string }> {
  const socket = connect(port, '127.0.0.1');
  socket.pause(); // read nothing until everything is written
  let error: string | undefined;
  socket.on('error', (e) => (error ??= (e as NodeJS.ErrnoException).code ?? e.message));
  const write = (data: Buffer | string) =>
    new Promise<void>((resolve) => {
      if (socket.destroyed) return resolve();
      socket.write(data, () => resolve());
    });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  await write(`${head}\r\nConnection: close\r\n\r\n`);
  if (body) {
    const piece = 64 * 1024;
    for (let i = 0; i < body.length && !socket.destroyed; i += piece) {
      const part = body.subarray(i, i + piece);
      await write(chunked ? Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]) : part);
    }
    if (chunked) await write('0\r\n\r\n');
  }
  const received: Buffer[] = [];
  await new Promise<void>((resolve) => {
    if (socket.destroyed) return resolve();
    socket.on('data', (d) => received.push(d));
    socket.on('close', () => resolve());
    socket.resume();
  });
  const text = Buffer.concat(received).toString('utf8');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  return { status, text, ...(status === 0 ? { error: error ?? 'no answer' } : {}) };
}

/**
 * Writes `requests` on one connection at once (pipelined), and `later` 50 ms after if given, then
 * reads until the server closes it: all the answers, as text ("(still open)" after 5 s). With
 * `halfClose`, the client's side of the connection is shut once `requests` are written
 * (shutdown(SHUT_WR)), and the answers are still read.
 */
function pipelined(port: number, requests: string, later?: string, { halfClose = false } = {}): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let got = '';
    socket.on('data', (d) => (got += d.toString('utf8')));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    setTimeout(() => (socket.destroy(), resolve(`${got}\n(still open)`)), 5000).unref();
    if (halfClose) socket.end(requests);
    else socket.write(requests);
    if (later !== undefined) setTimeout(() => socket.write(later), 50);
  });
}

for (const backend of BACKENDS) describe(`HTTP protocol edges [${backend.name}]`, () => {
  let t: TestContext;
  let port: number;
  before(async () => {
    t = await startTestApp(backend);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(() => t.close());

  const post = (url: string, payload: string | undefined, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, payload, headers: { authorization: t.charity.authorization, ...headers } });

  test('more than 1,000 header lines: 431, the connection closed, nothing stored; an Idempotency-Key past them was read as none, and its retry stored twice', async () => {
    // Until 2026-11-30 (a faults review): Node keeps the first 1,000 lines alone in a request's headers.
    const before = (await t.donations()).length;
    const body = Buffer.from(JSON.stringify(exampleDonation({ donor_email: 'many.lines@example.org' })));
    const head = (filler: number) =>
      `POST /api/v1/donation/create HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n${Array.from({ length: filler }, (_, i) => `X${i}: 1\r\n`).join('')}Idempotency-Key: many-lines-1`;
    for (let sent = 0; sent < 2; sent++) {
      const res = await rawRequest(port, head(1000), body);
      assert.equal(res.status, 431, res.text);
      assert.match(res.text, /\r\nconnection: close\r\n/i);
      // Node 24's parser refuses that many lines itself, as headers too large (seen on 24.22.3); Node 20 and 22 hand them to Almoner.
      assert.match(res.text, /"message":"The request (?:has more than 1,000 header lines|headers are too large)\."/);
    }
    assert.equal((await t.donations()).length, before, 'nothing stored');
    // Under the limit, the key is read: the retry is a replay.
    const first = await rawRequest(port, head(990), body);
    const again = await rawRequest(port, head(990), body);
    assert.deepEqual([first.status, again.status], [200, 200], first.text);
    assert.match(again.text, /\r\nidempotent-replayed: true\r\n/i);
    assert.equal((await t.donations()).length, before + 1);
  });

  describe('authentication comes before the body', () => {
    const anon = (headers: Record<string, string>, payload: string) => t.app.inject({ method: 'POST', url: '/api/v1/donation/create', headers, payload });

    test('malformed JSON without credentials: 401, not 400', async () => {
      const res = await anon({ 'content-type': 'application/json' }, '{not json');
      assert.equal(res.statusCode, 401);
      assert.deepEqual(res.json(), { message: 'Unauthorized' });
    });

    test('an unsupported content type without credentials: 401, not 415', async () => {
      assert.equal((await anon({ 'content-type': 'text/plain' }, 'hello')).statusCode, 401);
    });

    test('an invalid donation without credentials: 401, not 422', async () => {
      assert.equal((await anon({ 'content-type': 'application/json' }, '{}')).statusCode, 401);
    });

    test('an oversize body without credentials: 401, not 413, and the client reads it', async () => {
      const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${8 * MiB}`;
      const res = await rawRequest(port, head, Buffer.alloc(8 * MiB, 'a'));
      assert.equal(res.status, 401, res.error);
      assert.match(res.text, /\{"message":"Unauthorized"\}/);
    });
  });

  describe('bodies', () => {
    test('malformed JSON: 400 with a message', async () => {
      const res = await post('/api/v1/donation/create', '{"donor_email": ', { 'content-type': 'application/json' });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), { message: 'The request body is not valid JSON.' });
    });

    test('only JSON\'s own whitespace (and one byte-order mark first) may stand round a JSON body: two marks, a trailing mark, a no-break space or U+2028 make it not JSON (String.prototype.trim took them until 2026-11-29; a review)', async () => {
      const good = JSON.stringify(exampleDonation({ donor_email: 'whitespace@example.org' }));
      for (const [label, text] of [['two byte-order marks', `\uFEFF\uFEFF${good}`], ['a mark after it', `${good}\uFEFF`], ['a no-break space', `\u00A0${good}`], ['U+2028', `${good}\u2028`], ['U+3000 alone', '\u3000']]) {
        const res = await post('/api/v1/donation/create', text, { 'content-type': 'application/json' });
        assert.equal(res.statusCode, 400, `${label}: ${res.body}`);
        assert.deepEqual(res.json(), { message: 'The request body is not valid JSON.' }, label);
      }
      for (const [label, text] of [['one byte-order mark', `\uFEFF${good}`], ['JSON whitespace', ` \r\n\t${good} \r\n\t`]]) {
        const res = await post('/api/v1/donation/create', text, { 'content-type': 'application/json' });
        assert.equal(res.statusCode, 200, `${label}: ${res.body}`);
      }
    });

    for (const payload of ['[]', '[1,2]', '"a string"', '42', 'null', 'true']) {
      test(`a JSON body that is not an object (${payload}): 400 with a message`, async () => {
        const res = await post('/api/v1/donation/create', payload, { 'content-type': 'application/json' });
        assert.equal(res.statusCode, 400);
        assert.deepEqual(res.json(), { message: 'The request body must be a JSON object.' });
      });
    }

    for (const contentType of ['application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON']) {
      test(`JSON is accepted as ${contentType}`, async () => {
        const res = await post('/api/v1/donation/create', JSON.stringify(exampleDonation()), { 'content-type': contentType });
        assert.equal(res.statusCode, 200);
      });
    }

    test('a Content-Encoding other than identity: 415 naming it, nothing stored (gzip was told "not valid UTF-8", a plain body labelled br was taken)', async () => {
      const json = JSON.stringify(exampleDonation({ donor_email: 'coded@example.org' }));
      for (const [coding, payload] of [['gzip', gzipSync(json)], ['br', Buffer.from(json)], ['deflate, gzip', Buffer.from(json)]] as const) {
        const res = await post('/api/v1/donation/create', payload as unknown as string, { 'content-type': 'application/json', 'content-encoding': coding });
        assert.equal(res.statusCode, 415, `${coding}: ${res.body}`);
        assert.equal(res.json().message, `Content-Encoding ${JSON.stringify(coding)} is not supported: send the body uncompressed, without a Content-Encoding header.`);
      }
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'coded@example.org' })) stored.push(d);
      assert.deepEqual(stored, []);
      assert.equal((await post('/api/v1/donation/create', json, { 'content-type': 'application/json', 'content-encoding': 'identity' })).statusCode, 200);
    });

    test('JSON in another charset: 415', async () => {
      const res = await post('/api/v1/donation/create', '{}', { 'content-type': 'application/json; charset=latin1' });
      assert.equal(res.statusCode, 415);
      assert.match(res.json().message, /UTF-8/);
    });

    test('form bodies with a charset are accepted', async () => {
      const res = await post('/api/v1/donation/create', new URLSearchParams(exampleDonation() as Record<string, string>).toString(), {
        'content-type': 'application/x-www-form-urlencoded; charset=UTF-8',
      });
      assert.equal(res.statusCode, 200);
    });

    test('a form in another charset: 415; a form whose bytes or escapes are not UTF-8 (a Latin-1 page sends é as %E9): 400 naming it, nothing stored', async () => {
      const before = (await t.donations()).length;
      const { donor_first_name: _first, donor_last_name: _last, ...rest } = exampleDonation() as Record<string, string>;
      const form = (first: string) => `${new URLSearchParams(rest).toString()}&donor_first_name=${first}`;
      const latin1 = await post('/api/v1/donation/create', form('Ren%E9e'), { 'content-type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' });
      assert.equal(latin1.statusCode, 415);
      assert.deepEqual(latin1.json(), { message: 'Unsupported charset: form bodies must be UTF-8.' });
      for (const escape of ['%E9', '%C3', '%C0%AF', '%ED%A0%80', '%FF%FE']) {
        const res = await post('/api/v1/donation/create', form(`Ren${escape}e`), { 'content-type': 'application/x-www-form-urlencoded' });
        assert.equal(res.statusCode, 400, escape);
        assert.deepEqual(res.json(), { message: `The form body is not valid UTF-8: ${escape} is not the percent-encoding of UTF-8 text.` });
      }
      const raw = await t.app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization: t.charity.authorization, 'content-type': 'application/x-www-form-urlencoded' },
        payload: Buffer.concat([Buffer.from(form('Ren')), Buffer.from([0xe9]), Buffer.from('e')]),
      });
      assert.equal(raw.statusCode, 400);
      assert.deepEqual(raw.json(), { message: 'The request body is not valid UTF-8.' });
      assert.equal((await t.donations()).length, before);
      // A % that escapes nothing: the value would otherwise be kept as sent, escapes and all.
      for (const [value, shown] of [['%zz%C3%A9', '%zz'], ['100%', '%'], ['5%2', '%2']] as const) {
        const res = await post('/api/v1/donation/create', form(value), { 'content-type': 'application/x-www-form-urlencoded' });
        assert.equal(res.statusCode, 400, value);
        assert.deepEqual(res.json(), { message: `The form body is not valid: "${shown}" is not a percent-escape (a form sends % as %25).` });
      }
      assert.equal((await t.donations()).length, before);
      const ok = await post('/api/v1/donation/create', `${form('Ren%C3%A9e')}&donor_last_name=100%25%20D%C3%B6e`, { 'content-type': 'application/x-www-form-urlencoded' });
      assert.equal(ok.statusCode, 200, ok.body);
      assert.deepEqual([ok.json().data.donor_first_name, ok.json().data.donor_last_name], ['Renée', '100% Döe']);
    });

    for (const contentType of ['text/plain', 'multipart/form-data; boundary=x', 'application/xml', 'application/octet-stream']) {
      test(`${contentType}: 415 with a message`, async () => {
        const res = await post('/api/v1/donation/create', 'donor_email=a@example.com', { 'content-type': contentType });
        assert.equal(res.statusCode, 415);
        assert.match(res.json().message, /application\/json/);
      });
    }

    test('an empty JSON body is an empty object: 422 naming the required fields', async () => {
      const res = await post('/api/v1/donation/create', '', { 'content-type': 'application/json' });
      assert.equal(res.statusCode, 422);
    });

    test('JSON that is not valid UTF-8: 400, nothing stored', async () => {
      const before = (await t.donations()).length;
      const bytes = Buffer.concat([Buffer.from('{"donor_last_name":"'), Buffer.from([0xc3, 0x28]), Buffer.from(`", ${JSON.stringify(exampleDonation()).slice(1)}`)]);
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/donation/create',
        headers: { authorization: t.charity.authorization, 'content-type': 'application/json' },
        payload: bytes,
      });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), { message: 'The request body is not valid UTF-8.' });
      assert.equal((await t.donations()).length, before);
    });

    test('__proto__ and constructor keys are dropped, not obeyed', async () => {
      const payload = `{"__proto__": {"amount": "5"}, "constructor": {"prototype": {}}, ${JSON.stringify(exampleDonation()).slice(1)}`;
      const res = await post('/api/v1/donation/create', payload, { 'content-type': 'application/json' });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().data.amount, '25.00');
    });

    test('deeply nested JSON is a 422, not a crash', async () => {
      const deep = '['.repeat(30_000) + ']'.repeat(30_000); // within the 64 KiB limit
      const payload = `{"donor_email": ${deep}, "gift_aid": "yes", "amount": "5", "donation_type": "renewal"}`;
      const res = await post('/api/v1/donation/create', payload, { 'content-type': 'application/json' });
      assert.equal(res.statusCode, 422);
      assert.deepEqual(Object.keys(res.json().errors), ['donor_email']);
    });
  });

  describe('body size', () => {
    test(`a body of just under ${BODY_LIMIT_TEXT} is accepted`, async () => {
      const body = JSON.stringify({ ...exampleDonation(), padding: 'x'.repeat(BODY_LIMIT - 1000) });
      assert.ok(Buffer.byteLength(body) <= BODY_LIMIT);
      const res = await post('/api/v1/donation/create', body, { 'content-type': 'application/json' });
      assert.equal(res.statusCode, 200);
    });

    test(`over ${BODY_LIMIT_TEXT}: 413 reaches a client that sends the whole body, every time`, async () => {
      // 8 MiB: more than the socket buffers hold, so a server that cuts the connection early loses the 413.
      const body = Buffer.alloc(8 * MiB, ' ');
      const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}`;
      const statuses: Array<number | string> = [];
      for (let i = 0; i < 10; i++) {
        const res = await rawRequest(port, head, body);
        statuses.push(res.status || res.error || 0);
      }
      assert.deepEqual(statuses, Array(10).fill(413));
    });

    test('a Transfer-Encoding other than chunked alone: 415 naming it, nothing stored (gzip, chunked was taken until 2026-11-29)', async () => {
      const json = Buffer.from(JSON.stringify(exampleDonation({ donor_email: 'transfer@example.org' })));
      for (const [coding, body] of [['gzip, chunked', json], ['gzip, chunked', gzipSync(json)], ['deflate,chunked', json]] as const) {
        const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}`;
        const res = await rawRequest(port, head, body, true);
        assert.equal(res.status, 415, `${coding}: ${res.text}`);
        assert.match(res.text, new RegExp(`"message":"Transfer-Encoding \\\\"${coding}\\\\" is not supported`));
      }
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'transfer@example.org' })) stored.push(d);
      assert.deepEqual(stored, []);
      const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked`;
      assert.equal((await rawRequest(port, head, json, true)).status, 200);
    });

    test('more than one Host, Authorization or Content-Type header: 400 naming it, whichever comes first (the first was taken until 2026-11-29, a Content-Type\'s until 2026-11-30), and nothing stored', async () => {
      const wrong = `Basic ${Buffer.from('nobody:wrong').toString('base64')}`;
      const body = JSON.stringify({ ...exampleDonation(), donor_email: 'two-types@example.org' });
      for (const [path, headers, name] of [
        ['me', `Host: x\r\nHost: y\r\nAuthorization: ${t.charity.authorization}`, 'Host'],
        ['me', `Host: x\r\nAuthorization: ${t.charity.authorization}\r\nauthorization: ${wrong}`, 'Authorization'],
        ['me', `Host: x\r\nAuthorization: ${wrong}\r\nAuthorization: ${t.charity.authorization}`, 'Authorization'],
        ['donation/create', `Host: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\ncontent-type: text/plain`, 'Content-Type'],
        ['donation/create', `Host: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: text/plain\r\nContent-Type: application/json`, 'Content-Type'],
      ] as const) {
        const res = await rawRequest(port, `POST /api/v1/${path} HTTP/1.1\r\n${headers}${path === 'me' ? '' : '\r\nTransfer-Encoding: chunked'}`, path === 'me' ? null : Buffer.from(body), path !== 'me');
        assert.equal(res.status, 400, res.text);
        assert.match(res.text, new RegExp(`"message":"The request has more than one ${name} header: send one\\."`));
      }
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'two-types@example.org' })) stored.push(d);
      assert.deepEqual(stored, []);
    });

    test('a Content-Type with more than one charset parameter: 415 saying so, and nothing stored (the first was taken until 2026-11-30)', async () => {
      const body = JSON.stringify({ ...exampleDonation(), donor_email: 'two-charsets@example.org' });
      for (const type of ['application/json; charset=utf-8; charset=latin1', 'application/json; charset=utf-8; charset=UTF-8', 'application/x-www-form-urlencoded;charset=utf-8;charset=utf-8']) {
        const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: ${type}\r\nTransfer-Encoding: chunked`;
        const res = await rawRequest(port, head, Buffer.from(body), true);
        assert.equal(res.status, 415, `${type}: ${res.text}`);
        assert.match(res.text, /"message":"The Content-Type has 2 charset parameters: send one, UTF-8, or none\."/);
      }
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'two-charsets@example.org' })) stored.push(d);
      assert.deepEqual(stored, []);
      // One charset, whatever another parameter's quoted value holds (a `charset=` in it was counted as a second until a review).
      for (const type of ['application/json; charset=utf-8', 'application/json; foo="a;charset=latin1"; charset=utf-8', 'application/json; charset="UTF-8"']) {
        const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: ${type}\r\nTransfer-Encoding: chunked`;
        const ok = await rawRequest(port, head, Buffer.from(JSON.stringify({ ...exampleDonation(), donor_email: 'one-charset@example.org' })), true);
        assert.equal(ok.status, 200, `${type}: ${ok.text}`);
      }
    });

    test(`over ${BODY_LIMIT_TEXT}, chunked without a Content-Length: 413 as well`, async () => {
      const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked`;
      const res = await rawRequest(port, head, Buffer.alloc(8 * MiB, ' '), true);
      assert.equal(res.status, 413, res.error);
      assert.ok(res.text.includes(JSON.stringify({ message: TOO_LARGE_MESSAGE })), res.text.slice(0, 300));
    });

    test('a Content-Length far beyond the limit is refused without reading the body', async () => {
      const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${1024 * MiB}`;
      const res = await rawRequest(port, head, null);
      assert.equal(res.status, 413, res.error);
    });

    test('a 401, 404 or 405 to a body declared over 16 MiB closes the connection: what follows is never read as a request', async () => {
      // Raw: a keep-alive client that declares a huge body and sends none of it.
      const answer = (head: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1');
          let text = '';
          socket.on('data', (d) => (text += d.toString('latin1')));
          socket.on('end', () => resolve(text)); // the server closed it
          socket.on('error', reject);
          setTimeout(() => (socket.destroy(), resolve(`${text}\n(still open)`)), 3000).unref();
          socket.write(`${head}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${17 * MiB}\r\n\r\n`);
        });
      for (const head of ['POST /api/v1/me HTTP/1.1\r\nAuthorization: Basic bm9ib2R5Om5vcGU=', 'POST /api/v1/nowhere HTTP/1.1', 'GET /api/v1/me HTTP/1.1']) {
        const text = await answer(head);
        assert.match(text, /^HTTP\/1\.1 40[145] /, head);
        assert.match(text, /\r\nConnection: close\r\n/i, `${head}: ${text}`);
        assert.doesNotMatch(text, /still open/, head);
      }
    });

    test('creates followed on their connection by bytes that are not HTTP: their 200s are sent first, then the 400, and each is stored once', async () => {
      // A body one byte longer than its Content-Length: the extra byte is read as the next request, which is
      // not valid HTTP. The 400 was written at once, in place of the creates' answers, though they were stored:
      // a client without a key, told 400, sends it again. Two pipelined creates, then the byte: both are answered.
      const bodies = ['pipelined-junk-1@example.org', 'pipelined-junk-2@example.org'].map((email) => JSON.stringify(exampleDonation({ donor_email: email })));
      const head = (body: string) =>
        `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
      const text = await pipelined(port, `${head(bodies[0]!)}${bodies[0]}${head(bodies[1]!)}${bodies[1]} `, 'more junk'); // Node reports the error again for each further chunk
      const answers = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])); // each straight after the body before it
      assert.deepEqual(answers, [200, 200, 400], text);
      for (const [, json] of text.matchAll(/\r\n\r\n(\{"data".*?\}\})/gs)) {
        const { id, donor_email } = (JSON.parse(json!) as { data: { id: number; donor_email: string } }).data;
        assert.equal((await t.store.findDonation(id))?.donor_email, donor_email);
      }
      assert.doesNotMatch(text, /still open/);
    });

    test('a client that half-closes its connection once its creates are sent (shutdown(SHUT_WR)) is answered each, then the connection ends; each stored once', async () => {
      // Node ended such a connection at once, unanswered, and a create already under way was stored all the same
      // (a review: 50 of 50), which a client without a key sends again.
      const create = (body: string) =>
        `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const good = (n: number) => JSON.stringify(exampleDonation({ donor_email: `half-closed-${n}@example.org` }));
      for (const count of [1, 3]) {
        const text = await pipelined(port, [1, 2, 3].slice(0, count).map((n) => create(good(count * 10 + n))).join(''), undefined, { halfClose: true });
        const answers = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
        assert.deepEqual(answers, Array(count).fill(200), text);
        assert.doesNotMatch(text, /still open/, 'the connection ends once they are answered');
        for (const n of [1, 2, 3].slice(0, count)) {
          const stored = [];
          for await (const d of t.store.exportDonations({ donorEmail: `half-closed-${count * 10 + n}@example.org` })) stored.push(d);
          assert.equal(stored.length, 1, `create ${n} of ${count}`);
        }
      }
      assert.equal(await pipelined(port, '', undefined, { halfClose: true }), '', 'a connection half-closed with nothing sent is ended at once');
    });

    test('creates pipelined behind an answer that closes the connection (a 400 for a bad body) are not stored: their answers could never be sent', async () => {
      // Node hands pipelined requests to their handlers at once but sends answers in order; the 400 closes the
      // connection, and the creates after it were stored unanswered, which a client without a key sends again.
      const create = (body: string) =>
        `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const good = (n: number) => JSON.stringify(exampleDonation({ donor_email: `behind-close-${n}@example.org` }));
      const text = await pipelined(port, create(good(0)) + create('{bad}') + [1, 2, 3, 4, 5].map((n) => create(good(n))).join(''));
      const answers = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
      assert.deepEqual(answers, [200, 400], text);
      const stored = [];
      for (const n of [0, 1, 2, 3, 4, 5]) for await (const _ of t.store.exportDonations({ donorEmail: `behind-close-${n}@example.org` })) stored.push(n);
      assert.deepEqual(stored, [0], 'only the create that was answered is stored');
    });

    test('a create pipelined behind a request with an unsupported Expect (a 417 that closes the connection) is not stored', async () => {
      // Node hands such a request to its Expect listener, not as a request: the create behind it waited on the one before.
      const create = (email: string) => {
        const body = JSON.stringify(exampleDonation({ donor_email: email }));
        return `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      };
      const text = await pipelined(port, create('before-expect@example.org') + `POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nExpect: foo\r\n\r\n` + create('behind-expect@example.org'));
      assert.deepEqual([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [200, 417], text);
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'behind-expect@example.org' })) stored.push(d.id);
      assert.deepEqual(stored, []);
    });

    test('a create pipelined behind a request asking to Upgrade (h2c, websocket) is not left unanswered: the answer before it closes the connection, and it is not stored', async () => {
      // Node reads nothing after a request with Upgrade in the bytes it arrived with: the create behind it was
      // never answered, and the connection stayed open until its keep-alive's 72 s (a review, 2026-11-29).
      const body = JSON.stringify(exampleDonation({ donor_email: 'behind-upgrade@example.org' }));
      const create = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      for (const upgrade of ['h2c', 'websocket']) {
        const text = await pipelined(port, `POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nConnection: Upgrade\r\nUpgrade: ${upgrade}\r\nContent-Length: 0\r\n\r\n` + create);
        assert.doesNotMatch(text, /still open/, text);
        assert.deepEqual([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [200], text);
        assert.match(text, /\r\nconnection: close\r\n/i, text);
      }
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'behind-upgrade@example.org' })) stored.push(d.id);
      assert.deepEqual(stored, []);
    });

    test('an HTTP/1.1 request without Host (which HTTP/1.1 requires) gets a JSON 400 naming it, with the usual headers; HTTP/1.0 needs none', async () => {
      // Node's own check answered a bare 400 with no body and none of the app's headers (a review, 2026-11-29).
      const text = await pipelined(port, 'POST /api/v1/me HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      assert.match(text, /^HTTP\/1\.1 400 /, text);
      assert.match(text, /\r\ncontent-type: application\/json; charset=utf-8\r\n/i, text);
      assert.match(text, /\r\ncache-control: no-store\r\n/i, text);
      assert.match(text, /\r\nx-request-id: [0-9a-f-]{36}\r\n/i, text);
      assert.deepEqual(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)), { message: 'The request has no Host header, which HTTP/1.1 requires.' });
      const old = await pipelined(port, `POST /api/v1/me HTTP/1.0\r\nAuthorization: ${t.charity.authorization}\r\nContent-Length: 0\r\n\r\n`);
      assert.match(old, /^HTTP\/1\.1 200 /, old);
    });

    test('a CONNECT pipelined behind creates is answered after them: each create answered and stored once (its 400 took their place, one stored unanswered)', async () => {
      const create = (n: number) => {
        const body = JSON.stringify(exampleDonation({ donor_email: `before-connect-${n}@example.org` }));
        return `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      };
      const ten = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
      const text = await pipelined(port, ten.map(create).join('') + 'CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n\r\n');
      assert.deepEqual([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [...ten.map(() => 200), 400], text);
      for (const n of ten) {
        const stored = [];
        for await (const d of t.store.exportDonations({ donorEmail: `before-connect-${n}@example.org` })) stored.push(d.id);
        assert.equal(stored.length, 1, `before-connect-${n}`);
      }
    });

    test(`creates pipelined while the database is busy: the connection is read no further once ${MAX_WAITING_PER_CONNECTION} wait their turn, then every one is answered and stored once, without a listener warning`, async () => {
      // Waiting creates write nothing, so Node never stopped reading: 20,000 on one connection held 119 MB.
      // Neither the rate nor the creates in flight (CREATE_CONCURRENCY_LIMIT) limited: hundreds are read before reading stops.
      const own = await startTestApp(t.backend === 'sqlite' ? SQLITE : BACKENDS[1], { throttle: new Throttle({ createsPerSecond: 0, createsInFlight: 0 }) });
      const warnings: string[] = [];
      const warned = (w: Error) => warnings.push(w.name);
      process.on('warning', warned);
      try {
        await own.app.listen({ port: 0, host: '127.0.0.1' });
        let received = 0;
        own.app.server.on('request', () => received++);
        let server: import('node:net').Socket | undefined;
        own.app.server.once('connection', (s: import('node:net').Socket) => (server = s));
        const release = await own.holdDonationWrites();
        const total = 1500;
        const create = (n: number) => {
          const body = JSON.stringify(exampleDonation({ donor_email: `waiting-${n}@example.org` }));
          return `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${own.charity.authorization}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
        };
        const socket = connect((own.app.server.address() as AddressInfo).port, '127.0.0.1');
        let got = '';
        socket.on('data', (d) => (got += d.toString('utf8')));
        const all = Array.from({ length: total }, (_, n) => create(n)).join('');
        socket.write(all);
        await until('creates arrive', 5000, () => received >= MAX_WAITING_PER_CONNECTION);
        // Reading stops: what Node had read before the first creates reached their turn is parsed all the same (a few hundred here).
        await new Promise((r) => setTimeout(r, 1000));
        const read = server!.bytesRead;
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(server!.bytesRead, read, 'nothing more read while they wait');
        assert.ok(read < Buffer.byteLength(all) && received < total, `${received} of ${total} creates read while the database was busy`);
        await release();
        await until('every answer', 60_000, () => (got.match(/HTTP\/1\.1 200 /g) ?? []).length === total, () => `${(got.match(/HTTP\/1\.1 200 /g) ?? []).length} answered`);
        socket.destroy();
        const stored = new Set<string>();
        for await (const d of own.store.exportDonations({})) stored.add(d.donor_email);
        assert.equal(stored.size, total);
        assert.deepEqual(warnings.filter((w) => w === 'MaxListenersExceededWarning'), []);
      } finally {
        process.off('warning', warned);
        await own.close();
      }
    });

    for (const second of ['Idempotency-Key', 'idempotency-KEY']) {
      test(`two Idempotency-Key headers (the second as ${second}): 400, nothing stored (they were taken as the one key "a1, a2")`, async () => {
        const email = `two-keys-${second}@example.org`.toLowerCase();
        const body = JSON.stringify(exampleDonation({ donor_email: email }));
        const { status, text } = await rawRequest(
          port,
          `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\n` +
            `Idempotency-Key: a1\r\n${second}: a2\r\nContent-Length: ${Buffer.byteLength(body)}`,
          Buffer.from(body),
        );
        assert.equal(status, 400, text);
        assert.match(text, /"message":"Send one Idempotency-Key header, not several\."/);
        const stored = [];
        for await (const d of t.store.exportDonations({ donorEmail: email })) stored.push(d);
        assert.deepEqual(stored, [], 'nothing stored');
      });
    }

    test('the server answers normally after oversize bodies', async () => {
      const res = await post('/api/v1/donation/create', JSON.stringify(exampleDonation()), { 'content-type': 'application/json' });
      assert.equal(res.statusCode, 200);
    });
  });

  describe('paths and methods', () => {
    test('an unknown path: 404 JSON, no credentials needed', async () => {
      for (const url of ['/nope', '/api/v1/nope', '/api/v2/me', '/api/v1/donation']) {
        const res = await t.app.inject({ method: 'POST', url });
        assert.equal(res.statusCode, 404, url);
        assert.deepEqual(res.json(), { message: 'Not Found' });
      }
    });

    test('no route is a 404 (or 405) whatever the body: a body that could not be read does not come first', async () => {
      const bodies = [
        { 'content-type': 'application/json', payload: '{' }, // would be 400
        { 'content-type': 'text/plain', payload: 'hello' }, // would be 415
        { 'content-type': 'application/json', payload: `"${'x'.repeat(2 * 1024 * 1024)}"` }, // would be 413
      ];
      for (const { payload, ...headers } of bodies) {
        for (const url of ['/api/v1/nope', '/api/v1/me//', '/api/v1//donation/create']) {
          const res = await t.app.inject({ method: 'POST', url, headers, payload });
          assert.equal(res.statusCode, 404, `${url} ${headers['content-type']}`);
          assert.match(res.json().message, /^Not Found/);
        }
        const wrongMethod = await t.app.inject({ method: 'PUT', url: '/api/v1/me', headers, payload });
        assert.equal(wrongMethod.statusCode, 405);
        assert.equal(wrongMethod.headers.allow, 'POST');
      }
    });

    test('a 404 for a path that surely meant an operation names it: a doubled slash, capitals, no /api/v1', async () => {
      // Until 2026-11-30 each was a bare "Not Found", which told a Zapier user who joined "…/api/v1/" and
      // "/donation/create" nothing. Nothing is routed by guess: the answer is still a 404, and nothing is stored.
      const before = (await t.donations()).length;
      for (const [url, meant] of [
        ['/api/v1//donation/create', '/api/v1/donation/create'],
        ['//api/v1/donation/create?x=1', '/api/v1/donation/create'],
        ['/API/V1/Donation/Create', '/api/v1/donation/create'],
        ['/api/v1/me//', '/api/v1/me'],
        ['/donation/create', '/api/v1/donation/create'],
        ['/me/', '/api/v1/me'],
      ] as const) {
        const res = await t.app.inject({ method: 'POST', url, headers: { authorization: t.charity.authorization, 'content-type': 'application/json' }, payload: JSON.stringify(exampleDonation()) });
        assert.equal(res.statusCode, 404, url);
        assert.deepEqual(res.json(), { message: `Not Found. Did you mean ${meant}? Paths are written exactly so: in lower case, with one / between their parts.` }, url);
      }
      assert.deepEqual((await t.app.inject({ method: 'POST', url: '/api/v1/nope' })).json(), { message: 'Not Found' });
      assert.equal((await t.donations()).length, before);
    });

    test('a known path with the wrong method: 405 with Allow, no credentials needed', async () => {
      for (const [method, url] of [['GET', '/api/v1/me'], ['PUT', '/api/v1/donation/create'], ['DELETE', '/api/v1/me'], ['GET', '/api/v1/donation/create?x=1']] as const) {
        const res = await t.app.inject({ method, url });
        assert.equal(res.statusCode, 405, `${method} ${url}`);
        assert.equal(res.headers.allow, 'POST');
        assert.match(res.json().message, /POST/);
      }
    });

    test('a trailing slash reaches the same operation', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/me/', headers: { authorization: t.charity.authorization } });
      assert.equal(res.statusCode, 200);
    });
  });

  describe('every response', () => {
    test('is JSON with no-store, nosniff and a request id (echoed when given)', async () => {
      const responses = [
        await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization, 'x-request-id': 'req-abc-123' } }),
        await t.app.inject({ method: 'POST', url: '/api/v1/me' }),
        await t.app.inject({ method: 'GET', url: '/nope' }),
        await post('/api/v1/donation/create', '{}', { 'content-type': 'application/json' }),
        await t.app.inject({ method: 'POST', url: '/api/v1/me%zz' }), // refused before routing: Fastify's own shape and no headers, before
      ];
      for (const res of responses) {
        assert.match(String(res.headers['content-type']), /^application\/json; charset=utf-8$/);
        assert.equal(res.headers['cache-control'], 'no-store');
        assert.equal(res.headers['x-content-type-options'], 'nosniff');
        assert.ok(res.headers['x-request-id']);
      }
      assert.equal(responses[0]!.headers['x-request-id'], 'req-abc-123');
      assert.equal(responses[4]!.statusCode, 400);
      assert.deepEqual(responses[4]!.json(), { message: 'The request path is not valid: each % in it must begin a percent-escape of UTF-8 (send % as %25).' });
    });

    test('an X-Request-Id that is not 1 to 200 printable characters is replaced by a generated one', async () => {
      for (const given of ['has space', 'x'.repeat(201), 'caf\u00e9']) {
        const res = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization, 'x-request-id': given } });
        assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/, JSON.stringify(given));
      }
    });

    test('CONNECT, a proxy\'s method, gets our JSON error shape (the connection was closed unanswered)', async () => {
      const res = await rawRequest(port, 'CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443', null);
      assert.equal(res.status, 400, res.error);
      assert.match(res.text, /\r\n\r\n\{"message":"The CONNECT method is not supported: this server is not a proxy\."\}$/);
      assert.match(res.text, /\r\nX-Content-Type-Options: nosniff\r\n/);
    });

    /**
     * A client of `Expect: 100-continue` as curl and PHP's cURL are for larger bodies: the headers, then
     * the body only once a `100 Continue` comes. Returns what it read before and after sending the body
     * (or without sending it, when a final answer came first), until the server closed or 2 s passed.
     */
    async function expectingContinue(head: string, body: string): Promise<{ first: string; all: string; sentBody: boolean }> {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      let all = '';
      let sentBody = false;
      let first: string | undefined;
      await new Promise<void>((resolve) => {
        const done = setTimeout(() => resolve(), 2000);
        socket.on('data', (d) => {
          all += d.toString('utf8');
          first ??= all.split('\r\n')[0]!;
          if (!sentBody && all.startsWith('HTTP/1.1 100 ')) {
            sentBody = true;
            socket.write(body);
          }
        });
        socket.on('close', () => {
          clearTimeout(done);
          resolve();
        });
        socket.write(`${head}\r\nExpect: 100-continue\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`);
      });
      socket.destroy();
      return { first: first ?? '', all, sentBody };
    }

    test('Expect: 100-continue: the 100 comes only once the credentials are good and the size within the limit; else the answer comes at once, the body unsent (a 100 came first until 2026-11-29)', async () => {
      const body = JSON.stringify(exampleDonation({ donor_email: 'continue@example.org' }));
      const wrong = `Basic ${Buffer.from('nobody:wrong').toString('base64')}`;
      const refused = await expectingContinue(`POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${wrong}\r\nContent-Type: application/json`, body);
      assert.equal(refused.first, 'HTTP/1.1 401 Unauthorized', refused.all);
      assert.equal(refused.sentBody, false);
      assert.match(refused.all, /\r\nconnection: close\r\n/i);
      const huge = await expectingContinue(`POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json`, ' '.repeat(20 * MiB));
      assert.equal(huge.first, 'HTTP/1.1 413 Payload Too Large', huge.all.slice(0, 300));
      assert.equal(huge.sentBody, false);
      const nowhere = await expectingContinue(`POST /api/v1/nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json`, body);
      assert.equal(nowhere.first, 'HTTP/1.1 404 Not Found', nowhere.all);
      const good = await expectingContinue(`POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nContent-Type: application/json\r\nConnection: close`, body);
      assert.equal(good.first, 'HTTP/1.1 100 Continue', good.all);
      assert.equal(good.sentBody, true);
      assert.match(good.all, /HTTP\/1\.1 200 OK\r\n/);
      assert.match(good.all, /"donor_email":"continue@example\.org"/);
      // A client that sends its body without waiting for the 100 (Python's http.client): its 401 or 413 still
      // arrives, the body read and thrown away as without Expect (a review: lost in a reset, EPIPE, at first).
      for (const [authorization, status] of [[wrong, 401], [t.charity.authorization, 413]] as const) {
        const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${5 * MiB}`;
        const res = await rawRequest(port, head, Buffer.alloc(5 * MiB, ' '));
        assert.equal(res.status, status, res.error);
      }
    });

    test('Expect: 100-continue: a body its headers alone refuse (media type, codings, charset) gets its 415 at once, the body unsent, as the same request gets it without Expect (it came after the 100 until 2026-11-29)', async () => {
      const body = JSON.stringify(exampleDonation({ donor_email: 'refused-by-headers@example.org' }));
      const head = `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}`;
      for (const headers of [
        'Content-Type: text/plain',
        'Content-Type: application/json-patch+json',
        '',
        'Content-Type: application/json\r\nContent-Encoding: gzip',
        'Content-Type: application/json; charset=latin1',
        'Content-Type: application/x-www-form-urlencoded; charset=iso-8859-1',
      ]) {
        const withHeaders = headers === '' ? head : `${head}\r\n${headers}`;
        const refused = await expectingContinue(withHeaders, body);
        assert.equal(refused.first, 'HTTP/1.1 415 Unsupported Media Type', `${headers}: ${refused.all}`);
        assert.equal(refused.sentBody, false, headers);
        const plain = await rawRequest(port, `${withHeaders}\r\nContent-Length: ${Buffer.byteLength(body)}`, Buffer.from(body));
        assert.equal(plain.status, 415, headers);
        assert.equal(plain.text.split('\r\n\r\n')[1], refused.all.split('\r\n\r\n')[1], `${headers}: the same message with Expect as without`);
      }
      // What the headers allow still gets its 100: any case, any parameter, UTF-8 spelt either way.
      for (const type of ['Application/JSON', 'application/json; charset=UTF-8', 'application/json;charset="utf8"']) {
        const good = await expectingContinue(`${head}\r\nContent-Type: ${type}\r\nConnection: close`, JSON.stringify(exampleDonation({ donor_email: 'allowed-by-headers@example.org' })));
        assert.equal(good.first, 'HTTP/1.1 100 Continue', `${type}: ${good.all}`);
        assert.match(good.all, /HTTP\/1\.1 200 OK\r\n/, type);
      }
      const stored = [];
      for await (const d of t.store.exportDonations({ donorEmail: 'refused-by-headers@example.org' })) stored.push(d);
      assert.equal(stored.length, 0);
    });

    test('Expect: 100-continue on /me: a body of any type gets its 100 and is set aside, as without Expect (the create\'s media-type rules gave it a 415 until 2026-11-29; a review)', async () => {
      const head = `POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}`;
      for (const headers of ['Content-Type: text/plain', 'Content-Type: multipart/form-data; boundary=x', 'Content-Type: application/json; charset=latin1', 'Content-Type: application/json\r\nContent-Encoding: gzip', '']) {
        const withHeaders = headers === '' ? head : `${head}\r\n${headers}`;
        const answered = await expectingContinue(`${withHeaders}\r\nConnection: close`, 'hello');
        assert.equal(answered.first, 'HTTP/1.1 100 Continue', `${headers}: ${answered.all}`);
        assert.match(answered.all, /HTTP\/1\.1 200 OK\r\n[^]*"message":"Authenticated"/, headers);
        const plain = await rawRequest(port, `${withHeaders}\r\nContent-Length: 5`, Buffer.from('hello'));
        assert.equal(plain.status, 200, `${headers}: without Expect`);
      }
      // Its size is still bounded before the 100.
      const huge = await expectingContinue(`${head}\r\nContent-Type: text/plain`, ' '.repeat(2 * MiB));
      assert.equal(huge.first, 'HTTP/1.1 413 Payload Too Large', huge.all.slice(0, 300));
      assert.equal(huge.sentBody, false);
    });

    test('an Expect other than 100-continue gets a 417 in our JSON error shape (Node answered a bare 417 with no body)', async () => {
      const res = await rawRequest(port, `POST /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.charity.authorization}\r\nExpect: 200-ok`, null);
      assert.equal(res.status, 417, res.error);
      assert.match(res.text, /\r\n\r\n\{"message":"Only \\"Expect: 100-continue\\" is supported: send the request without this Expect header\."\}$/);
      assert.match(res.text, /\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
    });

    test('a request Node cannot parse (bad bytes in a header) gets our JSON error shape', async () => {
      const res = await rawRequest(port, 'POST /api/v1/me HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b', null);
      assert.equal(res.status, 400, res.error);
      assert.match(res.text, /\r\n\r\n\{"message":"The request is not valid HTTP\."\}$/);
      assert.match(res.text, /\r\nX-Content-Type-Options: nosniff\r\n/);
    });

    test('errors never carry a stack trace', async () => {
      const res = await post('/api/v1/donation/create', '{"a":', { 'content-type': 'application/json' });
      assert.doesNotMatch(res.body, /at .*\.(js|ts):\d+/);
      assert.deepEqual(Object.keys(res.json()), ['message']);
    });
  });
});
