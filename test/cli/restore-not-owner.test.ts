// A PostgreSQL restore run as a database user with every privilege on Almoner's tables but not
// their owner: pg_restore --clean, which drops them to put the backup's in place, could never
// succeed for it. It is now refused (exit 2) before anything is marked, saying to run it as the
// tables' owner, and the database is left as it was, unmarked. Until 2026-12-02 (a review) it
// failed on its own comment on kysely_migration (`must be owner of table kysely_migration`, exit 1),
// and its unmark, which first removes that comment, failed the same way: the database was left
// marked, every command and server refusing it. Without refuseNotOwner (src/cli/backup.ts), this
// test fails on the exit status and on the mark left.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { BACKENDS, queryPostgres } from '../support/backends.js';
import { almoner, assertBuilt, operator } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

test('a PostgreSQL restore run as a user that does not own the tables: refused (exit 2) before it marks anything, the database as it was [postgres]', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, async () => {
  assertBuilt();
  const database = await postgres!.createDatabase();
  const role = `almoner_not_owner_${randomBytes(4).toString('hex')}`;
  try {
    const { cli, charity, backup } = operator(database, 'postgres');
    await charity('Before');
    const file = await backup('before');
    await charity('Afterwards');
    await queryPostgres(database.url, `create role ${role} login`);
    await queryPostgres(database.url, `grant create, usage on schema public to ${role}; grant all on all tables in schema public to ${role}; grant all on all sequences in schema public to ${role}`);
    const asRole = new URL(database.url);
    asRole.username = role;
    asRole.password = '';

    const refused = await almoner(asRole.href, ['restore', file, '--replace']);
    assert.equal(refused.code, 2, `refused: ${refused.stderr}${refused.stdout}`);
    assert.match(refused.stderr, new RegExp(`\\(${role}\\) does not own .*owned by postgres.*run the restore as their owner`, 's'));
    const [mark] = await queryPostgres<{ t: string | null }>(database.url, "select to_regclass('almoner_restoring')::text as t");
    assert.equal(mark?.t, null, 'not marked');
    const list = await cli(['charity', 'list']);
    assert.match(list.stdout, /Afterwards/, 'the database is as it was, and used');
  } finally {
    await queryPostgres(database.url, `drop owned by ${role}`).catch(() => {});
    await database.drop();
    await queryPostgres(database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), `drop role if exists ${role}`).catch(() => {});
  }
});
