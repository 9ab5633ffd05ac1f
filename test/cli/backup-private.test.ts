// A backup, and a restored database, are their owner's alone from their first byte: the file beside
// the target that the rows go into is made empty with mode 0600 before SQLite writes a row in it.
// Until 2026-11-29 SQLite made it as the umask allowed (0644 under the usual 022) and it was made
// private only once whole, so anyone on the machine could open it meanwhile and read every donor
// (a review read a 61 MB backup so, as `nobody`). Seen with strace: each open of the file, in order.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv } from '../support/cli.js';
import { backUpSqlite, partialOf } from '../../src/store/sqlite-backup.js';

const STRACE = spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true']).status === 0;

/** Runs bin/almoner under strace with umask 022, and gives the openat calls of files whose names hold `partial`. */
function openedUnderStrace(url: string, args: string[]): Promise<string[]> {
  const trace = join(tempDir(), 'trace');
  return new Promise((resolve, reject) => {
    const script = `umask 022; exec strace -f -qq -e trace=openat -o "$TRACE" "$BIN" "$@"`;
    execFile('sh', ['-c', script, 'sh', ...args], { env: childEnv(url, { TRACE: trace, BIN }) }, (err, _stdout, stderr) => {
      if (err) return reject(new Error(`${args.join(' ')}: ${err.message}\n${stderr}`));
      resolve(readFileSync(trace, 'utf8').split('\n').filter((line) => line.includes('.partial-')));
    });
  });
}

test('backup and restore write their copy into a file that is 0600 from the start, whatever the umask [sqlite]', { skip: !STRACE && 'needs strace' }, async () => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Private', '--email', 'p@example.org']);
  assert.equal(made.code, 0, made.stderr);
  const backup = join(dir, 'backup.db');
  const restored = `sqlite:${join(dir, 'restored.db')}`;
  for (const [into, args] of [[url, ['backup', '--out', backup]], [restored, ['restore', backup]]] as const) {
    const opens = await openedUnderStrace(into, [...args]);
    const first = opens.find((line) => /\.partial-\d+-[0-9a-f]{8}"/.test(line) && line.includes('O_CREAT'));
    assert.ok(first, `${args[0]} opened its copy: ${opens.join('\n')}`);
    assert.match(first, /, 0600\) = \d+$/, `${args[0]}: the copy's first open makes it 0600: ${first}`);
  }
});

const ROOT = process.getuid?.() === 0;

test("the copy's file must be new: another user's file in its place is refused, and one of this user's left by a killed run is replaced [sqlite]", { skip: !ROOT && 'needs root, to make a file owned by another user' }, async () => {
  // Opened plainly until 2026-11-29: another user of a shared folder made the file first, guessing the pid in its
  // name, and owned the backup written into it, every donor in it (a review, as `nobody`, in a folder of mode 777).
  assertBuilt();
  const dir = tempDir();
  const source = join(dir, 'almoner.db');
  const made = await almoner(`sqlite:${source}`, ['charity', 'create', '--name', 'Shared', '--email', 's@example.org']);
  assert.equal(made.code, 0, made.stderr);
  // A folder anyone can write to, without the sticky bit: refused outright (another user could swap the file
  // between its making and SQLite's opening it by name; a review of the O_EXCL fix did so).
  const open = join(dir, 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  await assert.rejects(backUpSqlite(source, join(open, 'backup.db')), /the folder .*open can be written by other users \(mode 0777\)/);
  assert.deepEqual(readdirSync(open), [], 'nothing written there');
  // Nor a private folder inside it: another user could rename it away and put one of theirs in its place (until 2026-11-29 taken).
  const inside = join(open, 'mine');
  mkdirSync(inside, { mode: 0o700 });
  await assert.rejects(backUpSqlite(source, join(inside, 'backup.db')), /the folder .*open, which holds .*mine, can be written by other users \(mode 0777\)/);
  assert.deepEqual(readdirSync(inside), [], 'nothing written there');
  // With the sticky bit, as /tmp: taken, but a file of another user's in the copy's place is refused.
  const shared = join(dir, 'shared');
  mkdirSync(shared);
  chmodSync(shared, 0o1777);
  const out = join(shared, 'backup.db');
  const planted = partialOf(out); // this process's name for its copy
  writeFileSync(planted, '');
  chownSync(planted, 65534, 65534); // nobody's
  chmodSync(planted, 0o666);
  await assert.rejects(backUpSqlite(source, out), /is already there and is not a file of this user's/);
  assert.equal(statSync(planted).uid, 65534, "the other user's file is left as it was");
  assert.equal(existsSync(out), false, 'no backup');
  // A copy of this user's own, left by a run killed with this pid: replaced, and the backup is this user's alone.
  rmSync(planted);
  writeFileSync(planted, 'half a copy', { mode: 0o644 });
  await backUpSqlite(source, out);
  const written = statSync(out);
  assert.deepEqual([written.uid, written.mode & 0o777], [0, 0o600]);
  assert.equal(existsSync(planted), false);
});

test("a restore or backup run as root into a folder another user owns (the service's state directory) is refused before anything is written, naming the user to run it as: root wrote there by names that user could point anywhere, and the database it left was root's, which the server, run as that user, refused (exit 2) [sqlite]", { skip: !ROOT && 'needs root, to own a folder as another user' }, async () => {
  assertBuilt();
  const dir = tempDir();
  chmodSync(dir, 0o755);
  const source = join(dir, 'source.db');
  assert.equal((await almoner(`sqlite:${source}`, ['charity', 'create', '--name', 'Served', '--email', 's@example.org'])).code, 0);
  const backup = join(dir, 'backup.db');
  await backUpSqlite(source, backup);
  chmodSync(backup, 0o644); // for nobody to read, below
  const state = join(dir, 'state');
  mkdirSync(state, { mode: 0o700 });
  chownSync(state, 65534, 65534); // nobody's, as /var/lib/almoner is almoner's
  const target = join(state, 'almoner.db');
  const asRoot = await almoner(`sqlite:${target}`, ['restore', backup]);
  assert.equal(asRoot.code, 1, asRoot.stderr);
  assert.match(asRoot.stderr, /the folder .*state is nobody's, so they could put a file of theirs where the copy is written: run the command as that user \(sudo -u nobody …\)/);
  // An owner with no name (a container's volume, owned by an id of the host's): sudo's form for an id.
  const volume = join(dir, 'volume');
  mkdirSync(volume, { mode: 0o700 });
  chownSync(volume, 54321, 54321);
  await assert.rejects(backUpSqlite(source, join(volume, 'b.db')), /is user 54321's, .*\(sudo -u '#54321' …\)/);
  assert.deepEqual(readdirSync(state), [], 'nothing written there, not even the mark');
  await assert.rejects(backUpSqlite(source, join(state, 'b.db')), /is nobody's/);
  // As nobody, as the README says: restored, and opened by nobody.
  const asNobody = await almoner(`sqlite:${target}`, ['restore', backup], {}, { uid: 65534, gid: 65534 });
  assert.equal(asNobody.code, 0, asNobody.stderr);
  const listed = await almoner(`sqlite:${target}`, ['charity', 'list'], {}, { uid: 65534, gid: 65534 });
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /Served/);
});

test('a folder reached through a link is looked at as it really is: one inside a folder others can write to is refused (it was taken through the link) [sqlite]', async () => {
  const dir = tempDir();
  const source = join(dir, 'source.db');
  assert.equal((await almoner(`sqlite:${source}`, ['charity', 'create', '--name', 'Linked', '--email', 'l@example.org'])).code, 0);
  const shared = join(dir, 'shared');
  mkdirSync(join(shared, 'almoner'), { recursive: true });
  chmodSync(shared, 0o777);
  chmodSync(join(shared, 'almoner'), 0o700);
  const lib = join(dir, 'lib');
  mkdirSync(lib);
  symlinkSync(join(shared, 'almoner'), join(lib, 'almoner'));
  await assert.rejects(backUpSqlite(source, join(lib, 'almoner', 'b.db')), /the folder .*shared, which holds .*lib\/almoner, can be written by other users/);
});
