// A large first claim: a scale review (2026-11-30) measured `giftaid claim` of 630,000 eligible
// donations at 1.6 to 1.7 GB: every donation kept whole (every column) until its twins were found,
// and each row's insert kept as Kysely's compiled tree of nodes until the claim was recorded. On a
// machine of 2 GB it ran out of memory. A claim now assesses its donations a batch at a time and keeps
// of each claimable one its schedule row and what tells a gift recorded twice, and each insert as its
// text and values alone. Scaled down here: 50,000 donations under a 64 MB heap (the old claim ran out
// of heap at 50,000, and completed at 30,000), one of them a gift recorded again whose first record is
// in another of the claim's batches, set aside and listed as before.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { REASONS } from '../../src/giftaid/schedule.js';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

/**
 * `n` Gift Aid donations of 2025, each its own donor, inserted in one statement, and then donation
 * 4,999 recorded again (another id, n + 1: the same donor, day and amount, no payment reference).
 */
function giftAided(path: string, n: number): void {
  const db = new BetterSqlite3(path);
  try {
    db.prepare(
      `with recursive i(k) as (select 1 union all select k + 1 from i where k < ?)
       insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, donor_phone, donor_address, donor_city, donor_postcode, donor_ip,
         gift_aid, amount, amount_minor, payment_method, payment_confirmation_number, donation_type, donation_date, zakat_donation, recorded_at)
       select 1, 'Jane', 'Doe', 'donor' || k || '@example.org', '07700 900123', (k % 9000 + 1) || ' High Street', 'London',
         'SW' || (k % 20 + 1) || ' ' || (k % 9 + 1) || 'AA', '192.0.2.1', 1, '5.00', 500, 'card', case when k = 4999 then null else 'ch_' || k end, 'one-time',
         strftime('%Y-%m-%dT10:00:00.000000Z', '2025-01-01', '+' || (k % 300) || ' days'), 0,
         strftime('%Y-%m-%dT11:00:00.000000Z', '2025-01-01', '+' || (k % 300) || ' days') from i`,
    ).run(n);
    db.prepare(
      `insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, donor_phone, donor_address, donor_city, donor_postcode, donor_ip,
         gift_aid, amount, amount_minor, payment_method, payment_confirmation_number, donation_type, donation_date, zakat_donation, recorded_at)
       select charity_id, donor_first_name, donor_last_name, donor_email, donor_phone, donor_address, donor_city, donor_postcode, donor_ip,
         gift_aid, amount, amount_minor, payment_method, payment_confirmation_number, donation_type, donation_date, zakat_donation,
         replace(recorded_at, 'T11:', 'T12:') from donations where id = 4999`,
    ).run();
  } finally {
    db.close();
  }
}

before(() => assertBuilt());

test('giftaid claim of 50,000 donations runs in a 64 MB heap, and sets aside a gift recorded again in another batch', async () => {
  const n = 50_000;
  const path = join(tempDir(), 'almoner.db');
  const url = `sqlite:${path}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Many Gifts', '--email', 'many@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
  const { username } = JSON.parse(made.stdout) as { username: string };
  giftAided(path, n);
  const out = join(tempDir(), 'claim');
  const run = await almoner(url, ['giftaid', 'claim', '--charity', username, '--out', out, '--to', '2025-12-31', '--json'], { NODE_OPTIONS: '--max-old-space-size=64' }, { timeoutMs: 90_000 }); // 8 s alone; past 20 s on Node 24 beside the rest of the suite
  assert.equal(run.code, 0, run.stderr.slice(-2000));
  const claim = JSON.parse(run.stdout) as { claim: number; files: string[]; needs_attention: string | null; donations: number; total: string };
  assert.equal(claim.donations, n, 'every donation but the one recorded again');
  assert.equal(claim.total, '250000.00');
  assert.equal(claim.files.length, n / 1000);
  assert.deepEqual(readdirSync(out).filter((f) => f.endsWith('.ods')).length, n / 1000);
  const attention = readFileSync(join(out, 'claim-1-needs-attention.csv'), 'utf8').trimEnd().split('\r\n');
  assert.equal(attention.length, 2, 'the header and the gift recorded again');
  assert.equal(attention[1], `50001,Jane,Doe,donor4999@example.org,5000 High Street,London,SW20 5AA,2025-07-19,5.00,"${REASONS.twin(4999)}"`);
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    assert.deepEqual(db.prepare('select count(*) as n, min(donation_id) as first, max(donation_id) as last from giftaid_claim_donations where claim_id = 1').get(), { n, first: 1, last: n });
  } finally {
    db.close();
  }
});
