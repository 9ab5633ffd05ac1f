// DATABASE_URL and REDIS_URL as an operator writes them: what is refused is refused at start with
// exit 2 and a message naming the setting and saying what is wrong, showing what was typed without
// its password; what the drivers read (a PostgreSQL Unix socket) is taken. From an operator's review
// (2026-11-29): a malformed REDIS_URL stopped serve with "almoner: Invalid URL" and exit 1, which
// systemd restarts for good; the socket form of DATABASE_URL was refused, blaming percent-encoding;
// messages showed the URL as the parser wrote it again, not as typed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { parse as parsePgConnectionString } from 'pg-connection-string';
import { ConfigError, describeDatabase, loadConfig, parseDatabaseUrl } from '../src/config.js';
import { queryPostgres, tempDir, TEST_DATABASE_URL } from './support/backends.js';
import { almoner, assertBuilt } from './support/cli.js';

/** ioredis's own reading of a URL, as openRedis's `new Redis(url)` makes it. */
const ioredisParseUrl: (url: string) => Record<string, unknown> = createRequire(import.meta.url)('ioredis/built/utils/index.js').parseURL;

/** The message loadConfig refuses `env` with (it must refuse it, with a ConfigError). */
function refusal(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError, `not a ConfigError: ${String(err)}`);
    return err.message;
  }
  assert.fail(`taken: ${JSON.stringify(env)}`);
}

function databaseRefusal(url: string): string {
  try {
    parseDatabaseUrl(url);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `not a ConfigError: ${String(err)}`);
    return err.message;
  }
  assert.fail(`taken: ${JSON.stringify(url)}`);
}

const PERCENT = /must be percent-encoded \(# as %23, % as %25/;
const PORT = /the port must be a whole number from 1 to 65535/;

describe('CREATE_CONCURRENCY_LIMIT', () => {
  test('100 by default, 0 for no limit, a whole number or refused naming it', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).createConcurrencyLimit, 100);
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:', CREATE_CONCURRENCY_LIMIT: '0' }).createConcurrencyLimit, 0);
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:', CREATE_CONCURRENCY_LIMIT: '250' }).createConcurrencyLimit, 250);
    for (const raw of ['-1', '1.5', 'lots', ' 5']) {
      assert.equal(refusal({ CREATE_CONCURRENCY_LIMIT: raw }), `CREATE_CONCURRENCY_LIMIT must be a whole number of requests, 0 for no limit (got ${JSON.stringify(raw)}).`);
    }
  });
});

describe('INSTANCE_REFRESH_MS', () => {
  test('2000 by default, a whole number of milliseconds from 50 to 60000 or refused naming it', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).instanceRefreshMs, 2000);
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:', INSTANCE_REFRESH_MS: '100' }).instanceRefreshMs, 100);
    for (const raw of ['0', '49', '60001', '1.5', 'soon']) {
      assert.equal(refusal({ INSTANCE_REFRESH_MS: raw }), `INSTANCE_REFRESH_MS must be a whole number of milliseconds from 50 to 60000 (got ${JSON.stringify(raw)}).`);
    }
  });
});

describe('REDIS_URL as ioredis reads it', () => {
  // The operator's three, each "almoner: Invalid URL" or "URI malformed" with exit 1 (ioredis threw in openRedis).
  const malformed = [
    { url: 'redis://user:r3dis#SECRET@127.0.0.1:6379', said: PERCENT, shown: 'redis://user:***@127.0.0.1:6379' },
    { url: 'redis://user:pw@127.0.0.1:99999', said: PORT, shown: 'redis://user:***@127.0.0.1:99999' },
    { url: 'redis://user:p%zzSECRET@127.0.0.1:6379', said: PERCENT, shown: 'redis://user:***@127.0.0.1:6379' },
  ];
  for (const { url, said, shown } of malformed) {
    test(`${url.replace(/:[^:@]*@/, ':***@')}: refused naming REDIS_URL, saying why, the password shown as ***`, () => {
      assert.throws(() => ioredisParseUrl(url), 'ioredis itself cannot read it: what this guards against');
      const message = refusal({ REDIS_URL: url });
      assert.match(message, /^REDIS_URL is not a valid Redis URL/);
      assert.match(message, said);
      assert.ok(message.includes(`(got ${JSON.stringify(shown)})`), message);
      assert.doesNotMatch(message, /SECRET|:pw@/);
    });
  }

  for (const [url, said] of [
    ['redis://user:p/SECRET@127.0.0.1:6379', PERCENT],
    ['redis://user:p?SECRET@127.0.0.1:6379', PERCENT],
    ['redis://user:12#SECRET@127.0.0.1:6379', PERCENT], // ioredis reads it (host "user", port 12): a # is never meant
    ['redis://user:SECRET@127.0.0.1:0', PORT],
    ['redis://user:SECRET@127.0.0.1:http', PORT],
    ['redis://user:SECRET@:6379', /there is no host after the @/],
    ['redis://::1:6379', /an IPv6 address is written in brackets: \[::1\]:6379/],
    [' redis://user:SECRET@127.0.0.1:6379', /must look like redis:\/\/host:6379 \(got " redis:\/\/user:\*\*\*@127\.0\.0\.1:6379"\): it begins with a space/],
    ['REDIS://user:SECRET@127.0.0.1:6379', /\(got "REDIS:\/\/user:\*\*\*@127\.0\.0\.1:6379"\): the scheme is written in lower case \(redis:, not REDIS:\)/],
  ] as const) {
    test(`${url.replace(/:[^:@]*@/, ':***@')}: refused, saying why, the password not shown`, () => {
      const message = refusal({ REDIS_URL: url });
      assert.match(message, /^REDIS_URL /);
      assert.match(message, said);
      assert.doesNotMatch(message, /SECRET/);
    });
  }

  for (const url of ['redis://127.0.0.1:6379', 'rediss://user:p%40ss%23w@redis.internal:6380/2', 'redis://:pw@127.0.0.1:6379/0', 'redis://user:p@ss@127.0.0.1:6379', 'redis://[::1]:6379', 'redis://127.0.0.1:6379 ']) {
    test(`${url}: taken as it is, as ioredis reads it`, () => {
      assert.doesNotThrow(() => ioredisParseUrl(url));
      assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:', REDIS_URL: url }).redisUrl, url);
    });
  }
});

describe('DATABASE_URL: a PostgreSQL Unix socket', () => {
  // pg-connection-string reads an empty host after the user with a stand-in host; `postgres:///db?host=…` is a URL as it is.
  for (const url of [
    'postgres://postgres@/review?host=/var/run/postgresql',
    'postgresql://almoner:s3cr3t@/review?host=/var/run/postgresql',
    'postgres:///review?host=/var/run/postgresql&user=postgres',
    'postgres://%2Fvar%2Frun%2Fpostgresql/review?user=postgres',
  ]) {
    test(`${url.replace('s3cr3t', '***')}: taken, as node-postgres reads it (user@/ was refused, blaming percent-encoding)`, () => {
      const read = parsePgConnectionString(url);
      assert.equal(read.host, '/var/run/postgresql');
      assert.equal(read.database, 'review');
      const location = parseDatabaseUrl(url);
      assert.deepEqual(location, { dialect: 'postgres', url, poolMax: 10 });
      assert.equal(describeDatabase(location), url.replace('s3cr3t', '***'));
    });
  }

  test('with its host and port left out but a port: no host, said (postgres://u:pw@:5432/db)', () => {
    const message = databaseRefusal('postgres://almoner:s3cr3t@:5432/review');
    assert.match(message, /there is no host after the @ \(for a Unix socket, .*postgres:\/\/user@\/database\?host=\/var\/run\/postgresql\)/);
    assert.doesNotMatch(message, /s3cr3t|percent-encoded/);
  });

  const server = TEST_DATABASE_URL ? new URL(TEST_DATABASE_URL) : undefined;
  const socketDir = process.env.TEST_PG_SOCKET_DIR || '/var/run/postgresql';
  const socket = join(socketDir, `.s.PGSQL.${server?.port || 5432}`);
  const skip = !server ? 'TEST_DATABASE_URL is not set' : !existsSync(socket) ? `no PostgreSQL socket at ${socket} (set TEST_PG_SOCKET_DIR)` : false;
  test('bin/almoner creates and lists a charity through the socket (postgres://user@/db?host=/var/run/postgresql)', { skip }, async () => {
    assertBuilt();
    const name = `almoner_socket_${process.pid}_${randomBytes(4).toString('hex')}`;
    await queryPostgres(TEST_DATABASE_URL!, `create database ${name}`);
    try {
      const url = `postgres://${server!.username || 'postgres'}@/${name}?host=${socketDir}${server!.port ? `&port=${server!.port}` : ''}`;
      const created = await almoner(url, ['charity', 'create', '--name', 'Socket Charity', '--email', 'socket@charity.example', '--json']);
      assert.equal(created.code, 0, created.stderr);
      const listed = await almoner(url, ['charity', 'list']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /Socket Charity/);
      assert.ok(listed.stderr.includes(`almoner: database ${url}`), listed.stderr);
      // Through the socket, not TCP: PostgreSQL has no client address for a Unix-socket connection.
      const rows = await queryPostgres<{ n: string }>(url, 'select count(*) as n from pg_stat_activity where pid = pg_backend_pid() and client_addr is null');
      assert.equal(Number(rows[0]!.n), 1);
      // A restore too, whose pg_restore is given the socket's folder (it said the URL was none pg_restore could be given).
      const dump = join(tempDir(), 'socket.dump');
      const tcp = new URL(TEST_DATABASE_URL!);
      tcp.pathname = `/${name}`;
      execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, tcp.href]);
      const restored = await almoner(url, ['restore', dump, '--replace']);
      assert.equal(restored.code, 0, restored.stderr);
      assert.match((await almoner(url, ['charity', 'list'])).stdout, /Socket Charity/);
    } finally {
      await queryPostgres(TEST_DATABASE_URL!, `drop database if exists ${name} with (force)`);
    }
  });
});

describe('DATABASE_URL refused: why, and what was typed', () => {
  test('a port out of range is said to be the port (it blamed percent-encoding)', () => {
    for (const url of ['postgres://almoner:s3cr3t@127.0.0.1:99999/almoner', 'postgres://almoner:s3cr3t@127.0.0.1:0/almoner', 'postgresql://127.0.0.1:5432x/almoner']) {
      const message = databaseRefusal(url);
      assert.match(message, /^DATABASE_URL is not a valid PostgreSQL connection string \(got ".*"\): the port must be a whole number from 1 to 65535\.$/);
      assert.doesNotMatch(message, /s3cr3t|percent-encoded/);
    }
    assert.ok(databaseRefusal('postgres://almoner:s3cr3t@127.0.0.1:99999/almoner').includes('(got "postgres://almoner:***@127.0.0.1:99999/almoner")'));
  });

  for (const [url, shown, said] of [
    [' postgres://u:s3cr3t@127.0.0.1/x', ' postgres://u:***@127.0.0.1/x', 'DATABASE_URL begins with a space'],
    ['postgres://u:s3cr3t@127.0.0.1/x ', 'postgres://u:***@127.0.0.1/x ', 'DATABASE_URL ends with a space'], // it was taken, and the database was "x " (does not exist)
    ['\tsqlite:/var/lib/almoner/almoner.db\n', '\tsqlite:/var/lib/almoner/almoner.db\n', 'DATABASE_URL begins with a tab and ends with a line break'],
    ['POSTGRES://u:s3cr3t@127.0.0.1/x', 'POSTGRES://u:***@127.0.0.1/x', 'the scheme is written in lower case (postgres:, not POSTGRES:)'],
    ['Sqlite:/var/lib/almoner/almoner.db', 'Sqlite:/var/lib/almoner/almoner.db', 'the scheme is written in lower case (sqlite:, not Sqlite:)'],
    ['file:/var/lib/almoner/almoner.db', 'file:/var/lib/almoner/almoner.db', 'a SQLite file is given as sqlite:<path>'], // was shown as file:///var/…
    ['postgres://u:s3cr3t@127.0.0.1/my db?sslmode=require#x', 'postgres://u:***@127.0.0.1/my db?sslmode=require#x', 'must be percent-encoded'], // was shown as my%20db
  ] as const) {
    test(`${JSON.stringify(url.replace('s3cr3t', '***'))}: shown as typed, the password hidden, saying: ${said}`, () => {
      const message = databaseRefusal(url);
      assert.ok(message.includes(`(got ${JSON.stringify(shown)})`), message);
      assert.ok(message.includes(said), message);
      assert.doesNotMatch(message, /s3cr3t/);
    });
  }

  test('a password in a query parameter is hidden however its name is written (pass%77ord is password to the driver; it was shown, a review)', () => {
    for (const url of ['postgres://u:p@h/db?pass%77ord=S3CRET&x=1', 'postgres://u:p@h/db?x=1&PASSWORD=S3CRET', 'postgres://u:p@h/db?sslpass%77ord=S3CRET']) {
      const shown = describeDatabase(parseDatabaseUrl(url));
      assert.ok(!shown.includes('S3CRET'), shown);
      assert.match(shown, /=\*\*\*/, shown);
    }
  });

  test('a password in a query parameter is hidden as typed', () => {
    const message = databaseRefusal('POSTGRES://u@127.0.0.1/x?password=s3cr3t&sslpassword=s3cr3t');
    assert.ok(message.includes('(got "POSTGRES://u@127.0.0.1/x?password=***&sslpassword=***")'), message);
  });
});

describe('bin/almoner serve with these settings: exit 2, the setting named, the password not shown', () => {
  let sqliteUrl: string;
  before(() => {
    assertBuilt();
    sqliteUrl = `sqlite:${join(tempDir(), 'almoner.db')}`;
  });

  for (const [name, value, said] of [
    ['REDIS_URL', 'redis://user:r3dis#SECRET@127.0.0.1:6379', 'REDIS_URL is not a valid Redis URL (got "redis://user:***@127.0.0.1:6379"): a user name or password holding'],
    ['REDIS_URL', 'redis://user:SECRET@127.0.0.1:99999', 'REDIS_URL is not a valid Redis URL (got "redis://user:***@127.0.0.1:99999"): the port must be'],
    ['REDIS_URL', 'redis://user:p%zzSECRET@127.0.0.1:6379', 'REDIS_URL is not a valid Redis URL (got "redis://user:***@127.0.0.1:6379"): a user name or password holding'],
    ['DATABASE_URL', 'postgres://almoner:SECRET@127.0.0.1:99999/almoner', 'DATABASE_URL is not a valid PostgreSQL connection string (got "postgres://almoner:***@127.0.0.1:99999/almoner"): the port must be'],
    ['DATABASE_URL', ' postgres://almoner:SECRET@127.0.0.1/almoner', 'DATABASE_URL begins with a space (got " postgres://almoner:***@127.0.0.1/almoner"): remove it.'],
    ['DATABASE_URL', 'postgres://almoner:SECRET@127.0.0.1:1/almoner ', 'DATABASE_URL ends with a space (got "postgres://almoner:***@127.0.0.1:1/almoner "): remove it.'],
  ] as const) {
    test(`${name}=${JSON.stringify(value.replace(/:[^:@]*@/, ':***@'))}`, async () => {
      const r = await almoner(name === 'DATABASE_URL' ? value : sqliteUrl, ['serve'], { PORT: '4531', ...(name === 'REDIS_URL' && { REDIS_URL: value }) });
      assert.equal(r.code, 2, `exit ${r.code}\nstderr: ${r.stderr}`);
      assert.ok(r.stderr.startsWith(`almoner: ${said}`), r.stderr);
      assert.doesNotMatch(r.stderr, /SECRET|\n\s+at /);
    });
  }
});
