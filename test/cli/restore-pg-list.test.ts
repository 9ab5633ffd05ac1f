// A PostgreSQL restore gives pg_restore the list of what to restore (pg_restore --use-list): until
// 2026-12-02 it wrote it in a folder of its own in the temporary folder (/tmp/almoner-restore-…) and
// removed that once pg_restore had ended, so a restore killed meanwhile (SIGKILL, the OOM killer)
// left the folder for ever (a review). The list is now on pg_restore's standard input, a file no name
// leads to. Without that change in src/cli/backup.ts (pgRestore, unnamedFile), the first test fails.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';
import { BACKENDS, queryPostgres, tempDir } from '../support/backends.js';
import { almoner, killedAsPgRestoreBegins, killedBySignal, withBackupBetween } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');
const skip = postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)';

test('a PostgreSQL restore killed while pg_restore runs leaves nothing in the temporary folder', { skip }, async () => {
  await withBackupBetween(postgres!, async ({ database, cli, file }) => {
    const tmp = tempDir();
    const killed = await killedBySignal(almoner(database.url, ['restore', file, '--replace'], { PATH: killedAsPgRestoreBegins(), TMPDIR: tmp }));
    assert.equal(killed.signal, 'SIGKILL');
    assert.deepEqual(readdirSync(tmp), [], 'nothing left in the temporary folder');
    await cli(['keep-replaced']);
  });
});

test('a PostgreSQL restore reads its list from standard input: pg_restore puts the backup in place (its --clean drops the comment the restore wrote), and nothing is left in the temporary folder', { skip }, async () => {
  await withBackupBetween(postgres!, async ({ database, cli, file }) => {
    const tmp = tempDir();
    const restored = await almoner(database.url, ['restore', file, '--replace'], { TMPDIR: tmp });
    assert.equal(restored.code, 0, `${restored.stderr}${restored.stdout}`);
    assert.deepEqual(readdirSync(tmp), [], 'nothing left in the temporary folder');
    const list = (await cli(['charity', 'list'])).stdout;
    assert.match(list, /Before/);
    assert.match(list, /Afterwards/, 'the charity signed up since is carried over');
    // Written on the migrations' table just before pg_restore, gone with the table only if pg_restore made it again from the backup.
    const [comment] = await queryPostgres<{ said: string | null }>(database.url, "select obj_description(to_regclass('kysely_migration'), 'pg_class') as said");
    assert.equal(comment?.said, null, 'the table is the backup\'s');
  });
});
