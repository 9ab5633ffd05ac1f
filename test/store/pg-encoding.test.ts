// A server's PostgreSQL database must hold any donor's name: one in LATIN1 (or another single-byte
// encoding) cannot store a Łukasz, and every such create was a 500 whose log line quoted the name's
// bytes; a username so written was a 500 before it was judged, which the throttle never counted (a
// security review, 2026-11-30). So `serve` refuses such a database, with the fix, before it makes a
// table there; the commands that take data out still open it.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { parseDatabaseUrl } from '../../src/config.js';
import { openServerStore, openStore } from '../../src/store/open.js';
import { queryPostgres, TEST_DATABASE_URL } from '../support/backends.js';

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

  test('LATIN1: serve refuses it (exit 2, a ConfigError) saying to use UTF8, before making a table; a command still opens it', async () => {
    const url = await database('LATIN1');
    await assert.rejects(openServerStore(parseDatabaseUrl(url)), (err: Error) => {
      assert.equal(err.constructor.name, 'ConfigError');
      assert.match(err.message, /is encoded in LATIN1, which cannot hold every donor's name .* give Almoner a database in UTF8 \(createdb -E UTF8 -T template0 almoner\)/);
      return true;
    });
    const tables = await queryPostgres<{ n: number }>(url, `select count(*)::int as n from information_schema.tables where table_schema = 'public'`);
    assert.equal(tables[0]!.n, 0, 'nothing was made in it');
    await (await openStore(parseDatabaseUrl(url))).close(); // donations export, donor export: the data can still be taken out
  });

  test('UTF8 and SQL_ASCII (which stores the bytes as sent) are taken', async () => {
    for (const encoding of ['UTF8', 'SQL_ASCII']) await (await openServerStore(parseDatabaseUrl(await database(encoding)))).close();
  });
});
