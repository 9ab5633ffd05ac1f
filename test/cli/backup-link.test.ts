// A backup's --out that is a symbolic link to nothing (a dangling link: the file it named moved or
// deleted, or another user's link). `existsSync` follows the link and found nothing, so the command
// copied the whole database and was then refused at the end (a hard link is never made over a name
// that is taken), saying the file "was written meanwhile, by another command": there was no such
// file and no such command (until 2026-12-01; a review). It is now refused at once, said to be a
// link; and a link put there while the copy is made is said to be one too. The other refusals keep
// their words (test/cli/backup.test.ts).
import assert from 'node:assert/strict';
import { lstatSync, readdirSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { backUpSqlite, CopyRefused } from '../../src/store/sqlite-backup.js';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

test('backup refuses an --out that is a dangling symbolic link, saying so, and leaves the link and the folder as they were [sqlite]', async () => {
  assertBuilt();
  const dir = tempDir();
  const path = join(dir, 'almoner.db');
  const url = `sqlite:${path}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Linked', '--email', 'l@example.org']);
  assert.equal(made.code, 0, made.stderr);
  const there = readdirSync(dir);

  for (const [name, target] of [['gone.db', join(dir, 'moved-away.db')], ['nowhere.db', join(dir, 'no', 'such', 'folder', 'b.db')]] as const) {
    const out = join(dir, name);
    symlinkSync(target, out);
    const refused = await almoner(url, ['backup', '--out', out]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, new RegExp(`${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is a symbolic link to .*${target.split('/').at(-1)}, which does not exist: a backup is never written through a link, so it is refused`));
    assert.doesNotMatch(refused.stderr, /meanwhile|exists already/);
    assert.equal(readlinkSync(out), target, 'the link left as it was');
    there.push(name);
    assert.deepEqual(readdirSync(dir).sort(), there.sort(), `${name}: nothing else written there`);
  }

  // The other refusals keep their words: a file there, a link to a file there (which exists: said as before).
  const file = join(dir, 'exists.db');
  writeFileSync(file, 'keep me');
  symlinkSync(file, join(dir, 'to-file.db'));
  for (const out of [file, join(dir, 'to-file.db')]) {
    const refused = await almoner(url, ['backup', '--out', out]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /exists already: give the backup a new name/);
  }
});

test('a dangling link put at the backup\'s name while it copied is said to be a link, not a file written meanwhile', async () => {
  const dir = tempDir();
  const path = join(dir, 'almoner.db');
  const made = await almoner(`sqlite:${path}`, ['charity', 'create', '--name', 'Linkedlate', '--email', 'l@example.org']);
  assert.equal(made.code, 0, made.stderr);
  const out = join(dir, 'backup.db');
  symlinkSync(join(dir, 'elsewhere.db'), out); // after the command's look for it (backup.ts), before its copy is placed

  await assert.rejects(backUpSqlite(path, out), (err: Error) => {
    assert.ok(err instanceof CopyRefused, `refused as the operator's to settle (exit 2), not ${err.constructor.name}`);
    assert.match(err.message, /backup\.db is a symbolic link, put there while this backup was made: a backup is never written through a link, so it is refused/);
    assert.doesNotMatch(err.message, /was written meanwhile/);
    return true;
  });
  assert.ok(lstatSync(out).isSymbolicLink(), 'the link left as it was');
  assert.deepEqual(readdirSync(dir).filter((name) => name.startsWith('backup.db.')), [], 'no copy left beside it');
});
