// A claim or its files refused for the folder they would go to (it, or the folder above it, holds a
// claim's schedule) leave nothing behind: the README says "before anything is claimed or written".
// Until 2026-11-30 the --out folder, and any missing folder above it, was created first and left
// there, empty, by the refusal (a README audit).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { recordGiftAided } from '../support/app.js';
import { rawSql, SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt, operator } from '../support/cli.js';

test('a folder refused for the claim schedule above it is not created', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const { id, username } = await operator(database, SQLITE.name).charity('Refused');
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }], 30);
    const old = join(tempDir(), 'claims');
    mkdirSync(old);
    writeFileSync(join(old, 'claim-9-1.ods'), 'an old claim');

    const claim = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', join(old, 'next')]);
    assert.equal(claim.code, 2, claim.stderr);
    assert.ok(claim.stderr.includes(`already holds ${join('..', 'claim-9-1.ods')}, a claim's schedule`), claim.stderr);
    assert.ok(!existsSync(join(old, 'next')), 'the refused --out folder was created');
    assert.equal((await almoner(database.url, ['giftaid', 'claims', '--json'])).stdout.trim(), '[]', 'nothing claimed');

    const own = join(tempDir(), 'own');
    const prepared = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', own, '--json']);
    assert.equal(prepared.code, 0, prepared.stderr);
    const { claim: claimId } = JSON.parse(prepared.stdout) as { claim: number };
    const files = await almoner(database.url, ['giftaid', 'files', String(claimId), '--out', join(old, 'again')]);
    assert.equal(files.code, 2, files.stderr);
    assert.ok(!existsSync(join(old, 'again')), 'the refused --out folder was created');
  } finally {
    await database.drop();
  }
});

test("a claim's files refused for want of its rows leave no folder", async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const { id, username } = await operator(database, SQLITE.name).charity('Short');
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }, { donor_email: 'joe@example.org', donor_postcode: 'SW1A 1AA' }], 30);
    const prepared = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', join(tempDir(), 'own'), '--json']);
    assert.equal(prepared.code, 0, prepared.stderr);
    const { claim } = JSON.parse(prepared.stdout) as { claim: number };
    // A claim short of one of its rows, as a ledger from before migration 0014 could leave one.
    await rawSql(database.url, `delete from giftaid_claim_donations where claim_id = ${claim} and position = 2`);
    const out = join(tempDir(), 'again');
    const files = await almoner(database.url, ['giftaid', 'files', String(claim), '--out', out]);
    assert.equal(files.code, 2, files.stderr);
    assert.match(files.stderr, /holds 2 donations, of which this database has the rows of 1/);
    assert.ok(!existsSync(out), 'the refused --out folder was created');
  } finally {
    await database.drop();
  }
});
