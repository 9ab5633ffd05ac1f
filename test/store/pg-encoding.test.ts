// A server's PostgreSQL database must hold any donor's name: one in LATIN1 (or another single-byte
// encoding) cannot store a Łukasz, and every such create was a 500 whose log line quoted the name's
// bytes; a username so written was a 500 before it was judged, which the throttle never counted (a
// security review, 2026-11-30). So `serve` refuses such a database, with the fix, before it makes a
// table there; the commands that take data out still open it.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseDatabaseUrl } from '../../src/config.js';
import { openServerStore, openStore } from '../../src/store/open.js';
import { queryPostgres, tempDir, TEST_DATABASE_URL } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

describe('a PostgreSQL database not in UTF-8', { skip: !TEST_DATABASE_URL && 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  const made: string[] = [];
  const database = async (encoding: string): Promise<string> => {
    const name = `almoner_test_${process.pid}_${randomBytes(4).toString('hex')}`;
    await queryPostgres(TEST_DATABASE_URL!, `create database ${name} encoding '${encoding}' template template0 lc_collate 'C' lc_ctype 'C'`);
    made.push(name);
    const url = new URL(TEST_DATABASE_URL!);
    url.pathname = `/${name}`;
    return url.href;
  };
  after(async () => {
    for (const name of made) await queryPostgres(TEST_DATABASE_URL!, `drop database if exists ${name} with (force)`);
  });

  test('LATIN1: serve refuses it (exit 2, a ConfigError) saying how to make one in UTF8, before making a table', async () => {
    const url = await database('LATIN1');
    await assert.rejects(openServerStore(parseDatabaseUrl(url)), (err: Error) => {
      assert.equal(err.constructor.name, 'ConfigError');
      // --locale: on a cluster made in a LATIN1 locale (en_GB, the usual way to get such a database), createdb -E UTF8
      // alone fails: "encoding UTF8 does not match locale en_GB; the chosen LC_CTYPE setting requires encoding LATIN1".
      assert.match(err.message, /is encoded in LATIN1, which cannot hold every donor's name .* give Almoner a database in UTF8 \(createdb -E UTF8 --locale=C\.UTF-8 -T template0 almoner\)/);
      return true;
    });
    const tables = await queryPostgres<{ n: number }>(url, `select count(*)::int as n from information_schema.tables where table_schema = 'public'`);
    assert.equal(tables[0]!.n, 0, 'nothing was made in it');
  });

  // The README's first steps: createdb, then `charity create`, then serve. Until 2026-11-30 (a review) charity
  // create made Almoner's tables in a LATIN1 database and recorded the charity (a Łukasz in its name: exit 1 and
  // PostgreSQL's words), and only then did serve refuse it, saying nothing was changed and to move the data.
  test('LATIN1: charity create, the first command, refuses it too (exit 2) before making a table', async () => {
    assertBuilt();
    const url = await database('LATIN1');
    for (const name of ['Helping Hands', 'Łukasz Trust']) {
      const run = await almoner(url, ['charity', 'create', '--name', name, '--email', 'info@example.org']);
      assert.equal(run.code, 2, run.stderr + run.stdout);
      assert.match(run.stderr, /is encoded in LATIN1, which cannot hold every donor's name/);
    }
    const tables = await queryPostgres<{ n: number }>(url, `select count(*)::int as n from information_schema.tables where table_schema = 'public'`);
    assert.equal(tables[0]!.n, 0, 'nothing was made in it');
  });

  // An operator's walkthrough of the README (2026-12-02): a restore into a LATIN1 database made Almoner's tables and
  // rows there, exit 0, and serve then refused the database it had made.
  test('LATIN1: a restore into it is refused too (exit 2), before anything is marked or made', async () => {
    assertBuilt();
    const source = await database('UTF8');
    const made = await almoner(source, ['charity', 'create', '--name', 'Łukasz Trust', '--email', 'info@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const dump = join(tempDir(), 'backup.dump');
    execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, source]);
    const url = await database('LATIN1');
    const restored = await almoner(url, ['restore', dump]);
    assert.equal(restored.code, 2, restored.stderr + restored.stdout);
    assert.match(restored.stderr, /is encoded in LATIN1, which cannot hold every donor's name .* give Almoner a database in UTF8/);
    const tables = await queryPostgres<{ n: number }>(url, `select count(*)::int as n from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema')`);
    assert.equal(tables[0]!.n, 0, 'nothing was made in it, not even the restore\'s mark');
  });

  test('LATIN1 holding Almoner\'s tables already (made before 2026-11-30): the commands that take data out still open it', async () => {
    const url = await database('LATIN1');
    await queryPostgres(url, `alter database ${new URL(url).pathname.slice(1)} set client_encoding = 'UTF8'`); // as any database may
    // The tables as an earlier version made them: its migrations, run as they were, with no check.
    const { Kysely, PostgresDialect } = await import('kysely');
    const { default: pg } = await import('pg');
    const { migrate } = await import('../../src/store/migrate.js');
    const db = new Kysely<never>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    try {
      await migrate(db as never, 'postgres');
    } finally {
      await db.destroy();
    }
    await (await openStore(parseDatabaseUrl(url), { mustExist: true })).close(); // donations export, donor export
    await assert.rejects(openServerStore(parseDatabaseUrl(url)), /is encoded in LATIN1/);
  });

  test('UTF8 and SQL_ASCII (which stores the bytes as sent) are taken', async () => {
    for (const encoding of ['UTF8', 'SQL_ASCII']) await (await openServerStore(parseDatabaseUrl(await database(encoding)))).close();
  });
});
