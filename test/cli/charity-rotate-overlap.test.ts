// Two `charity rotate`s of one charity at the same time (overlapping timers, two operators, a script
// run again while its first run still goes). Until 2026-11-30 both exited 0, each printing a new
// password and, with --grace, that the old one worked on; the second replaced the first's password
// at once, so one printed password never worked, and with --grace the second kept the first's as
// the "old" one, so the charity's real old password stopped at once too (a review: in every round of
// 12 on SQLite and 8 on PostgreSQL). Now a rotation replaces only the password it found (by its
// hash), and the one that comes second says so, naming the other,
// exit 1, printing none. The two are held at their write, both having
// read, by the test's own transaction on the database: nothing is left to chance but how long they
// take to get there (they sleep in SQLite's busy handler, seen in /proc, or 3 s pass, under their 5 s).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { hashPassword } from '../../src/charities/credentials.js';
import { SQLITE } from '../support/backends.js';
import { almoner, assertBuilt, startAlmoner } from '../support/cli.js';

const sleepsInBusyHandler = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/wchan`, 'utf8').includes('nanosleep');
  } catch {
    return false;
  }
};

test('two charity rotate --grace at once: one sets its password, the other sets none and says so; the old password works on', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Rotated', '--email', 'r@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { username, password: original } = JSON.parse(made.stdout) as { username: string; password: string };

    assert.equal(database.location.dialect, 'sqlite');
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    const held = new Database(path);
    held.exec('begin immediate'); // both read the charity, then wait here to write
    const rotations = [0, 1].map(() => startAlmoner(database.url, ['charity', 'rotate', username, '--grace', '1h', '--json']));
    const deadline = Date.now() + 3000;
    let waiting = 0;
    while (waiting < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      waiting = rotations.every((r) => sleepsInBusyHandler(r.pid)) ? waiting + 1 : 0;
    }
    held.exec('rollback');
    held.close();
    const runs = await Promise.all(rotations.map((r) => r.done));

    const row = new Database(path, { readonly: true }).prepare('select password_hash, old_password_hash from charities where username = ?').get(username) as { password_hash: string; old_password_hash: string | null };
    const set = runs.filter((r) => r.code === 0);
    assert.equal(set.length, 1, `one rotation sets its password: ${runs.map((r) => `${r.code} ${r.stderr}`).join(' | ')}`);
    const printed = JSON.parse(set[0]!.stdout) as { password: string };
    assert.equal(row.password_hash, hashPassword(printed.password), 'the password printed is the one that works');
    assert.equal(row.old_password_hash, hashPassword(original), 'the old password works on through its grace, as printed');
    const refused = runs.find((r) => r.code !== 0)!;
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, '', 'no password printed');
    assert.match(refused.stderr, /`charity rotate` \(by .*@.* at .*\) changed the credentials of .* while this charity rotate ran, so this one changed nothing and shows no password: the password that rotation printed is the one that works/);
  } finally {
    await database.drop();
  }
});
