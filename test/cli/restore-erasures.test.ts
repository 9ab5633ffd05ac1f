// A donor's erasure outlives restores: one made after a backup is made again when that backup is
// restored, and recorded again even when the backup holds nothing of that donor, so that the next
// restore (of a later backup that does hold them) erases them too. Until 2026-11-29 an erasure that
// found nothing to erase in the restored database left no entry: restoring the wrong backup, then the
// right one, brought the erased donor back whole, and the trail no longer said they had asked.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { validateDonation } from '../../src/donations/validate.js';
import { donorReference } from '../../src/store/donation-query.js';
import { openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { rawSql, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

interface Entry {
  action: string;
  target: string;
  summary: Record<string, unknown>;
}

async function record(url: string, first: string, email: string, date?: string): Promise<void> {
  const store = await openStore(parseDatabaseUrl(url));
  try {
    const [charity] = await store.listCharities();
    const v = validateDonation(exampleDonation({ donor_first_name: first, donor_last_name: 'Lee', donor_email: email, donor_address: '7 Bridge Street', gift_aid: 'no', ...(date && { donation_date: date }) }));
    assert.ok(v.ok);
    const { id } = await store.recordDonation(charity!.id, v.donation);
    // Recorded on its day, as these old gifts were (retention counts from no more than a year before a gift was recorded).
    await rawSql(url, `update donations set recorded_at = donation_date where id = ${id}`);
  } finally {
    await store.close();
  }
}

async function trail(url: string): Promise<Entry[]> {
  const run = await almoner(url, ['audit', '--json']);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout.trim().split('\n').map((line) => JSON.parse(line) as Entry);
}


describe("a donor's erasure outlives restores [sqlite]", () => {
  let url: string;
  let dir: string;
  const rows = () => {
    const db = new BetterSqlite3(join(dir, 'almoner.db'), { readonly: true });
    try {
      return db.prepare('select donor_first_name, donor_email from donations order by id').all();
    } finally {
      db.close();
    }
  };
  before(async () => {
    assertBuilt();
    dir = tempDir();
    url = `sqlite:${join(dir, 'almoner.db')}`;
    const made = await almoner(url, ['charity', 'create', '--name', 'Restores', '--email', 'r@example.org']);
    assert.equal(made.code, 0, made.stderr);
  });

  test('the wrong backup restored, then the right one: the donor erased after both stays erased, and each restore records the erasure', async () => {
    await record(url, 'Bob', 'bob@example.org');
    const wrong = join(dir, 'wrong.db'); // before Ann gave
    assert.equal((await almoner(url, ['backup', '--out', wrong])).code, 0);
    await record(url, 'Ann', 'ann@example.org');
    const right = join(dir, 'right.db'); // after Ann gave, before she asked to be erased
    assert.equal((await almoner(url, ['backup', '--out', right])).code, 0);
    const erased = await almoner(url, ['donor', 'erase', '--email', 'ann@example.org']);
    assert.equal(erased.code, 0, erased.stderr);
    const original = (await trail(url)).filter((e) => e.action === 'donor erase');
    assert.equal(original.length, 1);

    const first = await almoner(url, ['restore', wrong, '--replace']);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /erased again what the replaced database erased after the backup: 1 donor erasure \(0 donations\)/);
    const again = (await trail(url)).filter((e) => e.action === 'donor erase');
    assert.equal(again.length, 1, 'the erasure is in the trail after a restore of a backup that holds none of the donor');
    assert.equal(again[0]!.target, donorReference('ann@example.org'));
    assert.equal(again[0]!.summary.donations, 0);
    assert.equal(typeof again[0]!.summary.again_of, 'string');

    const second = await almoner(url, ['restore', right, '--replace']);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /erased again what the replaced database erased after the backup: 1 donor erasure \(1 donation\)/);
    assert.deepEqual(rows(), [
      { donor_first_name: 'Bob', donor_email: 'bob@example.org' },
      { donor_first_name: null, donor_email: 'erased@erased.invalid' }, // Ann, erased again
    ]);
    const last = (await trail(url)).filter((e) => e.action === 'donor erase');
    assert.equal(last.length, 1, 'once in the trail: the right backup holds none, the repeat is recorded');
    assert.equal(last[0]!.summary.again_of, again[0]!.summary.again_of, 'each repeat names the first erasure');

    // Restored once more, the right backup is erased again, once: the repeat counts as the one it repeats.
    const third = await almoner(url, ['restore', right, '--replace']);
    assert.equal(third.code, 0, third.stderr);
    assert.match(third.stdout, /1 donor erasure \(1 donation\)/);
    assert.equal((await trail(url)).filter((e) => e.action === 'donor erase').length, 1);

    // Each restore finished: keep-replaced, run when unsure, says there is nothing to do (it was exit 2).
    const unsure = await almoner(url, ['keep-replaced']);
    assert.equal(unsure.code, 0, unsure.stderr);
    assert.match(unsure.stdout, /^nothing to do: no restore of .*almoner\.db is unfinished/);
  });

  test('retention runs with two periods after the backup: each is made again as of its day, so what the shorter one erased stays erased', async () => {
    // Until 2026-11-29 only the last run was made again: a one-off run with 3 years, then the usual 6, and a
    // restore brought back what the 3 years' run had erased (Olive's donation, and Bob's of 2021-02-25 above).
    await record(url, 'Olive', 'old@example.org', '01-01-2021');
    const backup = join(dir, 'before-retention.db');
    assert.equal((await almoner(url, ['backup', '--out', backup])).code, 0);
    const short = await almoner(url, ['retention', 'apply'], { RETENTION_YEARS: '3' });
    assert.equal(short.code, 0, short.stderr);
    assert.match(short.stdout, /\(restores-\w+, 2021-01-01, no Gift Aid\): erased donor first name/);
    assert.equal((await almoner(url, ['retention', 'apply'], { RETENTION_YEARS: '6' })).code, 0);
    const olive = () => (rows() as Array<{ donor_first_name: string | null; donor_email: string }>).filter((r) => r.donor_first_name === 'Olive' || r.donor_email === 'old@example.org');
    assert.deepEqual(olive(), [], 'erased by the 3 years\' run');

    const restored = await almoner(url, ['restore', backup, '--replace']);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stdout, /, and retention with 3 years as of \d{4}-\d{2}-\d{2} \(2 donations\), and retention with 6 years as of \d{4}-\d{2}-\d{2} \(0 donations\)/);
    assert.deepEqual(olive(), [], 'erased again');
  });
});
