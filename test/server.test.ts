// bin/almoner serve: the real server process, as an operator starts it, on a fresh SQLite file.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { basic, exampleDonation, tempDir } from './support/app.js';

const BIN = fileURLToPath(new URL('../bin/almoner', import.meta.url));
const DIST_MAIN = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

let dir: string;
let databaseUrl: string;

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // the child is not a test file
  delete env.PORT;
  delete env.LOG_LEVEL;
  return { ...env, DATABASE_URL: databaseUrl, HOST: '127.0.0.1', ...extra };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function almoner(args: string[], extra: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(BIN, args, { env: childEnv(extra), timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

async function until(what: string, ms: number, done: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A running `bin/almoner serve`, with everything it has written so far. */
class Server {
  stdout = '';
  stderr = '';
  url = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitedYet = false;
  private readonly child: ChildProcess;

  constructor(env: Record<string, string>) {
    this.child = spawn(BIN, ['serve'], { env: childEnv({ PORT: '0', ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (s: string) => (this.stdout += s));
    this.child.stderr!.setEncoding('utf8').on('data', (s: string) => (this.stderr += s));
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.exitedYet = true;
        resolve({ code, signal });
      }),
    );
  }

  /** Waits for Fastify's "Server listening at http://127.0.0.1:NNNN" log line. */
  async listening(): Promise<this> {
    await until('the server says where it listens', 10_000, () => {
      if (this.exitedYet) assert.fail(`the server exited early\nstdout: ${this.stdout}\nstderr: ${this.stderr}`);
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(this.stdout);
      if (m) this.url = m[1]!;
      return m !== null;
    });
    return this;
  }

  logLines(): string[] {
    return this.stdout.split('\n').filter((line) => line !== '');
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Sends the signal and waits (at most `ms`) for the process to exit. */
  async stop(signal: NodeJS.Signals, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.signal(signal);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the server did not exit within ${ms / 1000} s of ${signal}`)), ms);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): void {
    if (!this.exitedYet) this.child.kill('SIGKILL');
  }
}

async function post(server: Server, path: string, init: { authorization?: string; body?: string; contentType?: string } = {}) {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (init.authorization) headers.authorization = init.authorization;
  if (init.body !== undefined) headers['content-type'] = init.contentType ?? 'application/json';
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers, body: init.body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function meStatus(server: Server, username: string, password: string): Promise<number> {
  return (await post(server, '/api/v1/me', { authorization: basic(username, password) })).status;
}

async function eventuallyMe(server: Server, username: string, password: string, status: number): Promise<void> {
  // The spec gives a running server 5 seconds to honour a CLI change.
  await until(`POST /me as ${username} answers ${status}`, 5_000, async () => (await meStatus(server, username, password)) === status);
}

/** Everything sent that must never reach a log: credentials and the donor's personal data. */
const secrets = new Set<string>();

const DONOR = {
  donor_first_name: 'Philomena',
  donor_last_name: 'Quackenbush-Ortega',
  donor_email: 'philomena.quackenbush@donor.example',
  donor_phone: '07700 900999',
  donor_address: '77 Secret Garden Row',
};
for (const value of Object.values(DONOR)) secrets.add(value);

function addCredentials(username: string, password: string): void {
  const header = basic(username, password);
  secrets.add(password).add(header).add(header.slice('Basic '.length));
}

/** Sends a donation (a good one, a 422 and a malformed one) with these credentials: all carry donor data. */
async function sendDonorData(server: Server, username: string, password: string): Promise<void> {
  const authorization = basic(username, password);
  const ok = await post(server, '/api/v1/donation/create', { authorization, body: JSON.stringify(exampleDonation(DONOR)) });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  const invalid = await post(server, '/api/v1/donation/create', { authorization, body: JSON.stringify(exampleDonation({ ...DONOR, amount: 'lots' })) });
  assert.equal(invalid.status, 422);
  const malformed = await post(server, '/api/v1/donation/create', { authorization, body: `{"donor_email": "${DONOR.donor_email}", "donor_first_name": "${DONOR.donor_first_name}",` });
  assert.equal(malformed.status, 400);
  const form = await post(server, '/api/v1/donation/create', {
    authorization,
    body: new URLSearchParams({ ...DONOR, gift_aid: 'maybe' }).toString(),
    contentType: 'application/x-www-form-urlencoded',
  });
  assert.equal(form.status, 422);
  // A wrong password for a real username, in the header, must not be logged either.
  const wrong = basic(username, 'not-the-password-Z9x8c7v6');
  secrets.add('not-the-password-Z9x8c7v6').add(wrong);
  assert.equal((await post(server, '/api/v1/me', { authorization: wrong })).status, 401);
}

function assertCleanLogs(server: Server, linesBefore: number): void {
  const lines = server.logLines();
  assert.ok(lines.length > linesBefore, 'the requests were logged (otherwise checking the logs proves nothing)');
  for (const line of lines) {
    let entry: unknown;
    assert.doesNotThrow(() => (entry = JSON.parse(line)), `not a JSON line on stdout: ${line}`);
    assert.ok(entry !== null && typeof entry === 'object' && !Array.isArray(entry), `not a JSON object: ${line}`);
    const e = entry as Record<string, unknown>;
    assert.equal(typeof e.level, 'number', `no level in ${line}`);
    assert.equal(typeof e.time, 'number', `no time in ${line}`);
  }
  for (const secret of secrets) {
    assert.ok(!server.stdout.includes(secret), `stdout logs contain ${JSON.stringify(secret)}`);
    assert.ok(!server.stderr.includes(secret), `stderr contains ${JSON.stringify(secret)}`);
  }
  assert.ok(!/authorization/i.test(server.stdout), 'the logs mention an Authorization header');
}

before(() => {
  assert.ok(existsSync(DIST_MAIN), 'dist/ is missing: run `npm run build` before these tests');
  dir = tempDir();
  databaseUrl = `sqlite:${join(dir, 'almoner.db')}`;
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('bin/almoner serve on an empty database', () => {
  let server: Server;
  let username = '';
  let password = '';

  before(async () => {
    server = await new Server({}).listening(); // LOG_LEVEL unset: the default an operator gets
  });
  after(() => server?.kill());

  test('prints on stderr how to create the first charity', async () => {
    await until('the first-charity hint on stderr', 5_000, () => server.stderr.includes('charity create'));
    assert.match(server.stderr, /bin\/almoner charity create --name .+ --email \S+/);
  });

  test('POST /api/v1/me without credentials is a 401 JSON answer', async () => {
    const res = await fetch(`${server.url}/api/v1/me`, { method: 'POST', headers: { accept: 'application/json' } });
    assert.equal(res.status, 401);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.match(res.headers.get('www-authenticate') ?? '', /^Basic /);
    assert.deepEqual(await res.json(), { message: 'Unauthorized' });
  });

  test('a charity created with the CLI while it runs can authenticate and record a donation', async () => {
    const r = await almoner(['charity', 'create', '--name', 'Live Charity', '--email', 'live@charity.example', '--json']);
    assert.equal(r.code, 0, r.stderr);
    ({ username, password } = JSON.parse(r.stdout) as { username: string; password: string });
    addCredentials(username, password);
    const me = await post(server, '/api/v1/me', { authorization: basic(username, password) });
    assert.equal(me.status, 200);
    assert.deepEqual(me.body, { success: true, message: 'Authenticated', data: { name: 'Live Charity', email: 'live@charity.example' } });
    const linesBefore = server.logLines().length;
    await sendDonorData(server, username, password);
    assertCleanLogs(server, linesBefore);
  });

  test('honours disable, enable and rotate within 5 s', async () => {
    assert.ok(username, 'needs the charity from the test before');
    assert.equal((await almoner(['charity', 'disable', username])).code, 0);
    await eventuallyMe(server, username, password, 401);
    assert.equal((await almoner(['charity', 'enable', username])).code, 0);
    await eventuallyMe(server, username, password, 200);
    const rotated = await almoner(['charity', 'rotate', username, '--json']);
    assert.equal(rotated.code, 0, rotated.stderr);
    const fresh = (JSON.parse(rotated.stdout) as { password: string }).password;
    addCredentials(username, fresh);
    await eventuallyMe(server, username, password, 401);
    await eventuallyMe(server, username, fresh, 200);
    password = fresh;
  });

  test('stdout is JSON log lines without credentials or donor data', () => {
    assertCleanLogs(server, 1);
  });

  test('SIGTERM stops it with exit status 0 within 10 s', async () => {
    const { code, signal } = await server.stop('SIGTERM', 10_000);
    assert.equal(signal, null, 'the process handled the signal rather than being killed by it');
    assert.equal(code, 0, `stderr: ${server.stderr}`);
    assertCleanLogs(server, 1); // including whatever it wrote while shutting down
  });
});

describe('bin/almoner serve on a database that has a charity', () => {
  test('gives no first-charity hint, keeps trace-level logs clean, and stops on SIGINT with 0', async () => {
    const r = await almoner(['charity', 'create', '--name', 'Second Run', '--email', 'second@run.example', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const { username, password } = JSON.parse(r.stdout) as { username: string; password: string };
    addCredentials(username, password);

    const server = await new Server({ LOG_LEVEL: 'trace' }).listening();
    try {
      const linesBefore = server.logLines().length;
      assert.equal((await post(server, '/api/v1/me', { authorization: basic(username, password) })).status, 200);
      await sendDonorData(server, username, password);
      const { code, signal } = await server.stop('SIGINT', 10_000);
      assert.equal(signal, null);
      assert.equal(code, 0, `stderr: ${server.stderr}`);
      assert.ok(!server.stderr.includes('charity create'), `a hint on a database with charities:\n${server.stderr}`);
      assertCleanLogs(server, linesBefore);
    } finally {
      server.kill();
    }
  });
});

describe('bin/almoner serve with bad settings', { concurrency: true }, () => {
  for (const [name, value] of [
    ['PORT', '65536'],
    ['PORT', 'http'],
    ['LOG_LEVEL', 'loud'],
  ] as const) {
    test(`${name}=${value}: exit 2 with a message naming ${name}`, async () => {
      const r = await almoner(['serve'], { [name]: value });
      assert.equal(r.code, 2, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
      assert.ok(r.stderr.includes(name), `stderr does not name ${name}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    });
  }
});
