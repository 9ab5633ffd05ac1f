// A PostgreSQL restore into an empty database stopped while pg_restore ran, which rolled back: the
// database is still empty, and keep-replaced says the restore restored nothing, removes the mark,
// and neither makes Almoner's tables nor records anything. Until 2026-12-02 (a review) it said the
// restore was finished, made the tables, empty, and recorded a `restore` that never took place: the
// restore's comment, by which keep-replaced tells a rolled-back pg_restore, is written only on a
// database that has Almoner's schema. Without holdsMigrations (src/cli/backup.ts), this test fails.
// A restore into an empty database killed after pg_restore committed is still finished by
// keep-replaced (test/cli/restore-mark.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BACKENDS, queryPostgres } from '../support/backends.js';
import { almoner, assertBuilt, killedAsPgRestoreBegins, killedBySignal, operator } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');


test('keep-replaced after a restore into an empty PostgreSQL database stopped before pg_restore committed: nothing restored, no tables made, nothing recorded, unmarked [postgres]', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, async () => {
  assertBuilt();
  const source = await postgres!.createDatabase();
  const empty = await postgres!.createDatabase();
  try {
    const { charity, backup } = operator(source, 'postgres');
    await charity('Before');
    const file = await backup('before');
    const killed = await killedBySignal(almoner(empty.url, ['restore', file], { PATH: killedAsPgRestoreBegins() }));
    assert.equal(killed.signal, 'SIGKILL');
    assert.equal((await queryPostgres<{ t: string | null }>(empty.url, "select to_regclass('almoner_restoring')::text as t"))[0]!.t, 'almoner_restoring', 'marked');

    const finished = await almoner(empty.url, ['keep-replaced']);
    assert.equal(finished.code, 0, finished.stderr);
    assert.match(finished.stdout, /stopped before it restored anything: the database is as it was, without Almoner's tables/);
    assert.doesNotMatch(finished.stdout, /is finished/);
    const tables = await queryPostgres<{ name: string }>(empty.url, "select tablename as name from pg_tables where schemaname not in ('pg_catalog', 'information_schema')");
    assert.deepEqual(tables.map((t) => t.name), [], 'no table made, the mark removed');

    // Restored again, it goes through.
    const again = await almoner(empty.url, ['restore', file]);
    assert.equal(again.code, 0, again.stderr);
    assert.match((await almoner(empty.url, ['charity', 'list'])).stdout, /Before/);
  } finally {
    await empty.drop();
    await source.drop();
  }
});
