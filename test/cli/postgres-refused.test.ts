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
import { queryPostgres, TEST_DATABASE_URL } from '../support/backends.js';
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

/** A server that answers every connection as PostgreSQL does while it starts: FATAL 57P03, `the database system is starting up`, then closes it. */
async function startingUp(): Promise<{ port: number; close: () => Promise<void> }> {
  const field = (type: string, value: string) => Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])]);
  const fields = Buffer.concat([field('S', 'FATAL'), field('V', 'FATAL'), field('C', '57P03'), field('M', 'the database system is starting up'), Buffer.from([0])]);
  const length = Buffer.alloc(4);
  length.writeInt32BE(fields.length + 4);
  const error = Buffer.concat([Buffer.from('E'), length, fields]);
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket.on('close', () => sockets.delete(socket)).on('error', () => {}));
    socket.once('data', () => socket.end(error)); // its startup message
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}

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
