// deploy/nginx.conf (issue 12, item 4): the shipped file, run by Debian's real nginx with only its
// machine-specific lines changed (test/support/nginx.ts), in front of a real `bin/almoner serve` set
// up as deploy/almoner.service sets it up (HOST=127.0.0.1, TRUST_PROXY=127.0.0.1), over HTTPS with a
// certificate made by openssl. Clients bind other loopback addresses (127.0.0.2, 127.0.0.3: all of
// 127.0.0.0/8 is loopback on Linux) to stand for different people. SQLite only: the proxy does not
// care which database is behind Almoner.
//
// How it fails without each piece (each tried on an altered deploy/nginx.conf, environment or dist/):
// - nginx not setting X-Forwarded-For, or Almoner without TRUST_PROXY: every request seems to come
//   from nginx, so 127.0.0.3's first failure after 127.0.0.2's thirty is a 429, not a 401.
// - nginx appending to X-Forwarded-For ($proxy_add_x_forwarded_for) instead of replacing it: behind
//   TRUST_PROXY=true a guesser that forges a new address with every guess is never limited. (Behind
//   TRUST_PROXY=127.0.0.1 Almoner itself takes the address nginx appended, so only that test sees it.)
// - a larger client_max_body_size: the 413 comes from Almoner (it has an X-Request-Id, and Almoner
//   logs it); a smaller one refuses the create of exactly the limit. Without the line at all,
//   nginx's default of 1m lets bodies over Almoner's 64 KiB through to Almoner's own 413.
// - no error_page 413: nginx's HTML page instead of Almoner's JSON. No error_page 502: the same for
//   the 502s after Almoner has gone.
// - Almoner exiting at once on SIGTERM: the creates it held at the signal get 502s, not 200s.
import assert from 'node:assert/strict';
import { BODY_LIMIT, BODY_LIMIT_TEXT, TOO_LARGE_MESSAGE } from '../../src/http/body.js';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { basic, exampleDonation } from '../support/app.js';
import { SQLITE, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, until } from '../support/cli.js';
import { freePort } from '../support/daemon.js';
import { NGINX_PATH, NginxProcess, noNginx, selfSignedCertificate } from '../support/nginx.js';
import { ServerProcess } from '../support/server.js';
import { AUTH_FAILURES } from '../../src/http/throttle.js';

const TOO_LARGE = JSON.stringify({ message: TOO_LARGE_MESSAGE });
const BAD_GATEWAY = '{"message":"The service is unavailable. A create that reached it may have been recorded: send it again shortly with the same Idempotency-Key, or, sent without one, check first."}';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

interface Send {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the body in chunks without a Content-Length. */
  chunked?: boolean;
  /** The client's own address (a new connection bound to it). */
  from?: string;
  agent?: Agent;
}

/** One HTTPS request to 127.0.0.1:`port`, trusting only the test's certificate. */
function send(port: number, ca: string, path: string, options: Send = {}): Promise<Answer> {
  const { method = 'POST', body, chunked = false, from, agent } = options;
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (body !== undefined && !chunked) headers['content-length'] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    let answered = false;
    // Writing a body nginx has already refused may fail once its answer is in: the answer counts.
    const fail = (err: Error) => answered || reject(err);
    const req = request({ host: '127.0.0.1', port, path, method, headers, ca, localAddress: from, agent: agent ?? false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s));
      res.once('end', () => {
        answered = true;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text });
      });
      res.once('error', fail);
    });
    req.on('error', fail);
    req.setTimeout(15_000, () => req.destroy(new Error('no answer within 15 s')));
    if (body !== undefined && chunked) {
      const bytes = Buffer.from(body);
      for (let at = 0; at < bytes.length; at += 64 * 1024) req.write(bytes.subarray(at, at + 64 * 1024));
    } else if (body !== undefined) {
      req.write(body);
    }
    req.end();
  });
}

const json = (answer: Answer) => JSON.parse(answer.text) as Record<string, unknown>;

/** One plain HTTP request to Almoner itself on 127.0.0.1:`port`, with node:http (fetch refuses a 17 KiB header). */
function sendPlain(port: number, path: string, { method = 'POST', headers = {} }: { method?: string; headers?: Record<string, string> }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `bytes` sent over plain TCP to 127.0.0.1:`port` as they are, and everything that comes back until the server closes. */
function rawSocket(port: number, bytes: string): Promise<{ text: string }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = netConnect({ host: '127.0.0.1', port }, () => socket.write(bytes));
    socket.setEncoding('utf8').on('data', (s: string) => (text += s));
    socket.once('end', () => resolve({ text }));
    socket.once('error', reject);
    socket.setTimeout(15_000, () => socket.destroy(new Error('no answer within 15 s')));
  });
}

/** `bytes` sent over TLS to 127.0.0.1:`port` as they are, and everything that comes back until the server closes. */
function rawTls(port: number, ca: string, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => socket.write(bytes));
    socket.setEncoding('utf8').on('data', (s: string) => (got += s));
    socket.once('end', () => resolve(got));
    socket.once('error', reject);
    socket.setTimeout(15_000, () => socket.destroy(new Error('no answer within 15 s')));
  });
}

/** A create body of exactly `bytes` bytes: the example donation, padded with a field Almoner ignores. */
function donationOfSize(bytes: number, email: string): string {
  const empty = JSON.stringify({ ...exampleDonation({ donor_email: email }), padding: '' });
  assert.ok(bytes >= empty.length);
  return JSON.stringify({ ...exampleDonation({ donor_email: email }), padding: 'x'.repeat(bytes - empty.length) });
}

/**
 * Credentials of a username nobody has: a failed authentication. A new username each time, so only
 * the per-address limit is reached, never the per-address-and-username one.
 */
const stranger = (series: string, i: number) => basic(`nobody-${series}-${i}`, 'wrong-password-wrong-password-00');

describe('deploy/nginx.conf in front of bin/almoner serve', { skip: noNginx }, () => {
  const dirs: string[] = [];
  let database: TestDatabase | undefined;
  let authorization = '';
  const servers: ServerProcess[] = [];
  const proxies: NginxProcess[] = [];

  /** bin/almoner serve on the test database, with nginx in front of it; both are stopped in after(). */
  async function stack(name: string, trustProxy: string): Promise<{ almoner: ServerProcess; nginx: NginxProcess; port: number; ca: string }> {
    assert.ok(database);
    const server = new ServerProcess(database.url, {
      TRUST_PROXY: trustProxy,
      LOG_LEVEL: 'info', // the request lines show what reached Almoner
      CREATE_RATE_LIMIT: '0', // the per-charity create limit would answer the shutdown test's stream with 429s
    });
    servers.push(server);
    await server.listening();
    // A folder of its own straight under the temporary folder: as root, nginx runs as nobody and must reach it.
    const dir = mkdtempSync(join(tmpdir(), `almoner-nginx-${name}-`));
    dirs.push(dir);
    const certificate = await selfSignedCertificate(dir);
    const httpsPort = await freePort();
    let httpPort = await freePort();
    while (httpPort === httpsPort) httpPort = await freePort();
    const site = { httpsPort, httpPort, certFile: certificate.certFile, keyFile: certificate.keyFile, upstreamPort: Number(new URL(server.url).port) };
    const nginx = new NginxProcess(dir, site);
    proxies.push(nginx);
    await nginx.listening();
    return { almoner: server, nginx, port: site.httpsPort, ca: certificate.cert };
  }

  let main: Awaited<ReturnType<typeof stack>>;
  const viaNginx = (path: string, options?: Send) => send(main.port, main.ca, path, options);

  before(async () => {
    assertBuilt();
    assert.ok(existsSync(NGINX_PATH), `no nginx at ${NGINX_PATH}: CI installs it (.ci/run)`);
    database = await SQLITE.createDatabase();
    const created = await almoner(database.url, ['charity', 'create', '--name', 'Behind Nginx', '--email', 'nginx@example.org', '--json']);
    assert.equal(created.code, 0, created.stderr);
    const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
    authorization = basic(username, password);
    main = await stack('main', '127.0.0.1');
  });

  after(async () => {
    for (const nginx of proxies) await nginx.stop();
    for (const server of servers) {
      server.kill();
      await server.exited;
    }
    await database?.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  test('the OpenAPI document through nginx on a port of its own names that port in its server URL (code generators call it)', async () => {
    // Until 2026-11-30 nginx passed $host, which drops the port: https://127.0.0.1/api/v1 (an operator's review).
    const document = await viaNginx('/api/v1/openapi.json', { method: 'GET' });
    assert.equal(document.status, 200, document.text);
    const servers = json(document).servers as Array<{ url: string }>;
    assert.equal(servers[0]!.url, `https://127.0.0.1:${main.port}/api/v1`);
    // A host nginx matches by what comes before its colon, with another after a comma, is not passed on as sent: Almoner took
    // the last of X-Forwarded-Host's list (a review of the first version of this fix).
    for (const host of ['127.0.0.1:1,evil.example', '127.0.0.1:1,evil.example:443']) {
      const odd = await viaNginx('/api/v1/openapi.json', { method: 'GET', headers: { host } });
      assert.equal(odd.status, 200, `${host}: ${odd.text}`);
      assert.equal((json(odd).servers as Array<{ url: string }>)[0]!.url, 'https://127.0.0.1/api/v1', host);
    }
  });

  test('requests pass through over HTTPS: /me, a create, /health/ready', async () => {
    const me = await viaNginx('/api/v1/me', { headers: { authorization } });
    assert.equal(me.status, 200, me.text);
    assert.deepEqual(json(me), { success: true, message: 'Authenticated', data: { name: 'Behind Nginx', email: 'nginx@example.org' } });
    assert.equal(me.headers['strict-transport-security'], 'max-age=31536000');

    const body = JSON.stringify(exampleDonation({ donor_email: 'through.nginx@example.org' }));
    const created = await viaNginx('/api/v1/donation/create', { headers: { authorization, 'content-type': 'application/json' }, body });
    assert.equal(created.status, 200, created.text);
    assert.equal((json(created).data as Record<string, unknown>).donor_email, 'through.nginx@example.org');

    const ready = await viaNginx('/health/ready', { method: 'GET' });
    assert.deepEqual({ status: ready.status, body: json(ready) }, { status: 200, body: { status: 'ready' } });
  });

  test("nginx's access log holds no donor's details from a URL's query string and no credentials, even a password typed as the username; each line names Almoner's request id", async () => {
    // Debian's nginx logs every request in its `combined` format (until 2026-11-30 the shipped file kept it): the whole
    // request line, query string and all, which Almoner refuses to take donors' details from because proxies log it,
    // and $remote_user, the Basic username, which is the password when an integration has the two swapped (a security
    // review). Kept 14 days in /var/log/nginx, readable by the adm group.
    const password = 'Sw4pped-P4ssw0rd-Typed-As-Username';
    const swapped = basic(password, 'behind-nginx-username');
    for (const port of [main.port, main.nginx.site.httpPort]) {
      const query = '/api/v1/donation/create?donor_email=query.donor%40example.org&donor_phone=07700900123';
      if (port === main.port) {
        const res = await viaNginx(query, { headers: { authorization: swapped, 'content-type': 'application/json' }, body: '{}' });
        assert.equal(res.status, 401);
        assert.equal((await viaNginx(query, { headers: { authorization, 'content-type': 'application/json' }, body: '{}' })).status, 422);
      } else {
        const res = await fetch(`http://127.0.0.1:${port}${query}`, { method: 'POST', redirect: 'manual', headers: { authorization: swapped, 'content-type': 'application/json' }, body: '{}' });
        assert.equal(res.status, 403);
      }
    }
    // A password in a URL's user part (absolute form, as a client configured with nginx as its proxy sends): nginx
    // refuses it (400), and logged it whole, user part and all, until a review on 2026-11-30.
    const withUser = await viaNginx(`https://${password}@127.0.0.1:${main.port}/api/v1/donation/create`, { headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(withUser.status, 400);
    const logged = () => (existsSync(main.nginx.accessLog()) ? readFileSync(main.nginx.accessLog(), 'utf8') : '');
    const lines = () => logged().split('\n');
    await until('three lines of the creates in the access log, and the 400', 5000, () => lines().filter((line) => line.includes('/api/v1/donation/create')).length >= 3 && lines().some((line) => /" 400 /.test(line)), logged);
    const log = logged();
    assert.doesNotMatch(log, /Sw4pped|query\.donor|07700900123|donor_email/, log);
    // The request as sent but for its query string, on both ports (on port 80 too, though its 403 is an internal redirect's).
    for (const status of [401, 422, 403]) assert.match(log, new RegExp(`"POST /api/v1/donation/create HTTP/1\\.1" ${status} `), log);
    const almonerIds = main.almoner.logLines().map((line) => (JSON.parse(line) as { reqId?: string }).reqId).filter((id) => id !== undefined);
    assert.ok(log.split('\n').some((line) => almonerIds.some((id) => line.includes(id))), `no line names an id Almoner logged:\n${log}`);
  });

  test("/metrics is hidden from the world, with a trailing slash or not (Almoner's JSON 404), and served to Prometheus on Almoner's own port", async () => {
    for (const path of ['/metrics', '/metrics/', '/metrics?x=1']) {
      const hidden = await viaNginx(path, { method: 'GET' });
      assert.deepEqual({ status: hidden.status, body: json(hidden) }, { status: 404, body: { message: 'Not Found' } }, path);
      assert.doesNotMatch(hidden.text, /almoner_/, path);
    }
    const direct = await fetch(`${main.almoner.url}/metrics/`);
    assert.equal(direct.status, 200); // what nginx hides is there: the test would pass for nothing otherwise
    assert.match(await direct.text(), /almoner_/);
  });

  test("plain HTTP: an API call is refused with a JSON 403 saying to use https (it was redirected, and a client that followed kept sending credentials in clear), as are nginx's own refusals there; the rest redirected with 308", async () => {
    for (const path of ['/api/v1/me', '/api/v1/donation/create']) {
      const res = await fetch(`http://127.0.0.1:${main.nginx.site.httpPort}${path}`, { method: 'POST', redirect: 'manual', headers: { authorization, 'content-type': 'application/json' }, body: '{}' });
      assert.equal(res.status, 403, path);
      assert.equal(res.headers.get('location'), null, path);
      assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8', path);
      assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f]{32}$/, path);
      assert.equal(res.headers.get('server'), 'nginx', "no version, as on 443 (until 2026-11-29 port 80 named nginx's)");
      assert.match(((await res.json()) as { message: string }).message, /^This API is served over HTTPS only: send your requests to the same address with https:\/\/ instead of http:\/\/\. .*ask for new credentials\.$/);
    }
    const docs = await fetch(`http://127.0.0.1:${main.nginx.site.httpPort}/docs`, { redirect: 'manual' });
    assert.equal(docs.status, 308);
    assert.equal(docs.headers.get('location'), 'https://127.0.0.1/docs');
    // nginx's own refusals on port 80 say the same, in JSON (they were its HTML pages: a review).
    const plain = async (request: string) => {
      const { text } = await rawSocket(main.nginx.site.httpPort, request);
      return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
    };
    for (const [what, request] of [
      ['a TRACE', 'TRACE /api/v1/me HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'],
      ['a header over 8 KiB', `POST /api/v1/me HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(9000)}\r\nConnection: close\r\n\r\n`],
      ['a request that is not HTTP', 'NOT HTTP AT ALL\r\n\r\n'],
      ['a Transfer-Encoding nginx does not know', 'POST /api/v1/me HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n'],
    ]) {
      const answer = await plain(request!);
      assert.equal(answer.status, 403, `${what}: ${answer.body}`);
      assert.match(answer.body, /^\{"message":"This API is served over HTTPS only: /, what!);
    }
  });

  test("nginx's own refusals are JSON in Almoner's shape, with HSTS: headers or a URL over 16 KiB (431), TRACE (405 with Allow, or 404), plain HTTP to the HTTPS port and a request that is not HTTP (400), HTTP/2.0 (505); they were nginx's HTML pages", async () => {
    const direct = async (path: string, init: { method?: string; headers?: Record<string, string> }) => {
      const answer = await sendPlain(Number(new URL(main.almoner.url).port), path, init);
      return { status: answer.status, text: answer.text, contentType: answer.headers['content-type'] };
    };
    const cases: [string, string, { method?: string; headers?: Record<string, string> }][] = [
      ['a header over 16 KiB', '/api/v1/me', { headers: { 'x-big': 'a'.repeat(17_000) } }],
      ['a URL over 16 KiB', `/api/v1/me?${'a'.repeat(17_000)}`, {}],
    ];
    for (const [what, path, init] of cases) {
      const fromAlmoner = await direct(path, init);
      assert.equal(fromAlmoner.status, 431, `${what}, from Almoner`);
      const refused = await viaNginx(path, { ...init, method: 'POST' });
      assert.deepEqual({ status: refused.status, text: refused.text, contentType: refused.headers['content-type'] }, fromAlmoner, what);
      assert.equal(refused.headers['x-request-id'], undefined, `${what}: none, as from Almoner (sent before the request is read)`);
    }
    for (const [path, allow] of [['/api/v1/me', 'POST'], ['/docs', 'GET, HEAD']] as const) {
      const trace = await viaNginx(path, { method: 'TRACE' });
      assert.equal(trace.status, 405, path);
      assert.equal(trace.headers.allow, allow, path);
      assert.equal(trace.headers['content-type'], 'application/json; charset=utf-8', path);
      assert.match(String(trace.headers['x-request-id']), /^[0-9a-f]{32}$/, path);
      assert.deepEqual(json(trace), { message: `The TRACE method is not supported for this route. Supported methods: ${allow}.` }, path);
    }
    const fromAlmoner = await (await fetch(`${main.almoner.url}/api/v1/me`, { method: 'PUT' })).json();
    assert.match((fromAlmoner as { message: string }).message, /^The PUT method is not supported for this route\. Supported methods: POST\.$/, "Almoner's own 405, which nginx's repeats");
    const garbage = await rawTls(main.port, main.ca, 'NOT HTTP AT ALL\r\n\r\n');
    assert.match(garbage, /^HTTP\/1\.1 400 /, garbage);
    assert.match(garbage, /\r\n\r\n\{"message":"The request is not valid HTTP\."\}$/, garbage);
    assert.match(garbage, /\r\nStrict-Transport-Security: max-age=31536000\r\n/, 'HSTS, as on every answer on 443 (an add_header in a location replaced the server\'s)');
    // TRACE where Almoner takes GET, and where it has no route (its 404 whatever the method).
    const traceDocument = await viaNginx('/api/v1/openapi.json', { method: 'TRACE' });
    assert.deepEqual([traceDocument.status, traceDocument.headers.allow], [405, 'GET, HEAD']);
    assert.equal(traceDocument.headers['strict-transport-security'], 'max-age=31536000');
    for (const path of ['/nonexistent', '/api/v1/nope', '/.almoner/bad-request']) {
      const method = path.startsWith('/.almoner') ? 'GET' : 'TRACE';
      const missing = await viaNginx(path, { method });
      assert.deepEqual([missing.status, missing.text, missing.headers.allow], [404, '{"message":"Not Found"}', undefined], `${method} ${path}`);
    }
    // Plain HTTP to the HTTPS port: Almoner's own answer to it, and an HTTP version nginx does not speak.
    const { text: plainToTls } = await rawSocket(main.port, 'POST /api/v1/me HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    assert.match(plainToTls, /^HTTP\/1\.1 400 [^]*\r\n\r\n\{"message":"This server takes HTTPS only: send the request to https:\/\/ rather than http:\/\/\."\}$/, plainToTls);
    // On a path with an extension, JSON all the same (it took the extension's type: text/css), and a Transfer-Encoding nginx does not know.
    const traceCss = await viaNginx('/docs/swagger-ui.css', { method: 'TRACE' });
    assert.deepEqual([traceCss.status, traceCss.headers['content-type']], [405, 'application/json; charset=utf-8']);
    const gzipped = await rawTls(main.port, main.ca, `POST /api/v1/donation/create HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${authorization}\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n`);
    assert.match(gzipped, /^HTTP\/1\.1 400 [^]*\r\n\r\n\{"message":"The request is not valid HTTP\."\}$/, gzipped);
    const version = await rawTls(main.port, main.ca, 'GET /docs HTTP/2.0\r\nHost: localhost\r\n\r\n');
    assert.match(version, /^HTTP\/1\.1 505 [^]*\r\n\r\n\{"message":"The request's HTTP version is not supported: send HTTP\/1\.1\."\}$/, version);
  });

  test("failed authentications are counted per real client address, not per nginx", async () => {
    const limit = AUTH_FAILURES.perAddress;
    const first = await Promise.all(Array.from({ length: limit }, (_, i) => viaNginx('/api/v1/me', { from: '127.0.0.2', headers: { authorization: stranger('a', i) } })));
    assert.deepEqual(first.map((a) => a.status), Array(limit).fill(401), 'the first 30 failures from 127.0.0.2');
    const over = await viaNginx('/api/v1/me', { from: '127.0.0.2', headers: { authorization: stranger('a', limit) } });
    assert.equal(over.status, 429, `failure 31 from 127.0.0.2: ${over.text}`);
    assert.ok(Number(over.headers['retry-after']) > 0);

    const other = await viaNginx('/api/v1/me', { from: '127.0.0.3', headers: { authorization: stranger('b', 0) } });
    assert.equal(other.status, 401, `a first failure from 127.0.0.3 after 127.0.0.2 was limited: ${other.text}`);
    const right = await viaNginx('/api/v1/me', { from: '127.0.0.3', headers: { authorization } });
    assert.equal(right.status, 200, 'the real charity from another address');
  });

  test('a client cannot forge its address with its own X-Forwarded-For', async () => {
    // 127.0.0.2 is over its limit (the test before): claiming to be someone else does not help it...
    const forged = await viaNginx('/api/v1/me', { from: '127.0.0.2', headers: { authorization: stranger('c', 1), 'x-forwarded-for': '10.9.9.9' } });
    assert.equal(forged.status, 429, `127.0.0.2 claiming to be 10.9.9.9: ${forged.text}`);
    // ...and claiming to be 127.0.0.2 does not get another client limited.
    const framed = await viaNginx('/api/v1/me', { from: '127.0.0.3', headers: { authorization: stranger('b', 1), 'x-forwarded-for': '127.0.0.2' } });
    assert.equal(framed.status, 401, `127.0.0.3 claiming to be 127.0.0.2: ${framed.text}`);
  });

  test('behind TRUST_PROXY=true too: a guesser forging a new address with every guess is still limited', async () => {
    // TRUST_PROXY=true believes the leftmost X-Forwarded-For address: safe only because nginx replaces the header.
    const trustAll = await stack('trust-all', 'true');
    const guess = (i: number) => send(trustAll.port, trustAll.ca, '/api/v1/me', { from: '127.0.0.4', headers: { authorization: stranger('d', i), 'x-forwarded-for': `10.9.9.${i}` } });
    const limit = AUTH_FAILURES.perAddress;
    const first = await Promise.all(Array.from({ length: limit }, (_, i) => guess(i)));
    assert.deepEqual(first.map((a) => a.status), Array(limit).fill(401));
    const over = await guess(limit);
    assert.equal(over.status, 429, `guess 31, forging 10.9.9.${limit}: ${over.text}`);
  });

  test(`a body over ${BODY_LIMIT_TEXT} is refused by nginx with Almoner's own 413`, async () => {
    const headers = { authorization, 'content-type': 'application/json' };
    // Almoner's own answer, straight from it (authenticated, or it would be a 401 first).
    const res = await fetch(`${main.almoner.url}/api/v1/donation/create`, { method: 'POST', headers, body: 'x'.repeat(BODY_LIMIT + 1) });
    const direct = { status: res.status, contentType: res.headers.get('content-type'), text: await res.text() };
    assert.deepEqual(direct, { status: 413, contentType: 'application/json; charset=utf-8', text: TOO_LARGE });

    // Almoner's request lines, to see what reached it: from after its own 413 up to a marker request.
    const statuses = () =>
      main.almoner.stdout
        .split('\n')
        .slice(0, -1) // complete lines only
        .map((line) => JSON.parse(line) as { status?: number; route?: string })
        .filter((l) => l.status !== undefined);
    await until('Almoner logs its 413', 5_000, () => statuses().some((l) => l.status === 413));
    const before = statuses().length;
    const exact = await viaNginx('/api/v1/donation/create', { headers, body: donationOfSize(BODY_LIMIT, 'exactly.the.limit@example.org') });
    assert.equal(exact.status, 200, `a body of exactly ${BODY_LIMIT_TEXT} passes both: ${exact.text.slice(0, 200)}`);

    for (const chunked of [false, true]) {
      const what = chunked ? 'chunked' : 'with Content-Length';
      const refused = await viaNginx('/api/v1/donation/create', { headers, body: donationOfSize(BODY_LIMIT + 1, 'over@example.org'), chunked });
      assert.equal(refused.status, 413, what);
      assert.equal(refused.text, direct.text, `${what}: the body`);
      assert.equal(refused.headers['content-type'], direct.contentType, `${what}: the Content-Type`);
      assert.match(String(refused.headers['x-request-id']), /^[0-9a-f]{32}$/, `${what}: nginx's own id, answered by nginx, not by Almoner`);
      assert.equal(refused.headers['cache-control'], 'no-store');
      assert.equal(refused.headers['x-content-type-options'], 'nosniff');
    }
    await viaNginx('/health', { method: 'GET' });
    await until('Almoner logs the marker request', 5_000, () => statuses().slice(before).some((l) => l.route === '/health'));
    assert.deepEqual(statuses().slice(before).map((l) => `${l.route} ${l.status}`), ['/api/v1/donation/create 200', '/health 200'], 'only the create of exactly the limit reached Almoner');
  });

  test('SIGTERM to Almoner while creates flow through nginx loses no acknowledged donation', async (t) => {
    interface Result {
      email: string;
      sentAt: number;
      doneAt: number;
      answer?: Answer;
      error?: string;
    }
    const WORKERS = 8;
    const results: Result[] = [];
    const agent = new Agent({ keepAlive: true, maxSockets: WORKERS, ca: main.ca });
    let stopAt = Infinity;
    let n = 0;
    const worker = async () => {
      while (Date.now() < stopAt) {
        const email = `sigterm-${n++}@example.org`;
        const result: Result = { email, sentAt: Date.now(), doneAt: 0 };
        try {
          result.answer = await viaNginx('/api/v1/donation/create', {
            agent,
            headers: { authorization, 'content-type': 'application/json' },
            body: JSON.stringify(exampleDonation({ donor_email: email })),
          });
        } catch (err) {
          result.error = (err as NodeJS.ErrnoException).code ?? String(err);
        }
        result.doneAt = Date.now();
        results.push(result);
      }
    };
    // Another process's write lock holds the creates under way inside Almoner (it waits for the lock,
    // up to its 4.5 s for the database): at the signal, Almoner provably holds one per worker, and
    // only a drain that waits for them, relayed by nginx, gets them their 200s.
    assert.equal(database?.location.dialect, 'sqlite');
    const outsider = new BetterSqlite3(database.location.path);
    const workers = Array.from({ length: WORKERS }, worker);
    try {
      await until('100 creates acknowledged through nginx', 10_000, () => results.filter((r) => r.answer?.status === 200).length >= 100);
      outsider.exec('begin immediate');
      await new Promise((r) => setTimeout(r, 500)); // every worker's create is waiting for the lock now
      const signalledAt = Date.now();
      main.almoner.signal('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      outsider.exec('commit');
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([main.almoner.exited, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 12_000)))]);
      clearTimeout(timer);
      const exitedAt = Date.now();
      assert.deepEqual(exit, { code: 0, signal: null }, `Almoner's exit after SIGTERM\nstderr: ${main.almoner.stderr}`);
      // Keep sending for a moment after it is gone: nginx must answer, not hang.
      stopAt = Date.now() + 300;
      await Promise.all(workers);

      const held = results.filter((r) => r.sentAt < signalledAt && r.doneAt > signalledAt);
      assert.deepEqual(
        held.map((r) => r.answer?.status ?? r.error),
        Array(WORKERS).fill(200),
        'the creates Almoner held at the signal: a drain finishes them, and nginx relays the answers',
      );
      const ok = results.filter((r) => r.answer?.status === 200);
      const others = results.filter((r) => r.answer?.status !== 200);
      for (const r of others) {
        if (r.answer) {
          assert.ok([502, 503].includes(r.answer.status), `${r.email}: ${r.answer.status} ${r.answer.text}`);
          if (r.answer.status === 502) assert.equal(r.answer.text, BAD_GATEWAY, `${r.email}: nginx's 502 is JSON`);
        }
      }
      assert.ok(others.some((r) => r.answer?.status === 502 && r.sentAt > exitedAt), 'nginx answered 502 once Almoner was gone');

      const exported = await almoner(database.url, ['donations', 'export', '--format', 'jsonl']);
      assert.equal(exported.code, 0, exported.stderr);
      const stored = new Map<string, number[]>();
      for (const line of exported.stdout.split('\n').filter(Boolean)) {
        const row = JSON.parse(line) as { id: number; donor_email: string };
        stored.set(row.donor_email, [...(stored.get(row.donor_email) ?? []), row.id]);
      }
      for (const r of ok) {
        const id = (json(r.answer!).data as { id: number }).id;
        assert.deepEqual(stored.get(r.email), [id], `${r.email} was acknowledged with id ${id}: stored once, with that id`);
      }
      t.diagnostic(
        `${ok.length} acknowledged and stored (${held.length} of them held by Almoner at the signal), ` +
          `${others.filter((r) => r.answer).length} answered ${[...new Set(others.map((r) => r.answer?.status).filter(Boolean))].join('/')}, ` +
          `${others.filter((r) => r.error).length} connection errors, ${others.filter((r) => stored.has(r.email)).length} stored without a 200; ` +
          `Almoner exited ${exitedAt - signalledAt} ms after SIGTERM`,
      );
    } finally {
      stopAt = 0;
      if (outsider.inTransaction) outsider.exec('rollback');
      outsider.close();
      await Promise.all(workers);
      agent.destroy();
    }
  });
});
