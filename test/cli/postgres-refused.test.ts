// A PostgreSQL DATABASE_URL naming a database that does not exist (3D000), or a user the server does
// not know (28000; a wrong password, 28P01, goes the same way: the shared test server trusts every
// local connection, so it is not asked here), is a setting a restart cannot mend: exit 2, which
// systemd's Restart=on-failure does not restart (deploy/almoner.service, RestartPreventExitStatus=2).
// It was exit 1, and the service was restarted every 2 s for as long as nobody looked (a review of
// 2026-12-02). A database that is only away for now (nothing listening; PostgreSQL starting up,
// 57P03) stays exit 1, restarted until it answers.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { BACKENDS, queryPostgres, TEST_DATABASE_URL } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const PASSWORD = 'pw-s3cr3t-never-shown';

/** TEST_DATABASE_URL with another database or user, and a password. */
function urlWith({ database, user }: { database?: string; user?: string }): string {
  const url = new URL(TEST_DATABASE_URL!);
  if (database) url.pathname = `/${database}`;
  if (user) url.username = user;
  url.password = PASSWORD;
  return url.href;
}

/** What each is run as: `serve` alone and under WORKERS (its worker opens the database), a command that reads and one that may make the tables. */
const RUNS: Array<{ what: string; args: string[]; env?: Record<string, string> }> = [
  { what: 'serve', args: ['serve'], env: { PORT: '0' } },
  { what: 'serve with WORKERS=2', args: ['serve'], env: { PORT: '0', WORKERS: '2' } },
  { what: 'charity list', args: ['charity', 'list'] },
  { what: 'charity create', args: ['charity', 'create', '--name', 'Nowhere', '--email', 'n@example.org'] },
];

const missingDatabase = `almoner_test_missing_${process.pid}`;
const missingUser = `almoner_test_nobody_${process.pid}`;

for (const { refused, url, names, state } of [
  { refused: 'a database that does not exist', url: () => urlWith({ database: missingDatabase }), names: `database "${missingDatabase}" does not exist`, state: '3D000' },
  { refused: 'a user PostgreSQL does not know', url: () => urlWith({ user: missingUser }), names: `role "${missingUser}" does not exist`, state: '28000' },
]) {
  test(`PostgreSQL: DATABASE_URL naming ${refused} (${state}) is exit 2, said with its name and not the password, for serve and the commands (it was exit 1, restarted every 2 s)`, { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL', timeout: 90_000 }, async () => {
    assertBuilt();
    for (const run of RUNS) {
      const r = await almoner(url(), run.args, run.env);
      assert.equal(r.code, 2, `${run.what}: exit ${r.code}\nstderr: ${r.stderr}`);
      assert.ok(r.stderr.includes(`PostgreSQL refuses the connection: ${names} (${state})`), `${run.what}: ${r.stderr}`);
      assert.match(r.stderr, /a restart will not mend it/, run.what);
      assert.doesNotMatch(r.stderr, new RegExp(PASSWORD), `${run.what}: the password shown`);
    }
    assert.deepEqual(await queryPostgres(TEST_DATABASE_URL!, 'select datname from pg_database where datname = $1', [missingDatabase]), [], 'no database made');
  });
}

test('PostgreSQL: DATABASE_URL naming a user without CONNECT on the database (42501, FATAL) is exit 2 too, for serve and the commands (it was exit 1)', { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL', timeout: 90_000 }, async () => {
  assertBuilt();
  const database = await BACKENDS.find((b) => b.name === 'postgres')!.createDatabase();
  const role = `almoner_test_noconnect_${process.pid}`;
  const name = new URL(database.url).pathname.slice(1);
  try {
    await queryPostgres(database.url, `create role ${role} login`);
    await queryPostgres(database.url, `revoke connect on database ${name} from public`);
    const url = new URL(database.url);
    url.username = role;
    url.password = PASSWORD;
    for (const run of RUNS) {
      const r = await almoner(url.href, run.args, run.env);
      assert.equal(r.code, 2, `${run.what}: exit ${r.code}\nstderr: ${r.stderr}`);
      assert.ok(r.stderr.includes(`PostgreSQL refuses the connection: permission denied for database "${name}" (42501)`), `${run.what}: ${r.stderr}`);
      assert.match(r.stderr, /grant connect on database/, run.what);
      assert.doesNotMatch(r.stderr, new RegExp(PASSWORD), `${run.what}: the password shown`);
    }
  } finally {
    await database.drop();
    await queryPostgres(TEST_DATABASE_URL!, `drop role if exists ${role}`);
  }
});

/** A stand-in for PostgreSQL on a port of its own: `answer` is given each message a connection sends (its startup message first, numbered 0); `open()` says how many connections are open. */
async function fakePostgres(answer: (socket: Socket, n: number) => void): Promise<{ port: number; open: () => number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket.on('close', () => sockets.delete(socket)).on('error', () => {}));
    socket.unref(); // a connection left open fails the test, not keeps its file running
    let n = 0;
    socket.on('data', () => answer(socket, n++));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    open: () => sockets.size,
    close: () => new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}

/** A backend message: its type, its length, its body. */
function message(type: string, body: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length + 4);
  return Buffer.concat([Buffer.from(type), length, body]);
}

/** A server that answers every connection as PostgreSQL does while it starts: FATAL 57P03, `the database system is starting up`, then closes it. */
function startingUp(): ReturnType<typeof fakePostgres> {
  const field = (type: string, value: string) => Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])]);
  const fields = Buffer.concat([field('S', 'FATAL'), field('V', 'FATAL'), field('C', '57P03'), field('M', 'the database system is starting up'), Buffer.from([0])]);
  return fakePostgres((socket, n) => n === 0 && socket.end(message('E', fields))); // at its startup message
}

/**
 * A server that asks for a password by SCRAM, as PostgreSQL with scram-sha-256 in pg_hba.conf does,
 * and then waits for the rest of the handshake, as PostgreSQL does until its authentication_timeout.
 */
function askingForPassword(): ReturnType<typeof fakePostgres> {
  const code = (n: number) => Buffer.from([0, 0, 0, n]);
  return fakePostgres((socket, n) => {
    if (n === 0) socket.write(message('R', Buffer.concat([code(10), Buffer.from('SCRAM-SHA-256\0\0')]))); // AuthenticationSASL
    if (n === 1) socket.write(message('R', Buffer.concat([code(11), Buffer.from('r=client-nonce-server-nonce,s=c2FsdA==,i=4096')]))); // its server-first-message
  });
}

test('PostgreSQL asking for a password DATABASE_URL does not give: exit 2 at once, saying so, the connection closed (it waited for the server to end the handshake, a minute, and said only node-postgres\'s "client password must be a string")', { timeout: 60_000 }, async () => {
  assertBuilt();
  const server = await askingForPassword();
  try {
    for (const run of RUNS.slice(0, 3)) {
      const r = await almoner(`postgres://almoner@127.0.0.1:${server.port}/almoner`, run.args, { ...run.env, PGPASSWORD: undefined });
      assert.equal(r.code, 2, `${run.what}: exit ${r.code}\nstderr: ${r.stderr}`);
      assert.match(r.stderr, /PostgreSQL asks for a password, and DATABASE_URL gives none/, run.what);
      assert.equal(server.open(), 0, `${run.what}: its connection left open`);
    }
  } finally {
    await server.close();
  }
});

test('PostgreSQL away for now (nothing listening; starting up, 57P03): still exit 1, for systemd to restart', { timeout: 60_000 }, async () => {
  assertBuilt();
  const starting = await startingUp();
  try {
    for (const [away, url, said] of [
      ['nothing listening', `postgres://almoner:${PASSWORD}@127.0.0.1:1/almoner`, /ECONNREFUSED/],
      ['starting up', `postgres://almoner:${PASSWORD}@127.0.0.1:${starting.port}/almoner`, /the database system is starting up/],
    ] as const) {
      for (const run of RUNS.slice(0, 3)) {
        const r = await almoner(url, run.args, run.env);
        assert.equal(r.code, 1, `${away}, ${run.what}: exit ${r.code}\nstderr: ${r.stderr}`);
        assert.match(r.stderr, said, `${away}, ${run.what}`);
        assert.doesNotMatch(r.stderr, /refuses the connection|restart will not mend/, `${away}, ${run.what}`);
      }
    }
  } finally {
    await starting.close();
  }
});
