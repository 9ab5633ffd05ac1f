// The file a `giftaid claim` or `giftaid files` holds its --out folder by (.almoner-giftaid.lock,
// src/cli/giftaid.ts holdFolder) is opened by SQLite by name, which follows a link and creates what
// the link names. Until a security review (2026-11-30) --out was any folder this user could write to:
// in one other users could write to too (a team's shared folder of mode 777 or 770, a sticky one as
// /tmp), one of them could put a link there under that name, and the operator's command (root's, say)
// created an empty file wherever the link pointed (an /etc/nologin, say), or locked a SQLite database
// it named (Almoner's own); and SQLite takes a -journal found beside it for a hot journal to play
// back (not tried here). Such a folder is now refused, as backup's is
// (refuseSharedFolder), nothing recorded; and a lock that is a link is refused in a folder of one's own.
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt, operator } from '../support/cli.js';

test('giftaid claim and files refuse an --out folder others can write to, and a lock that is a link: nothing made where it points, nothing recorded', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const { id, username } = await operator(database, SQLITE.name).charity('Linkedlock');
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }], 30);
    const firstOut = join(tempDir(), 'first');
    const first = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', firstOut, '--json']);
    assert.equal(first.code, 0, first.stderr);
    const { claim: firstClaim } = JSON.parse(first.stdout) as { claim: number };
    await recordGiftAided(database.url, id, [{ donor_email: 'ann@example.org', donor_postcode: 'SW1A 1AA' }], 20);
    const claims = async () => (JSON.parse((await almoner(database.url, ['giftaid', 'claims', '--json'])).stdout) as Array<{ id: number }>).map((c) => c.id);

    const elsewhere = tempDir(); // another folder of the operator's: nothing is to be made in it
    for (const [mode, said] of [
      [0o777, /can be written by other users .*sticky bit or not: give the claim a folder only this user can write to/],
      [0o770, /can be written by other users/],
      [0o1777, /can be written by other users/], // sticky, as /tmp: others may not replace this command's files, but may put theirs first
      [0o700, /is a link|not a file of this user's/], // the folder is this user's alone: a link there all the same is not followed
    ] as const) {
      const out = join(tempDir(), 'shared');
      mkdirSync(out);
      chmodSync(out, mode);
      const target = join(elsewhere, `made-by-the-lock-${mode.toString(8)}`);
      symlinkSync(target, join(out, '.almoner-giftaid.lock'));
      for (const command of [['giftaid', 'claim', '--charity', username, '--out', out], ['giftaid', 'files', String(firstClaim), '--out', out]]) {
        const refused = await almoner(database.url, command);
        assert.equal(refused.code, 2, `${mode.toString(8)} ${command[1]}: ${refused.code} ${refused.stderr}`);
        assert.match(refused.stderr, said, `${mode.toString(8)} ${command[1]}`);
        assert.equal(existsSync(target), false, `${mode.toString(8)} ${command[1]}: nothing made where the link points`);
        assert.deepEqual(readdirSync(out), ['.almoner-giftaid.lock'], `${mode.toString(8)} ${command[1]}: nothing written there`);
      }
      assert.deepEqual(await claims(), [firstClaim], `${mode.toString(8)}: nothing claimed`);
    }

    // A folder like /tmp, sticky and open to all, with other runs' claims in its folders: refused for what it is, not with a
    // list of those schedules, which did not say why the folder itself will not do (a README walkthrough, 2026-12-02).
    const likeTmp = join(tempDir(), 'like-tmp');
    mkdirSync(join(likeTmp, 'another-run'), { recursive: true });
    copyFileSync(join(firstOut, `claim-${firstClaim}-1.ods`), join(likeTmp, 'another-run', `claim-${firstClaim}-1.ods`));
    chmodSync(likeTmp, 0o1777);
    for (const command of [['giftaid', 'claim', '--charity', username, '--out', likeTmp], ['giftaid', 'files', String(firstClaim), '--out', likeTmp]]) {
      const refused = await almoner(database.url, command);
      assert.equal(refused.code, 2, `${command[1]}: ${refused.code} ${refused.stderr}`);
      assert.match(refused.stderr, /--out .*like-tmp cannot be used: the folder .*like-tmp can be written by other users \(mode 1777\)/, command[1]);
      assert.doesNotMatch(refused.stderr, /already holds/, command[1]);
    }
    assert.deepEqual(await claims(), [firstClaim], 'nothing claimed');

    // A folder of this user's alone, as before: claimed, and only the schedule left in it.
    const own = join(tempDir(), 'own');
    const claimed = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', own, '--json']);
    assert.equal(claimed.code, 0, claimed.stderr);
    const { claim } = JSON.parse(claimed.stdout) as { claim: number };
    assert.deepEqual(readdirSync(own), [`claim-${claim}-1.ods`]);
  } finally {
    await database.drop();
  }
});
