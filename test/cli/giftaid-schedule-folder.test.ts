// `giftaid schedule`, the preview, writes donors' names and addresses into its --out folder
// (preview-N.ods, needs-attention-USERNAME.csv) as `giftaid claim` and `giftaid files` do, and a
// claim that claims nothing writes the same needs-attention-USERNAME.csv. Until 2026-12-01 it took
// any folder this user could write to, one other users could write to as well (mode 777 or 770, a
// sticky one as /tmp: another user's link or file put there first), and held no folder: a preview
// and a claim into one folder at once could each replace the other's list (a review). It is now
// refused such a folder with claim's words (refuseSharedOut), and holds the folder as they do
// (holdFolder, .almoner-giftaid.lock): the second of two at once is refused, exit 2, nothing written
// and nothing recorded. The test holds the folder as a command in progress does (an exclusive
// SQLite lock on the file in it, as test/cli/giftaid-same-folder.test.ts), so nothing is left to chance.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { recordGiftAided } from '../support/app.js';
import { SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt, operator } from '../support/cli.js';

test('giftaid schedule refuses an --out folder others can write to, and one another giftaid command holds: nothing written, nothing recorded', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const { id, username } = await operator(database, SQLITE.name).charity('Previewfolder');
    // One to claim, one left out needing attention (no postcode): both of the preview's files are written.
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }, { donor_email: 'ann@example.org', donor_postcode: '' }], 30);
    const schedule = (out: string) => ['giftaid', 'schedule', '--charity', username, '--from', '2000-01-01', '--to', '2099-12-31', '--out', out];
    const previews = async () => {
      const trail = await almoner(database.url, ['audit', '--json']); // one entry a line
      assert.equal(trail.code, 0, trail.stderr);
      return trail.stdout.split('\n').filter(Boolean).filter((line) => (JSON.parse(line) as { action: string }).action === 'giftaid schedule').length;
    };

    const elsewhere = tempDir(); // another folder of the operator's: nothing is to be made in it
    for (const [mode, said] of [
      [0o777, /--out .* cannot be used: the folder .* can be written by other users \(mode 0777\), .*sticky bit or not/],
      [0o770, /can be written by other users \(mode 0770\)/],
      [0o1777, /can be written by other users \(mode 1777\)/], // sticky, as /tmp: others may not replace this command's files, but may put theirs first
      [0o700, /holds \.almoner-giftaid\.lock, which is a link: this command does not open it/], // this user's alone: a link there all the same is not followed
    ] as const) {
      const out = join(tempDir(), 'shared');
      mkdirSync(out);
      chmodSync(out, mode);
      const target = join(elsewhere, `made-by-the-lock-${mode.toString(8)}`);
      symlinkSync(target, join(out, '.almoner-giftaid.lock'));
      const refused = await almoner(database.url, schedule(out));
      assert.equal(refused.code, 2, `${mode.toString(8)}: ${refused.code} ${refused.stderr}`);
      assert.match(refused.stderr, said, mode.toString(8));
      assert.equal(existsSync(target), false, `${mode.toString(8)}: nothing made where the link points`);
      assert.deepEqual(readdirSync(out), ['.almoner-giftaid.lock'], `${mode.toString(8)}: nothing written there`);
    }
    // A folder not made yet, in one others can write to: refused before it is made.
    const open = join(tempDir(), 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const inside = await almoner(database.url, schedule(join(open, 'preview')));
    assert.equal(inside.code, 2, inside.stderr);
    assert.match(inside.stderr, /can be written by other users/);
    assert.deepEqual(readdirSync(open), [], 'no folder made');
    assert.equal(await previews(), 0, 'no preview recorded');

    // Another giftaid command (a claim, a files, a preview) writing to the folder now: refused at once.
    const out = join(tempDir(), 'preview');
    mkdirSync(out, { mode: 0o700 });
    const other = new Database(join(out, '.almoner-giftaid.lock'));
    other.exec('BEGIN EXCLUSIVE');
    try {
      const refused = await almoner(database.url, schedule(out));
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /another giftaid claim, files or schedule is writing to --out .* now: wait for it to end/);
      assert.deepEqual(readdirSync(out).filter((name) => !name.startsWith('.almoner-giftaid.lock')), [], 'nothing written');
      assert.equal(await previews(), 0, 'no preview recorded');
    } finally {
      other.close();
    }

    // Once it has ended, the folder is this one's, and the file it is held by goes with the command.
    const previewed = await almoner(database.url, [...schedule(out), '--json']);
    assert.equal(previewed.code, 0, previewed.stderr);
    assert.deepEqual(readdirSync(out).sort(), ['needs-attention-' + username + '.csv', `preview-${username}-1.ods`].sort());
    assert.equal(await previews(), 1);
  } finally {
    await database.drop();
  }
});
