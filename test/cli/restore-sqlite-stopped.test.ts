// A SQLite restore stopped by SIGTERM (systemctl stop) or SIGINT (Ctrl-C). Until 2026-12-02 the signal
// ended it at once: its mark and the copy it was writing beside the database were left, every server and
// command refused the database until keep-replaced was run, and that then removed the copy (a review). Now
// the restore stops at its next step and undoes what it did: before its swap it removes its copy; once its
// backup is in place it puts back the database it replaced (what it did since was done in the restored
// database alone); then it removes its mark, says so and ends by the signal, leaving nothing for
// keep-replaced. strace sends the signal at a chosen system call: the fchmod that makes the copy its
// owner's alone, just before SQLite copies the rows into it, or the first rename of the swap. Without the
// change in src/cli/backup.ts and src/store/sqlite-backup.ts (holdStopSignals, undoRestore), these fail.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { test } from 'node:test';
import { SQLITE, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv } from '../support/cli.js';

const STRACE = spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true']).status === 0;

/** Runs `restore backup --replace` on the database at `url` under strace, which sends it `signal` on entering the first `syscall`: how it ended. */
const restoreSignalled = (url: string, backup: string, syscall: string, signal: 'SIGTERM' | 'SIGINT') =>
  new Promise<{ signal: string | null; code: number | null; stderr: string; stdout: string }>((resolve) => {
    const inject = ['-f', '-qq', '-o', '/dev/null', '-e', `trace=${syscall}`, '-e', `inject=${syscall}:signal=${signal.slice(3)}:when=1`];
    execFile('strace', [...inject, BIN, 'restore', backup, '--replace'], { env: childEnv(url) }, (err, stdout, stderr) => {
      const e = err as { signal?: string | null; code?: number | null } | null;
      resolve({ signal: e?.signal ?? null, code: e ? (e.code ?? null) : 0, stderr, stdout });
    });
  });

/** A SQLite database with a charity signed up before its backup and one after; the backup's path. */
async function withBackup(run: (database: TestDatabase, path: string, backup: string) => Promise<void>): Promise<void> {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Before', '--email', 'b@example.org', '--json'])).code, 0);
    const backup = join(tempDir(), 'b.db');
    assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'After', '--email', 'a@example.org', '--json'])).code, 0);
    await run(database, path, backup);
  } finally {
    await database.drop();
  }
}

/** The database as it was before the restore, unmarked, nothing the restore wrote left beside it, nothing for keep-replaced. */
async function asItWas(database: TestDatabase, path: string): Promise<void> {
  assert.ok(!existsSync(`${path}.restoring`), 'unmarked');
  const left = readdirSync(dirname(path)).filter((name) => name.startsWith(basename(path)) && /\.(partial|replaced|restoring)/.test(name));
  assert.deepEqual(left, [], 'nothing of the restore left beside the database');
  const list = await almoner(database.url, ['charity', 'list']);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /After/, 'the database is as it was');
  const actions = (await almoner(database.url, ['audit', '--json'])).stdout.trim().split('\n').map((line) => (JSON.parse(line) as { action: string }).action);
  assert.ok(!actions.includes('restore'), `no restore recorded: ${actions.join(', ')}`);
  const kept = await almoner(database.url, ['keep-replaced']);
  assert.equal(kept.code, 0, kept.stderr);
  assert.match(kept.stdout, /nothing to do: no restore of .* is unfinished/);
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`SQLite: a restore stopped by ${signal} as it copies the backup removes its copy and its mark, and ends by the signal, the database as it was (it ended at once, its mark and copy left)`, { skip: !STRACE && 'needs strace' }, async () => {
    await withBackup(async (database, path, backup) => {
      const ended = await restoreSignalled(database.url, backup, 'fchmod', signal);
      assert.equal(ended.signal, signal, `ended by the signal: ${JSON.stringify(ended)}`);
      assert.match(ended.stderr, new RegExp(`the restore was stopped by ${signal} before it replaced anything: the copy it was writing is removed, and the database is as it was; its mark is removed`));
      await asItWas(database, path);
    });
  });
}

test('SQLite: a restore stopped by SIGTERM once its backup is in place puts back the database it replaced, removes its mark, and ends by the signal (it ended at once, marked, the backup in place)', { skip: !STRACE && 'needs strace' }, async () => {
  await withBackup(async (database, path, backup) => {
    const ended = await restoreSignalled(database.url, backup, 'rename,renameat,renameat2', 'SIGTERM');
    assert.equal(ended.signal, 'SIGTERM', `ended by the signal: ${JSON.stringify(ended)}`);
    assert.match(ended.stderr, /the restore was stopped by SIGTERM once its backup was in place: that is undone, the database that was there is back in its place, as it was; its mark is removed/);
    await asItWas(database, path);
  });
});

test('SQLite: a restore into a new file stopped by SIGTERM once its backup is in place removes it and its mark: there is no database, as before', { skip: !STRACE && 'needs strace' }, async () => {
  await withBackup(async (_database, _path, backup) => {
    const path = join(tempDir(), 'new.db');
    const ended = await restoreSignalled(`sqlite:${path}`, backup, 'rename,renameat,renameat2', 'SIGTERM');
    assert.equal(ended.signal, 'SIGTERM', `ended by the signal: ${JSON.stringify(ended)}`);
    assert.match(ended.stderr, /the restore was stopped by SIGTERM once its backup was in place: that is undone, and there is no database, as before; its mark is removed/);
    assert.deepEqual(readdirSync(dirname(path)), [], 'nothing left: no database, no mark, no copy');
  });
});
