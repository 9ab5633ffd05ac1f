// Two `giftaid claim`s into one --out folder at the same time (overlapping timers, two operators, a
// script run again while its first run still goes). Until 2026-11-30 each looked, found the folder
// empty, and recorded its claim; the second was then refused its files (exit 1), its donations held
// by a claim whose schedule it had not written (a review: in 19 rounds of 20, on SQLite and on
// PostgreSQL). A claim now holds its folder while it runs, and another is refused at once, nothing
// recorded. Here the test holds the folder as a claim in progress does (an exclusive SQLite lock on
// the file in it), so nothing is left to chance; and the folder made meanwhile by another command
// (EEXIST, said until then to be a folder that "cannot be created") is this command's too.
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { recordGiftAided } from '../support/app.js';
import { SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt, operator } from '../support/cli.js';

test('a giftaid claim into a folder another claim is writing to is refused at once, nothing recorded', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const { id, username } = await operator(database, SQLITE.name).charity('Samefolder');
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }, { donor_email: 'joe@example.org', donor_postcode: 'SW1A 1AA' }], 30);
    const first = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', join(tempDir(), 'first'), '--json']);
    assert.equal(first.code, 0, first.stderr);
    const { claim: firstClaim } = JSON.parse(first.stdout) as { claim: number };
    await recordGiftAided(database.url, id, [{ donor_email: 'ann@example.org', donor_postcode: 'SW1A 1AA' }], 20);
    const out = join(tempDir(), 'claims');
    // The other claim, running: its folder made, and held (src/cli/giftaid.ts holdFolder).
    mkdirSync(out, { mode: 0o700 });
    const other = new Database(join(out, '.almoner-giftaid.lock'));
    other.exec('BEGIN EXCLUSIVE');
    try {
      for (const command of [['giftaid', 'claim', '--charity', username, '--out', out], ['giftaid', 'files', String(firstClaim), '--out', out]]) {
        const refused = await almoner(database.url, command);
        assert.equal(refused.code, 2, `${command[1]}: ${refused.stderr}`);
        assert.match(refused.stderr, /another giftaid claim, files or schedule is writing to --out .* now: wait for it to end/);
      }
      const claims = JSON.parse((await almoner(database.url, ['giftaid', 'claims', '--json'])).stdout) as Array<{ id: number }>;
      assert.deepEqual(claims.map((c) => c.id), [firstClaim], 'nothing claimed');
      assert.deepEqual(readdirSync(out).filter((name) => !name.startsWith('.almoner-giftaid.lock')), [], 'nothing written');
    } finally {
      other.close();
    }

    // Once it has ended, the folder is this one's (and the file it was held by is gone with the command).
    const claimed = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', out, '--json']);
    assert.equal(claimed.code, 0, claimed.stderr);
    const { claim } = JSON.parse(claimed.stdout) as { claim: number };
    assert.deepEqual(readdirSync(out), [`claim-${claim}-1.ods`], 'its schedule alone: the file it was held by is removed as the command ends');
  } finally {
    await database.drop();
  }
});
