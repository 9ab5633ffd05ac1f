// A restore refused because the database is in use (a server runs) or for want of --replace marks
// nothing. Until 2026-11-30 it marked the database first, then refused and took the mark away; a
// backup or a claim begun in those milliseconds (overlapping timers, a second operator) was refused,
// told that a restore had not finished and to run keep-replaced with a file that never was (a
// review: 2 rounds of 6, restore beside backup). The folder is watched (inotify) for the mark's
// making: nothing here hangs on timing.
import assert from 'node:assert/strict';
import { watch } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { test } from 'node:test';
import { openStore } from '../../src/store/open.js';
import { SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

test('a restore refused (the database in use, or no --replace) never marks the database', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    assert.equal(database.location.dialect, 'sqlite');
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Marked', '--email', 'm@example.org']);
    assert.equal(made.code, 0, made.stderr);
    const backup = join(tempDir(), 'backup.db');
    assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);

    const seen: string[] = [];
    const watcher = watch(dirname(path), (_event, name) => name && seen.push(String(name)));
    const server = await openStore(database.location); // a server's hold on it
    try {
      const inUse = await almoner(database.url, ['restore', backup, '--replace']);
      assert.equal(inUse.code, 2, inUse.stderr);
      assert.match(inUse.stderr, /is in use \(a server or another command has it open\): stop it, then restore/);
    } finally {
      await server.close();
    }
    const noReplace = await almoner(database.url, ['restore', backup]);
    assert.equal(noReplace.code, 2, noReplace.stderr);
    assert.match(noReplace.stderr, /add --replace/);
    // The watcher's events for the commands' changes are delivered before this one's, made after them.
    const last = join(dirname(path), 'after-the-restores');
    const { writeFileSync } = await import('node:fs');
    await new Promise<void>((resolve) => {
      const done = watch(dirname(path), (_event, name) => String(name) === basename(last) && (done.close(), resolve()));
      writeFileSync(last, '');
    });
    watcher.close();
    assert.deepEqual(seen.filter((name) => name.startsWith(`${basename(path)}.restoring`)), [], 'the database was marked as being restored');
  } finally {
    await database.drop();
  }
});
