// The server's open-files limit reached: client connections hold every file descriptor, so the
// PostgreSQL pool cannot open a socket (EMFILE). A create then gets the 503 of a database it cannot
// reach (nothing was sent), never a 500, and is stored once the connections close.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { ServerProcess } from '../support/server.js';

const LIMIT = 64;
const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');

function prlimitMissing(): string | undefined {
  try {
    execFileSync('prlimit', ['--version'], { stdio: 'pipe' });
    return undefined;
  } catch {
    return 'prlimit (util-linux) is not installed';
  }
}

/** Raw connections to the server: those it accepted and kept open once `ms` have passed. */
async function holdConnections(port: number, count: number, ms: number): Promise<net.Socket[]> {
  const sockets = Array.from({ length: count }, () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    return s;
  });
  await new Promise((r) => setTimeout(r, ms));
  return sockets.filter((s) => !s.destroyed && !s.readableEnded);
}

/** `request` written on an open connection; its status, head and body once the body is all in. */
function answerOn(socket: net.Socket, request: string, what: string): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    let got = '';
    const timer = setTimeout(() => reject(new Error(`no answer to ${what} within 10 s: ${JSON.stringify(got.slice(0, 300))}`)), 10_000);
    socket.on('data', (d) => {
      got += d;
      const [head, rest] = got.split('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(head ?? '');
      if (rest !== undefined && length && Buffer.byteLength(rest) >= Number(length[1])) {
        clearTimeout(timer);
        resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(head!)![1]), head: head!, body: rest });
      }
    });
    socket.write(request);
  });
}

/** One create written on an open connection; its status line and body. */
function createOn(socket: net.Socket, authorization: string, key: string): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ donor_email: 'fd@example.org', gift_aid: 'no', amount: '1.00', donation_type: 'one-time' });
  return answerOn(
    socket,
    `POST /api/v1/donation/create HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\n` +
      `Idempotency-Key: ${key}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    `create ${key}`,
  );
}

describe('out of file descriptors [postgres]', { skip: !POSTGRES ? 'TEST_DATABASE_URL is not set' : prlimitMissing() }, () => {
  let database: TestDatabase | undefined;
  let server: ServerProcess | undefined;

  before(async () => {
    assertBuilt();
    database = await POSTGRES!.createDatabase();
  });

  after(async () => {
    await server?.stop('SIGTERM', 15_000).catch(() => {});
    await database?.drop();
  });

  test('a create whose pool cannot open a socket (EMFILE) is a 503, and is stored once connections close', async () => {
    const made = await almoner(database!.url, ['charity', 'create', '--name', 'Fds', '--email', 'fds@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { username, password } = JSON.parse(made.stdout) as { username: string; password: string };
    const authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    // CREATE_RATE_LIMIT off: the creates below come at once.
    server = await new ServerProcess(database!.url, { CREATE_RATE_LIMIT: '0' }).listening();
    // Node raised its soft limit to the hard one as it started: lowered now, below what the connections will need.
    execFileSync('prlimit', ['--pid', String(server.pid), `--nofile=${LIMIT}:${LIMIT}`]);
    const port = Number(new URL(server.url).port);

    const held = await holdConnections(port, LIMIT + 30, 1500);
    assert.ok(held.length >= 20 && held.length < LIMIT, `connections the server kept: ${held.length}`);
    const answers = await Promise.all(held.map((s, i) => createOn(s, authorization, `fd-${i}`)));
    const statuses = answers.map((a) => a.status);
    assert.ok(!statuses.includes(500), `a create got a 500: ${JSON.stringify(answers.filter((a) => a.status === 500))}`);
    assert.ok(statuses.includes(503), `the pool had sockets to spare (statuses ${statuses.join(' ')}): the test proves nothing`);
    for (const a of answers.filter((x) => x.status === 503)) assert.deepEqual(JSON.parse(a.body), { message: 'The database is unavailable. Please try again shortly.' });
    for (const s of held) s.destroy();
    await new Promise((r) => setTimeout(r, 500));

    // Recovered by itself: each key sent again is stored once (a 200 before is answered with its donation).
    const first = new Map(answers.map((a, i) => [i, a]));
    for (let i = 0; i < held.length; i++) {
      const res = await fetch(`${server.url}/api/v1/donation/create`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json', 'idempotency-key': `fd-${i}` },
        body: JSON.stringify({ donor_email: 'fd@example.org', gift_aid: 'no', amount: '1.00', donation_type: 'one-time' }),
      });
      assert.equal(res.status, 200, `create fd-${i} sent again: ${res.status}`);
      const { data } = (await res.json()) as { data: { id: number } };
      const before = first.get(i)!;
      if (before.status === 200) assert.equal(data.id, (JSON.parse(before.body) as { data: { id: number } }).data.id);
    }
  });
});

describe('out of file descriptors: the docs page', { skip: prlimitMissing() }, () => {
  let database: TestDatabase | undefined;
  let server: ServerProcess | undefined;

  before(async () => {
    assertBuilt();
    database = await BACKENDS.find((b) => b.name === 'sqlite')!.createDatabase();
  });

  after(async () => {
    await server?.stop('SIGTERM', 15_000).catch(() => {});
    await database?.drop();
  });

  test("a docs file that cannot be opened (EMFILE) is a 503 saying the server is busy, not the database's, and is served once connections close", async () => {
    server = await new ServerProcess(database!.url).listening();
    execFileSync('prlimit', ['--pid', String(server.pid), `--nofile=${LIMIT}:${LIMIT}`]);
    const port = Number(new URL(server.url).port);

    const held = await holdConnections(port, LIMIT + 30, 1500);
    assert.ok(held.length >= 20 && held.length < LIMIT, `connections the server kept: ${held.length}`);
    const answer = await answerOn(held[0]!, 'GET /docs/swagger-ui.css HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /docs/swagger-ui.css'); // read from disk on first use: no descriptor left for it
    assert.equal(answer.status, 503, answer.head);
    assert.match(answer.head, /^retry-after: 1$/im);
    assert.deepEqual(JSON.parse(answer.body), { message: 'The server is busy. Please try again shortly.' });
    for (const s of held) s.destroy();
    await new Promise((r) => setTimeout(r, 500));

    const res = await fetch(`${server.url}/docs/swagger-ui.css`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/css/);
    await server.stop('SIGTERM', 15_000);
    assert.match(server.stdout, /out of file descriptors: a docs page file could not be opened/);
    assert.doesNotMatch(server.stdout, /database unavailable/);
  });
});
