// A PostgreSQL restore stopped while pg_restore ran, which then rolled back (Ctrl-C reaches its
// process group; pg_restore --single-transaction commits all or nothing): the database is as it
// was, and keep-replaced, which the mark tells the operator to run, says so, records no restore and
// removes what the restore wrote beside the backup. Until 2026-12-02 (a review, 10 of 10 restores
// stopped so) it said the restore was finished, recorded a `restore` in the trail that never took
// place, and left the replaced database's trail and dump; the restore now comments the migrations'
// table just before pg_restore (a comment pg_restore --clean drops with the table), which tells the
// two apart. Without that, this test fails on keep-replaced's words.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { test } from 'node:test';
import { BACKENDS, queryPostgres } from '../support/backends.js';
import { almoner, killedAsPgRestoreBegins, killedBySignal, withBackupBetween } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');


test('keep-replaced after a restore killed before pg_restore put the backup in place: nothing replaced, nothing recorded as restored, the files it wrote removed [postgres]', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, async () => {
  await withBackupBetween(postgres!, async ({ database, cli, file }) => {
    const killed = await killedBySignal(almoner(database.url, ['restore', file, '--replace'], { PATH: killedAsPgRestoreBegins() }));
    assert.equal(killed.signal, 'SIGKILL');
    assert.ok(readdirSync(dirname(file)).some((f) => f.includes('.replaced-trail-')), 'the restore had written the replaced trail beside the backup');
    assert.equal((await almoner(database.url, ['charity', 'list'])).code, 2, 'the database is marked: refused');

    const finished = await cli(['keep-replaced']);
    assert.match(finished.stdout, /stopped before it replaced anything: the database is as it was/);
    assert.deepEqual(readdirSync(dirname(file)), [basename(file)], 'what the restore wrote beside the backup is removed');
    const list = await cli(['charity', 'list']);
    assert.match(list.stdout, /Afterwards/, 'the database is as it was');
    const actions = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((line) => (JSON.parse(line) as { action: string }).action);
    assert.ok(!actions.includes('restore'), `no restore recorded: ${actions.join(', ')}`);
    assert.equal(actions.at(-1), 'keep-replaced');
    const [comment] = await queryPostgres<{ said: string | null }>(database.url, "select obj_description(to_regclass('kysely_migration'), 'pg_class') as said");
    assert.equal(comment?.said, null, 'the restore\'s comment is removed');
  });
});
