// A Gift Aid donation more than four years old is left out of a claim made without --period-end,
// which is told that HMRC counts from the end of the accounting period and may still take it. One
// more than five years old is too late whatever the period (a period ends within a year of its
// donations), and until 2026-12-02 was told the same: every claim sent the operator to --period-end
// for it, retention's erased donations too, years after any claim could take them (a README walkthrough).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore } from '../../src/store/open.js';
import { signUpCharity } from '../../src/charities/signup.js';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

const SQLITE = BACKENDS.find((b) => b.name === 'sqlite')!;
const YEAR_DAYS = 365.25;

/** A charity on a new SQLite database with a gift-aided donation for each age in days, and what `giftaid claim` then says. */
async function claimWith(agesInDays: number[]) {
  const database = await SQLITE.createDatabase();
  const store = await openStore(parseDatabaseUrl(database.url));
  const { id, username } = await signUpCharity(store, { name: 'Old Gifts', email: 'o@example.org' })
    .then(({ charity }) => charity)
    .finally(() => store.close());
  for (const [n, days] of agesInDays.entries()) await recordGiftAided(database.url, id, [{ donor_email: `d${n}@example.org`, donor_first_name: `Donor${'abcdefgh'[n]}` }], Math.round(days));
  const out = join(tempDir(), 'claims');
  const run = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', out]);
  assert.equal(run.code, 0, run.stderr);
  return { run, out, drop: () => database.drop() };
}

test('giftaid claim: donations over five years old are too late whatever the accounting period, said apart from those over four years that --period-end may still claim', async () => {
  assertBuilt();
  const { run, out, drop } = await claimWith([10, 4 * YEAR_DAYS + 20, 6 * YEAR_DAYS]);
  try {
    assert.match(run.stdout, /^ {2}2 donations left out: they need attention before they can be claimed: \S+claim-1-needs-attention\.csv$/m);
    assert.match(run.stdout, /^ {2}All 2 are dated before \d\d\/\d\d\/\d{4}, more than four years ago\. HMRC takes a claim up to four years after the end of the accounting period a donation fell in: give your period's end \(--period-end MM-DD\) to claim those still in time\.$/m);
    assert.match(run.stdout, /^ {2}1 of them is dated before \d\d\/\d\d\/\d{4}, more than five years ago: too late to claim, whatever your accounting period\.$/m);
    const csv = readFileSync(join(out, 'claim-1-needs-attention.csv'), 'utf8');
    assert.match(csv, /dated more than 4 years before the claim date .*so it may still be in time/);
    assert.match(csv, /dated more than 5 years before the claim date \(before \d\d\/\d\d\/\d{4}\): too late to claim, whatever your accounting period/);
  } finally {
    await drop();
  }
});

test('giftaid claim: with only donations over five years old left out, no word of --period-end', async () => {
  assertBuilt();
  const { run, drop } = await claimWith([10, 7 * YEAR_DAYS]);
  try {
    assert.match(run.stdout, /^ {2}1 donation left out: it needs attention before it can be claimed: \S+$/m);
    assert.match(run.stdout, /^ {2}It is dated before \d\d\/\d\d\/\d{4}, more than five years ago: too late to claim, whatever your accounting period\.$/m);
    assert.doesNotMatch(run.stdout, /--period-end|may still/);
  } finally {
    await drop();
  }
});
