// A large claim's files written again: a scale review (2026-11-30) measured `giftaid files` of a
// claim of 630 files at 450 MB, every spreadsheet made, from every row of the claim read at once,
// before the first was written. Each file is now made from its own rows, read a page at a time, and
// written before the next is made. Scaled down here: a claim of 100,000 rows under a 24 MB heap (it
// ran out of heap before, at 60,000 too). And, as before, all the files or none: a disk that fills
// after the first few leaves none of them, nor any half-written, and the audit entry was made first.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { mountTmpfs, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { giftAidRows, readOds } from '../support/ods.js';

/**
 * `n` Gift Aid donations of 2025 of charity 1, each its own donor, and a submitted claim 1 of them
 * all, in the order of their days, inserted straight into the database as a claim records them.
 */
export function claimedAlready(path: string, n: number): void {
  const db = new BetterSqlite3(path);
  try {
    db.prepare(
      `with recursive i(k) as (select 1 union all select k + 1 from i where k < ?)
       insert into donations (charity_id, donor_first_name, donor_last_name, donor_email, donor_phone, donor_address, donor_city, donor_postcode, donor_ip,
         gift_aid, amount, amount_minor, payment_method, payment_confirmation_number, donation_type, donation_date, zakat_donation, recorded_at)
       select 1, 'Jane', 'Doe', 'donor' || k || '@example.org', '07700 900123', (k % 9000 + 1) || ' High Street', 'London',
         'SW' || (k % 20 + 1) || ' ' || (k % 9 + 1) || 'AA', '192.0.2.1', 1, '5.00', 500, 'card', 'ch_' || k, 'one-time',
         strftime('%Y-%m-%dT10:00:00.000000Z', '2025-01-01', '+' || (k % 300) || ' days'), 0,
         strftime('%Y-%m-%dT11:00:00.000000Z', '2025-01-01', '+' || (k % 300) || ' days') from i`,
    ).run(n);
    db.prepare(
      `insert into giftaid_claims (id, charity_id, status, up_to, claim_date, donation_count, total_minor, prepared_at, submitted_at, moves)
       values (1, 1, 'submitted', '2025-12-31', '2026-01-02', ?, ?, '2026-01-02T10:00:00.000Z', '2026-01-03T10:00:00.000Z', 1)`,
    ).run(n, n * 500);
    db.prepare(
      `insert into giftaid_claim_donations (claim_id, donation_id, position, live, first_name, last_name, house, postcode, donation_day, amount_minor)
       select 1, id, row_number() over (order by substr(donation_date, 1, 10), id), 1, 'Jane', 'Doe', id % 9000 + 1,
         'SW' || (id % 20 + 1) || ' ' || (id % 9 + 1) || 'AA', substr(donation_date, 1, 10), 500 from donations`,
    ).run();
  } finally {
    db.close();
  }
}

/** A charity, and a claim of `n` rows of its donations; the database's URL. */
async function databaseWithClaim(dir: string, n: number): Promise<string> {
  const path = join(dir, 'almoner.db');
  const url = `sqlite:${path}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Many Gifts', '--email', 'many@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
  claimedAlready(path, n);
  return url;
}

before(() => assertBuilt());

test('giftaid files of a claim of 100,000 rows runs in a 24 MB heap, each file its own rows in order', async () => {
  const n = 100_000;
  const url = await databaseWithClaim(tempDir(), n);
  const out = join(tempDir(), 'files');
  const run = await almoner(url, ['giftaid', 'files', '1', '--out', out, '--json'], { NODE_OPTIONS: '--max-old-space-size=24' }, { timeoutMs: 90_000 }); // a small heap's work, slowed several times over on a loaded machine
  assert.equal(run.code, 0, run.stderr.slice(-2000));
  const { files } = JSON.parse(run.stdout) as { files: string[] };
  assert.deepEqual(files, Array.from({ length: n / 1000 }, (_, i) => join(out, `claim-1-${i + 1}.ods`)));
  assert.deepEqual(readdirSync(out).filter((f) => f.endsWith('.ods')).length, n / 1000);
  // The first file's rows are the claim's first thousand, the last's its last: days in order, across the files.
  const first = giftAidRows(await readOds(files[0]!));
  const last = giftAidRows(await readOds(files.at(-1)!));
  assert.equal(first.length, 1000);
  assert.equal(last.length, 1000);
  assert.equal(first[0]!.date, '01/01/25');
  assert.equal(last.at(-1)!.date, '27/10/25'); // 299 days after 1 January
});

describe('giftaid files onto a disk that fills after the first few [sqlite]', () => {
  const dir = tempDir();
  const mountPoint = join(dir, 'small');
  const noMount = mountTmpfs(mountPoint, '64k');
  after(() => {
    if (!noMount) execFileSync('umount', ['-l', mountPoint]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('writes none of them, leaves no half-written file, and its audit entry was made before the first', { skip: noMount }, async () => {
    chmodSync(mountPoint, 0o700);
    const url = await databaseWithClaim(tempDir(), 10_000);
    const out = join(mountPoint, 'files');
    const run = await almoner(url, ['giftaid', 'files', '1', '--out', out]);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /ENOSPC/);
    assert.ok(existsSync(out));
    assert.deepEqual(readdirSync(out).filter((f) => f.includes('.ods')), [], 'no file, whole or partial');
    const audit = await almoner(url, ['audit', '--json']);
    assert.match(audit.stdout, /"action":"giftaid files","target":"claim 1"/);
  });
});
