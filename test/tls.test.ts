// Native HTTPS: bin/almoner serve with TLS_CERT_FILE and TLS_KEY_FILE, with a certificate the
// test makes for itself. TLS is the same on every backend, so this runs on SQLite only.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { connect as netConnect } from 'node:net';
import { connect, type PeerCertificate } from 'node:tls';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import selfsigned from 'selfsigned';
import { basic } from './support/app.js';
import { SQLITE, tempDir, type TestDatabase } from './support/backends.js';
import { almoner, until } from './support/cli.js';
import { ServerProcess } from './support/server.js';

/** A self-signed certificate for localhost and 127.0.0.1, valid for a day. */
const certificate = (commonName: string) =>
  selfsigned.generate([{ name: 'commonName', value: commonName }], {
    notAfterDate: new Date(Date.now() + 24 * 3600 * 1000),
    keySize: 2048,
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
  });

describe('HTTPS', () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let ca: string;
  let tls: { TLS_CERT_FILE: string; TLS_KEY_FILE: string };

  before(async () => {
    database = await SQLITE.createDatabase();
    const pems = await certificate('localhost');
    const dir = tempDir();
    tls = { TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') };
    writeFileSync(tls.TLS_CERT_FILE, pems.cert);
    writeFileSync(tls.TLS_KEY_FILE, pems.private);
    ca = pems.cert;
    server = new ServerProcess(database.url, tls);
    await server.listening();
  });

  after(async () => {
    await server?.stop('SIGTERM', 10_000).catch(() => server.kill());
    await database?.drop();
  });

  const get = (url: string, options: { ca?: string; authorization?: string; method?: string } = {}) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(url, { method: options.method ?? 'GET', ca: options.ca, headers: options.authorization ? { authorization: options.authorization } : {} }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (s: string) => (body += s));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });

  test('serves the API over HTTPS with the given certificate', async () => {
    assert.match(server.url, /^https:/);
    assert.deepEqual(await get(`${server.url}/health`, { ca }), { status: 200, body: '{"status":"ok"}' });
    const created = await almoner(database.url, ['charity', 'create', '--name', 'Secure', '--email', 'tls@example.org', '--json']);
    const { username, password } = JSON.parse(created.stdout);
    const me = await get(`${server.url}/api/v1/me`, { ca, method: 'POST', authorization: basic(username, password) });
    assert.equal(me.status, 200);
  });

  test('a client that closes its side once its creates are sent (close_notify and FIN) is answered each, then the connection ends; each stored once', async () => {
    // Node's TLS socket ended its own side at the client's close_notify, unanswered, and the creates were stored (a review).
    const created = await almoner(database.url, ['charity', 'create', '--name', 'Half Closed', '--email', 'half@example.org', '--json']);
    const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
    const body = (n: number) => JSON.stringify({ donor_email: `tls-half-${n}@example.org`, gift_aid: 'no', amount: '5.00', donation_type: 'one-time' });
    const create = (n: number) =>
      `POST /api/v1/donation/create HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${basic(username, password)}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body(n))}\r\n\r\n${body(n)}`;
    for (const maxVersion of ['TLSv1.2', 'TLSv1.3'] as const) {
      const first = maxVersion === 'TLSv1.2' ? 0 : 10;
      const port = Number(new URL(server.url).port);
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost', maxVersion }, () => socket.end([1, 2, 3].map((n) => create(first + n)).join('')));
        let got = '';
        socket.setEncoding('utf8').on('data', (s: string) => (got += s));
        socket.on('close', () => resolve(got));
        socket.on('error', reject);
      });
      assert.deepEqual([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [200, 200, 200], `${maxVersion}: ${text}`);
      for (const n of [1, 2, 3]) {
        const exported = await almoner(database.url, ['donor', 'export', '--email', `tls-half-${first + n}@example.org`]);
        assert.equal((JSON.parse(exported.stdout) as { donations: unknown[] }).donations.length, 1, `${maxVersion}: create ${n}`);
      }
    }
  });

  test('a client that does not trust the certificate is refused by TLS itself', async () => {
    await assert.rejects(get(`${server.url}/health`), /self[- ]signed|unable to verify/i);
  });

  test('plain HTTP to the HTTPS port gets a plain 400 saying to use https:// (no answer at all until 2026-11-29), and serves nothing', async () => {
    for (const path of ['/health', '/api/v1/me']) {
      const res = await fetch(server.url.replace('https:', 'http:') + path, { method: path === '/health' ? 'GET' : 'POST' });
      assert.equal(res.status, 400);
      assert.deepEqual(await res.json(), { message: 'This server takes HTTPS only: send the request to https:// rather than http://.' });
    }
    assert.equal((await get(`${server.url}/health`, { ca })).status, 200); // and HTTPS goes on
  });

  test('only one of TLS_CERT_FILE and TLS_KEY_FILE, or an unreadable file, stops serve with exit status 2', async () => {
    const half = await almoner(database.url, ['serve'], { TLS_CERT_FILE: tls.TLS_CERT_FILE, PORT: '0' });
    assert.equal(half.code, 2);
    assert.match(half.stderr, /TLS_CERT_FILE and TLS_KEY_FILE go together/);
    const missing = await almoner(database.url, ['serve'], { TLS_CERT_FILE: '/nonexistent/cert.pem', TLS_KEY_FILE: tls.TLS_KEY_FILE, PORT: '0' });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read TLS_CERT_FILE \(\/nonexistent\/cert\.pem\): ENOENT/);
    // A folder given as the key: Node's EISDIR named neither the setting nor the path.
    const folder = tempDir();
    const dir = await almoner(database.url, ['serve'], { TLS_CERT_FILE: tls.TLS_CERT_FILE, TLS_KEY_FILE: folder, PORT: '0' });
    assert.equal(dir.code, 2);
    assert.ok(dir.stderr.includes(`cannot read TLS_KEY_FILE (${folder}): it is a folder, not a file`), dir.stderr);
  });

  test("a key that is not the certificate's, or the two files swapped, stops serve with exit status 2 naming both (it was OpenSSL's bare error and exit 1)", async () => {
    const other = await certificate('localhost');
    const otherKey = join(tempDir(), 'other-key.pem');
    writeFileSync(otherKey, other.private);
    for (const pair of [{ ...tls, TLS_KEY_FILE: otherKey }, { TLS_CERT_FILE: tls.TLS_KEY_FILE, TLS_KEY_FILE: tls.TLS_CERT_FILE }]) {
      const run = await almoner(database.url, ['serve'], { ...pair, PORT: '0' });
      assert.equal(run.code, 2, run.stderr);
      assert.ok(run.stderr.includes(`TLS_CERT_FILE (${pair.TLS_CERT_FILE}) and TLS_KEY_FILE (${pair.TLS_KEY_FILE}) are not a PEM certificate and its private key`), run.stderr);
    }
  });

  /** The certificate a new TLS connection to the server is shown. */
  const servedCertificate = () =>
    new Promise<PeerCertificate>((resolve, reject) => {
      const { port } = new URL(server.url);
      const socket = connect({ host: '127.0.0.1', port: Number(port), rejectUnauthorized: false }, () => {
        resolve(socket.getPeerCertificate());
        socket.end();
      });
      socket.on('error', reject);
    });

  test('SIGHUP serves a renewed certificate to new connections without dropping open ones; an unreadable one keeps the old', async () => {
    const before = await servedCertificate();
    assert.equal(before.subject.CN, 'localhost');
    // An open keep-alive connection, made with the old certificate.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const viaAgent = () =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const req = request(`${server.url}/health`, { agent, ca }, (res) => {
          res.resume().on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
        });
        req.on('error', reject);
        req.end();
      });
    assert.equal((await viaAgent()).status, 200);

    const renewed = await certificate('renewed.localhost');
    writeFileSync(tls.TLS_CERT_FILE, renewed.cert);
    writeFileSync(tls.TLS_KEY_FILE, renewed.private);
    server.signal('SIGHUP');
    await until('the server says it reloaded the certificate', 5000, () => /TLS certificate reloaded/.test(server.stdout));
    assert.equal((await servedCertificate()).subject.CN, 'renewed.localhost');
    assert.deepEqual(await viaAgent(), { status: 200, reused: true }); // the open connection was kept, and still answers
    agent.destroy();

    writeFileSync(tls.TLS_KEY_FILE, 'not a key');
    server.signal('SIGHUP');
    await until('the server says it kept the certificate', 5000, () => /TLS certificate not reloaded/.test(server.stdout));
    assert.match(server.stdout, /"type":"ConfigError".*TLS certificate not reloaded/); // it said "type":"Object" before 2026-11-28
    assert.equal((await servedCertificate()).subject.CN, 'renewed.localhost');
    assert.deepEqual(await get(`${server.url}/health`, { ca: renewed.cert }), { status: 200, body: '{"status":"ok"}' });

    // A certificate and a key that do not match (a renewal half copied): kept, too.
    const other = await certificate('other.localhost');
    writeFileSync(tls.TLS_CERT_FILE, other.cert);
    writeFileSync(tls.TLS_KEY_FILE, renewed.private);
    const refusals = () => server.stdout.match(/TLS certificate not reloaded/g)?.length ?? 0;
    server.signal('SIGHUP');
    await until('the server says it kept the certificate again', 5000, () => refusals() === 2);
    assert.equal((await servedCertificate()).subject.CN, 'renewed.localhost');
    writeFileSync(tls.TLS_CERT_FILE, renewed.cert);
  });

  // systemd's ExecReload may send SIGHUP as the service starts: until 2026-11-30 Node's default action ended it (exit 129; under
  // WORKERS exit 1, and at some moments with nothing said), as the handler came only once the server was built (a review).
  // Under WORKERS the test fails on that code (the primary passed the signal to workers still starting); one process on
  // SQLite is built too soon after its handler comes for the test to tell (on PostgreSQL the database's opening was the window).
  for (const workers of ['1', '2']) {
    test(`WORKERS=${workers}: SIGHUPs while the server starts do not stop it, and it serves the certificate of the files`, async () => {
      const starting = new ServerProcess(database.url, { ...tls, WORKERS: workers });
      try {
        // From the moment the process handles SIGHUP (before that, Node itself is starting and runs none of bin/almoner: its
        // default action ends it, which no program can change), every 50 ms until it listens.
        const handlesHangup = () => {
          const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${starting.pid}/status`, 'utf8'))?.[1];
          return caught !== undefined && (BigInt(`0x${caught}`) & 1n) === 1n; // bit 0: signal 1, SIGHUP
        };
        await until('the process handles SIGHUP', 10_000, handlesHangup);
        for (let i = 0; i < 20 && !/Server listening at/.test(starting.stdout); i++) {
          starting.signal('SIGHUP');
          await new Promise((r) => setTimeout(r, 50));
        }
        await starting.listening();
        await until('every worker listens', 10_000, () => starting.logLines().filter((l) => l.includes('Server listening at')).length >= Number(workers));
        starting.signal('SIGHUP');
        // The files' certificate, whichever an earlier test left there.
        assert.deepEqual(await get(`${starting.url}/health`, { ca: readFileSync(tls.TLS_CERT_FILE, 'utf8') }), { status: 200, body: '{"status":"ok"}' });
        const exit = await starting.stop('SIGTERM', 15_000);
        assert.deepEqual(exit, { code: 0, signal: null }, starting.stdout.slice(-1000) + starting.stderr);
      } finally {
        starting.kill();
      }
    });
  }

  test('an expired certificate is served, and said at start (nothing said so until 2026-11-30: a review)', async () => {
    const expired = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
      notBeforeDate: new Date(Date.now() - 10 * 24 * 3600 * 1000),
      notAfterDate: new Date(Date.now() - 24 * 3600 * 1000),
      keySize: 2048,
    });
    const dir = tempDir();
    const files = { TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') };
    writeFileSync(files.TLS_CERT_FILE, expired.cert);
    writeFileSync(files.TLS_KEY_FILE, expired.private);
    const old = new ServerProcess(database.url, files);
    try {
      await old.listening();
      await until('the warning', 5_000, () => /the TLS certificate expired on \d{4}-\d{2}-\d{2}T[^:]+:\d{2}:\d{2}\.\d{3}Z: clients refuse it; renew it, then send SIGHUP/.test(old.stdout), () => old.stdout);
      assert.equal((await old.stop('SIGTERM', 10_000)).code, 0);
    } finally {
      old.kill();
    }
  });

  for (const workers of ['1', '2']) {
    test(`WORKERS=${workers}: a certificate within 14 days of its end is said at start and at a reload, and /metrics gives its end (nothing did until 2026-11-30)`, async () => {
      const days = (n: number) => new Date(Date.now() + n * 24 * 3600 * 1000);
      const make = (notAfterDate: Date) =>
        selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
          notAfterDate,
          keySize: 2048,
          extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
        });
      const endOf = (pem: string) => new X509Certificate(pem).validTo;
      const soon = await make(days(5.5));
      const dir = tempDir();
      const files = { TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') };
      writeFileSync(files.TLS_CERT_FILE, soon.cert);
      writeFileSync(files.TLS_KEY_FILE, soon.private);
      const running = new ServerProcess(database.url, { ...files, WORKERS: workers });
      try {
        await running.listening();
        await until('every worker listens', 10_000, () => running.logLines().filter((l) => l.includes('Server listening at')).length >= Number(workers));
        const warning = /the TLS certificate expires on (\S+), in 5 days: renew it, then send SIGHUP/;
        await until('the warning', 5_000, () => warning.test(running.stdout), () => running.stdout);
        assert.equal(new Date(warning.exec(running.stdout)![1]!.replace(/,$/, '')).getTime(), new Date(endOf(soon.cert)).getTime());
        const expiry = async (ca: string) => {
          const { status, body } = await get(`${running.url}/metrics`, { ca });
          assert.equal(status, 200);
          const m = /^almoner_tls_certificate_expiry_timestamp_seconds (\S+)$/m.exec(body);
          assert.ok(m, 'the metric is there');
          return Number(m[1]) * 1000;
        };
        assert.equal(await expiry(soon.cert), new Date(endOf(soon.cert)).getTime()); // one worker's, not the sum of two

        // Renewed: the metric follows, and nothing more is said.
        const renewed = await make(days(90));
        writeFileSync(files.TLS_CERT_FILE, renewed.cert);
        writeFileSync(files.TLS_KEY_FILE, renewed.private);
        running.signal('SIGHUP');
        const reloads = () => running.stdout.match(/TLS certificate reloaded/g)?.length ?? 0;
        await until('every worker reloaded', 5_000, () => reloads() >= Number(workers));
        assert.equal(await expiry(renewed.cert), new Date(endOf(renewed.cert)).getTime());
        assert.equal(running.stdout.match(/the TLS certificate expires on/g)?.length, Number(workers), 'said once a worker, at start only');
        assert.deepEqual(await running.stop('SIGTERM', 15_000), { code: 0, signal: null });
      } finally {
        running.kill();
      }
    });
  }

  // Last: it stops the server.
  test('a connection still in its TLS handshake, or idle after it, does not hold SIGTERM up: exit 0 at once', async () => {
    const { port } = new URL(server.url);
    const inHandshake = netConnect(Number(port), '127.0.0.1');
    const idle = connect({ port: Number(port), host: '127.0.0.1', rejectUnauthorized: false }); // the certificate is not what this is about
    for (const s of [inHandshake, idle]) s.on('error', () => {});
    await new Promise((resolve) => idle.once('secureConnect', resolve));
    const started = Date.now();
    const exit = await server.stop('SIGTERM', 11_000);
    assert.deepEqual(exit, { code: 0, signal: null }, server.stdout.slice(-500));
    assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms to stop`);
    for (const s of [inHandshake, idle]) s.destroy();
  });
});
