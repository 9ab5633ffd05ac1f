// bin/almoner backup --prune-older-than DAYS: the timer's backups (four a day) were kept until an
// operator deleted them, on the database's own disk, and each kept every donor of its day, erased
// since or not. Now, once a new backup is written, the folder's backups older than DAYS go; only what
// `backup` wrote (its header's mark), never through a link, never the new one.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const DAY_S = 24 * 60 * 60;

/** Sets the file's times to `days` days ago (a link's target's, through it: not used on links here). */
const age = (path: string, days: number) => {
  const at = Date.now() / 1000 - days * DAY_S;
  utimesSync(path, at, at);
};

test('backup --prune-older-than: the backups in the folder older than that go, said and recorded; the new one, younger ones, the database itself, other files and links stay', async () => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  assert.equal((await almoner(url, ['charity', 'create', '--name', 'Pruned', '--email', 'p@example.org'])).code, 0);
  const backups = join(dir, 'backups');
  mkdirSync(backups);
  for (const name of ['old-1.db', 'old-2.db', 'young.db']) assert.equal((await almoner(url, ['backup', '--out', join(backups, name)])).code, 0);
  age(join(backups, 'old-1.db'), 40);
  age(join(backups, 'old-2.db'), 31);
  age(join(backups, 'young.db'), 29);
  // Not backups, however old: a copy of the database itself (no mark), a restore's trail, a text file; and a link to an old backup elsewhere.
  copyFileSync(join(dir, 'almoner.db'), join(backups, 'live-copy.db'));
  writeFileSync(join(backups, 'old-1.db.replaced-trail-2026-01-01T00-00-00-000Z.jsonl'), '');
  writeFileSync(join(backups, 'notes.txt'), 'kept\n');
  mkdirSync(join(dir, 'elsewhere'));
  assert.equal((await almoner(url, ['backup', '--out', join(dir, 'elsewhere', 'kept.db')])).code, 0);
  age(join(dir, 'elsewhere', 'kept.db'), 90);
  symlinkSync(join(dir, 'elsewhere', 'kept.db'), join(backups, 'link.db'));
  for (const name of ['live-copy.db', 'old-1.db.replaced-trail-2026-01-01T00-00-00-000Z.jsonl', 'notes.txt']) age(join(backups, name), 100);

  const run = await almoner(url, ['backup', '--out', join(backups, 'new.db'), '--prune-older-than', '30']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, new RegExp(`deleted 2 backups older than 30 days from ${backups}: old-1\\.db, old-2\\.db`));
  assert.deepEqual(readdirSync(backups).sort(), ['link.db', 'live-copy.db', 'new.db', 'notes.txt', 'old-1.db.replaced-trail-2026-01-01T00-00-00-000Z.jsonl', 'young.db']);
  assert.ok(existsSync(join(dir, 'elsewhere', 'kept.db')), 'a link is never followed');
  const trail = (await almoner(url, ['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string; target: string; summary: Record<string, unknown> });
  const pruned = trail.filter((e) => e.action === 'backup prune');
  assert.deepEqual(pruned.map((e) => [e.target, e.summary]), [[backups, { older_than_days: 30, deleted: 2, files: 'old-1.db, old-2.db' }]]);

  // Nothing old left: said, and nothing recorded.
  const again = await almoner(url, ['backup', '--out', join(backups, 'newer.db'), '--prune-older-than', '30']);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /no backup in .* is older than 30 days: none deleted/);
});

test('backup --prune-older-than takes a whole number of days from 1: anything else is refused before a backup is written', async () => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  assert.equal((await almoner(url, ['charity', 'create', '--name', 'Days', '--email', 'd@example.org'])).code, 0);
  for (const days of ['0', '-3', '1.5', 'thirty', '']) {
    const run = await almoner(url, ['backup', '--out', join(dir, 'b.db'), '--prune-older-than', days]);
    assert.equal(run.code, 2, `${days}: ${run.stdout}${run.stderr}`);
    assert.match(run.stderr, /--prune-older-than <days>.*give a whole number of days from 1 to 36500/);
    assert.equal(existsSync(join(dir, 'b.db')), false);
  }
});
