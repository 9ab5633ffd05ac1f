// A claim recorded whose files could not all be written (a file in the way, a full disk): the command
// says which were, how to write the rest, and, when donations were left out needing attention, how to list those
// too (`giftaid files` writes the claim's spreadsheets only; the list was lost before 2026-11-28).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const SQLITE = BACKENDS.find((b) => b.name === 'sqlite')!;

test('a claim whose files could not all be written says which were, and how to list the donations left out', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Recovery', '--email', 'r@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { id, username } = JSON.parse(made.stdout) as { id: number; username: string };
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }, { donor_email: 'jane@example.org', donor_postcode: '' }], 30);
    const out = join(tempDir(), 'claims');
    mkdirSync(out);
    // A folder where the claim's needs-attention file goes: the claim is recorded, then its files cannot all be written.
    // (Until 2026-11-29 this test put a claim-1-1.ods in the way; a folder holding any claim's schedule is now refused
    // before anything is claimed.)
    mkdirSync(join(out, 'claim-1-needs-attention.csv'));
    const run = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', out]);
    assert.equal(run.code, 1, run.stderr);
    // It says which were written (until 2026-11-29 only that they "could not all be written"; a review): the schedule was, whole.
    assert.match(run.stderr, new RegExp(`claim 1 was prepared and recorded, and its schedule was written \\(${join(out, 'claim-1-1.ods').replaceAll('/', '\\/')}\\), but not its list of the donations left out: `));
    assert.ok(existsSync(join(out, 'claim-1-1.ods')));
    const said = /To see them, list the 1 donation left out \(needing attention\) with: (bin\/almoner giftaid schedule .*) \(a preview: it claims nothing\)/.exec(run.stderr);
    assert.ok(said, run.stderr);
    // The command it gives, run as given: the list is written again.
    const again = tempDir();
    const args = said[1]!.replace(/^bin\/almoner /, '').replace(/DIR$/, again).split(' ');
    const listed = await almoner(database.url, args);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(existsSync(join(again, `needs-attention-${username}.csv`)), listed.stdout);
    assert.match(readFileSync(join(again, `needs-attention-${username}.csv`), 'utf8'), /jane@example\.org/);
  } finally {
    await database.drop();
  }
});

test('a claim recorded whose command was stopped before its files: the next claim names it and how to write them, and a half-written file left behind is not in the way', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Stopped', '--email', 's@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { id, username } = JSON.parse(made.stdout) as { id: number; username: string };
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org' }], 30);
    // As after a SIGKILL between the claim's commit and its files: the claim is recorded, the folder holds only a partial file.
    const lost = tempDir();
    assert.equal((await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', lost])).code, 0);
    const out = join(tempDir(), 'claims');
    mkdirSync(out);
    writeFileSync(join(out, '.claim-1-1.ods.partial'), 'half a file');
    const again = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', out]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /Nothing to claim/);
    assert.match(again.stdout, /Claim 1 \(1 donation, £25\.00\) was prepared on \d\d\/\d\d\/\d{4} and is not yet marked submitted: if you do not have its files, write them with bin\/almoner giftaid files 1 --out DIR/);
    const files = await almoner(database.url, ['giftaid', 'files', '1', '--out', out]);
    assert.equal(files.code, 0, files.stderr); // it was EEXIST on the partial file, exit 1
    assert.ok(existsSync(join(out, 'claim-1-1.ods')));
  } finally {
    await database.drop();
  }
});
