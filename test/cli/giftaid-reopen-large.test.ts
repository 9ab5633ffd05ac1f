// `giftaid reopen` of a large claim: the look for other records of its gifts in other live claims
// (claimsHoldingTwinsOf) spread the claim's dates into Math.min's arguments, which overflowed the
// stack past about 125,000 donations ("Maximum call stack size exceeded", exit 1: the claim could
// not be reopened), and read every donor's house, 12 s for 100,000 with SQLite's write lock held,
// where creates were answered 503 (a review of 2026-11-30's changes).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { recordGiftAided } from '../support/app.js';
import { SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

describe('giftaid reopen of a claim of 130,000 donations', () => {
  test('reopens it (the check for its gifts in other claims overflowed the stack)', async () => {
    assertBuilt();
    const database = await SQLITE.createDatabase();
    try {
      const made = await almoner(database.url, ['charity', 'create', '--name', 'Large Claims', '--email', 'lc@example.org', '--json']);
      assert.equal(made.code, 0, made.stderr);
      const { id: charityId, username } = JSON.parse(made.stdout) as { id: number; username: string };
      await recordGiftAided(database.url, charityId, [{ donor_email: 'first@example.com' }]);
      const claimed = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', tempDir(), '--json']);
      assert.equal(claimed.code, 0, claimed.stderr);
      // The claim grown to 130,000 donations in the file itself (prepared through the CLI it takes minutes), each its own donor.
      const db = new Database(database.url.slice('sqlite:'.length));
      try {
        const donation = db.prepare('select * from donations where id = 1').get() as Record<string, unknown>;
        const row = db.prepare('select * from giftaid_claim_donations where claim_id = 1').get() as Record<string, unknown>;
        const columns = Object.keys(donation).filter((c) => c !== 'id');
        const addDonation = db.prepare(`insert into donations (${columns.join(', ')}) values (${columns.map((c) => `@${c}`).join(', ')})`);
        const addRow = db.prepare(`insert into giftaid_claim_donations (${Object.keys(row).join(', ')}) values (${Object.keys(row).map((c) => `@${c}`).join(', ')})`);
        db.transaction(() => {
          for (let i = 2; i <= 130_000; i++) {
            const id = addDonation.run({ ...donation, donor_first_name: `Donor${i}`, donor_email: `donor${i}@example.com` }).lastInsertRowid;
            addRow.run({ ...row, donation_id: id, position: i, first_name: `Donor${i}` });
          }
          db.prepare('update giftaid_claims set donation_count = 130000, total_minor = total_minor * 130000 where id = 1').run();
        })();
      } finally {
        db.close();
      }
      assert.equal((await almoner(database.url, ['giftaid', 'mark', '1', 'rejected'])).code, 0);
      const reopen = await almoner(database.url, ['giftaid', 'reopen', '1']);
      assert.equal(reopen.code, 0, reopen.stderr);
      assert.match(reopen.stdout, /Claim 1 reopened: prepared again, with its 130,000 donations/);
    } finally {
      await database.drop();
    }
  });
});
