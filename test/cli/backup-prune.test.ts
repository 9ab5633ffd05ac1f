// bin/almoner backup --prune-older-than DAYS: the timer's backups (four a day) were kept until an
// operator deleted them, on the database's own disk, and each kept every donor of its day, erased
// since or not. Now, once a new backup is written, the folder's backups older than DAYS go; only what
// `backup` wrote (its header's mark), never through a link, never the new one.
import assert from 'node:assert/strict';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
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

test("backup --prune-older-than deletes only its own database's backups: another database's in the same folder stay; a database restored from a backup goes on with its backups; one from before the databases were told apart goes", async () => {
  assertBuilt();
  const dir = tempDir();
  const [a, b] = ['a.db', 'b.db'].map((name) => `sqlite:${join(dir, name)}`) as [string, string];
  for (const url of [a, b]) assert.equal((await almoner(url, ['charity', 'create', '--name', 'Two', '--email', 't@example.org'])).code, 0);
  const backups = join(dir, 'backups');
  mkdirSync(backups);
  for (const [url, name] of [[a, 'a-old.db'], [b, 'b-old.db'], [a, 'a-untold.db']] as const) {
    assert.equal((await almoner(url, ['backup', '--out', join(backups, name)])).code, 0);
    age(join(backups, name), 40);
  }
  // As a backup taken before migration 0022 (2026-12-01) is: the mark, and no database's number.
  const untold = new Database(join(backups, 'a-untold.db'));
  untold.pragma('application_id = 0');
  untold.close();
  age(join(backups, 'a-untold.db'), 40);

  // Until 2026-12-01 this deleted b-old.db too: every Almoner backup bore the same mark.
  const byA = await almoner(a, ['backup', '--out', join(backups, 'a-new.db'), '--prune-older-than', '30']);
  assert.equal(byA.code, 0, byA.stderr);
  assert.match(byA.stdout, /deleted 2 backups older than 30 days from .*: a-old\.db, a-untold\.db$/m);
  assert.deepEqual(readdirSync(backups).sort(), ['a-new.db', 'b-old.db']);

  // b's database restored from its old backup into a new file: the same database, going on, so its backups are its own.
  const c = `sqlite:${join(dir, 'c.db')}`;
  assert.equal((await almoner(c, ['restore', join(backups, 'b-old.db')])).code, 0);
  const byC = await almoner(c, ['backup', '--out', join(backups, 'c-new.db'), '--prune-older-than', '30']);
  assert.equal(byC.code, 0, byC.stderr);
  assert.match(byC.stdout, /deleted 1 backup older than 30 days from .*: b-old\.db$/m);
  assert.deepEqual(readdirSync(backups).sort(), ['a-new.db', 'c-new.db']);
});

test("a database restored with --replace keeps its number, from a backup taken before databases were told apart or from another database's: its own backups are still pruned, the other's left", async () => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  const other = `sqlite:${join(dir, 'other.db')}`;
  for (const u of [url, other]) assert.equal((await almoner(u, ['charity', 'create', '--name', 'Rolled', '--email', 'r@example.org'])).code, 0);
  const backups = join(dir, 'backups');
  mkdirSync(backups);
  for (const name of ['numbered.db', 'untold.db']) assert.equal((await almoner(url, ['backup', '--out', join(backups, name)])).code, 0);
  assert.equal((await almoner(other, ['backup', '--out', join(backups, 'other.db')])).code, 0);
  // As a backup taken before migration 0022 (2026-12-01) is: the mark, and no database's number.
  const untold = new Database(join(backups, 'untold.db'));
  untold.pragma('application_id = 0');
  untold.close();
  const restored = await almoner(url, ['restore', '--replace', join(backups, 'untold.db')]);
  assert.equal(restored.code, 0, restored.stderr);
  age(join(backups, 'numbered.db'), 40);

  // Until 2026-12-01 (a review) the restored database took a new number, and numbered.db, this
  // database's own backup, was never deleted again by its prune, nor by any other database's.
  const pruned = await almoner(url, ['backup', '--out', join(backups, 'new.db'), '--prune-older-than', '30']);
  assert.equal(pruned.code, 0, pruned.stderr);
  assert.match(pruned.stdout, /deleted 1 backup older than 30 days from .*: numbered\.db$/m);
  assert.deepEqual(readdirSync(backups).sort(), ['new.db', 'other.db', 'untold.db']);

  // Another database's backup restored over this one: still this database, going on with its own backups.
  assert.equal((await almoner(url, ['restore', '--replace', join(backups, 'other.db')])).code, 0);
  for (const name of ['new.db', 'other.db']) age(join(backups, name), 40);
  const again = await almoner(url, ['backup', '--out', join(backups, 'newer.db'), '--prune-older-than', '30']);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /deleted 1 backup older than 30 days from .*: new\.db$/m);
  assert.deepEqual(readdirSync(backups).sort(), ['newer.db', 'other.db', 'untold.db']);
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

const asRoot = process.getuid?.() === 0 ? false : 'chown needs root';

test("backup --prune-older-than deletes only this user's backups: another user's, in a folder with the sticky bit, is left, and is no failure", { skip: asRoot }, async () => {
  assertBuilt();
  const dir = tempDir();
  chmodSync(dir, 0o711); // nobody may reach their own folder inside
  const nobody = { uid: 65534, gid: 65534 };
  const shared = join(dir, 'shared');
  mkdirSync(shared);
  chmodSync(shared, 0o1777); // as /tmp: backup takes it
  const mine = join(dir, 'mine');
  mkdirSync(mine, { mode: 0o700 });
  chownSync(mine, nobody.uid, nobody.gid);
  const rootUrl = `sqlite:${join(dir, 'root.db')}`;
  const nobodyUrl = `sqlite:${join(mine, 'almoner.db')}`;
  assert.equal((await almoner(rootUrl, ['charity', 'create', '--name', 'Root', '--email', 'r@example.org'])).code, 0);
  assert.equal((await almoner(nobodyUrl, ['charity', 'create', '--name', 'Nobody', '--email', 'n@example.org'], {}, nobody)).code, 0);
  // Each user's old backup there, readable by all (a copy made under umask 022, say).
  assert.equal((await almoner(rootUrl, ['backup', '--out', join(shared, 'root-old.db')])).code, 0);
  assert.equal((await almoner(nobodyUrl, ['backup', '--out', join(shared, 'nobody-old.db')], {}, nobody)).code, 0);
  for (const name of ['root-old.db', 'nobody-old.db']) {
    chmodSync(join(shared, name), 0o644);
    age(join(shared, name), 40);
  }

  // nobody cannot delete root's (sticky bit): it is not theirs to delete, and the backup is no failure for it.
  const byNobody = await almoner(nobodyUrl, ['backup', '--out', join(shared, 'nobody-new.db'), '--prune-older-than', '14'], {}, nobody);
  assert.equal(byNobody.code, 0, byNobody.stderr);
  assert.match(byNobody.stdout, /deleted 1 backup older than 14 days from .*: nobody-old\.db/);
  // root could delete nobody's: it is not root's backup, and is left.
  const byRoot = await almoner(rootUrl, ['backup', '--out', join(shared, 'root-new.db'), '--prune-older-than', '14']);
  assert.equal(byRoot.code, 0, byRoot.stderr);
  assert.match(byRoot.stdout, /deleted 1 backup older than 14 days from .*: root-old\.db/);
  assert.deepEqual(readdirSync(shared).sort(), ['nobody-new.db', 'root-new.db']);
});

test('backup --prune-older-than leaves the database a restore kept aside beside the file it restored to, even one that was a backup', async () => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  assert.equal((await almoner(url, ['charity', 'create', '--name', 'Kept', '--email', 'k@example.org'])).code, 0);
  const backups = join(dir, 'backups');
  mkdirSync(backups);
  for (const name of ['a.db', 'b.db']) assert.equal((await almoner(url, ['backup', '--out', join(backups, name)])).code, 0);
  age(join(backups, 'a.db'), 40);
  age(join(backups, 'b.db'), 40);
  // A restore over a backup (DATABASE_URL naming it): the backup that was there is kept aside, renamed, as old as it was, its mark and all.
  const restored = await almoner(`sqlite:${join(backups, 'a.db')}`, ['restore', join(backups, 'b.db'), '--replace']);
  assert.equal(restored.code, 0, restored.stderr);
  const keptAside = readdirSync(backups).find((n) => n.startsWith('a.db.replaced-'));
  assert.ok(keptAside, readdirSync(backups).join(', '));

  const run = await almoner(url, ['backup', '--out', join(backups, 'new.db'), '--prune-older-than', '30']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /deleted 1 backup older than 30 days from .*: b\.db$/m);
  assert.deepEqual(readdirSync(backups).sort(), ['a.db', keptAside, 'new.db'].sort());
});

test('backup --prune-older-than: an old backup that cannot be deleted is said so, on both outputs, never "none deleted"; the new backup is written all the same (exit 1)', { skip: asRoot }, async (t) => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  assert.equal((await almoner(url, ['charity', 'create', '--name', 'Stuck', '--email', 's@example.org'])).code, 0);
  const backups = join(dir, 'backups');
  mkdirSync(backups);
  assert.equal((await almoner(url, ['backup', '--out', join(backups, 'stuck.db')])).code, 0);
  age(join(backups, 'stuck.db'), 40);
  // Immutable: not even root may delete it (as a read-only mount, or a file system's own refusal).
  if (spawnSync('chattr', ['+i', join(backups, 'stuck.db')]).status !== 0) return t.skip('chattr +i is not supported here');
  try {
    const run = await almoner(url, ['backup', '--out', join(backups, 'new.db'), '--prune-older-than', '30']);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /backup written to .*new\.db/);
    assert.doesNotMatch(run.stdout, /none deleted/);
    assert.match(run.stdout, /no backup deleted of those in .* older than 30 days: 1 could not be \(see below\)/);
    assert.match(run.stderr, /1 old backup could not be deleted: stuck\.db \(EPERM\)/);
    assert.ok(existsSync(join(backups, 'new.db')));
  } finally {
    spawnSync('chattr', ['-i', join(backups, 'stuck.db')]);
  }
});
