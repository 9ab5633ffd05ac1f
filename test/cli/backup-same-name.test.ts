// Two backups to the same file begun at the same moment (overlapping timers, a script run again
// while its first run still goes): each looks for the file before it begins, finds none, and puts
// its copy in place at the end. Until 2026-11-30 the second renamed its copy over the first's, and
// both said `backup written` (a review: 8 rounds of 15 with two `bin/almoner backup --out F` started
// within 40 ms). Here the other backup's file is put there after this one's look, as it is in
// that race: nothing is left to chance, the copy is made with the file already in its place.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore } from '../../src/store/open.js';
import { backUpSqlite, CopyRefused } from '../../src/store/sqlite-backup.js';
import { tempDir } from '../support/backends.js';

test('a backup never replaces a file put at its name while it copied (another backup to the same name)', async () => {
  const dir = tempDir();
  const path = join(dir, 'almoner.db');
  const store = await openStore(parseDatabaseUrl(`sqlite:${path}`));
  await store.createCharity({ name: 'Overlap', email: 'o@example.org', username: 'overlap-aaaaaa', password_hash: 'x'.repeat(64) });
  await store.close();

  const out = join(dir, 'backup.db');
  const theOthers = Buffer.from('the other backup, written first');
  writeFileSync(out, theOthers, { mode: 0o600 }); // after this backup's look for it (backup.ts), before its copy is placed

  await assert.rejects(backUpSqlite(path, out), (err: Error) => {
    assert.ok(err instanceof CopyRefused, `refused as the operator's to settle (exit 2), not ${err.constructor.name}`);
    assert.match(err.message, /was written meanwhile, by another command/);
    assert.match(err.message, /give the backup a new name/);
    return true;
  });
  assert.deepEqual(readFileSync(out), theOthers, 'the file already there is left as it was');
  assert.deepEqual(readdirSync(dir).filter((name) => name.startsWith('backup.db.')), [], 'no copy left beside it');
});
