// The audit trail (issue 14, item 4): every operator action leaves one entry, in the transaction
// of the change it records, with the operating-system user and host and never a secret; the
// database refuses to change or delete an entry; `bin/almoner audit` reads it. Without the trail
// every test here fails (no audit command, no audit_log table).
import assert from 'node:assert/strict';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { signUpCharity } from '../../src/charities/signup.js';
import { validateDonation } from '../../src/donations/validate.js';
import { entryKey, erasuresAfter, heldBy, type AuditRecord } from '../../src/store/audit.js';
import { openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { BACKENDS, rawSql, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

/** `audit --json` prints the store's records, one per line. */
type Entry = AuditRecord;

async function trail(url: string, args: string[] = []): Promise<Entry[]> {
  const run = await almoner(url, ['audit', '--json', ...args]);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Entry);
}

for (const backend of BACKENDS) {
  describe(`the audit trail [${backend.name}]`, () => {
    let database: TestDatabase;

    before(async () => {
      assertBuilt();
      database = await backend.createDatabase();
    });
    after(async () => {
      await database?.drop();
    });

    test('each operator action leaves one entry, in order, with who and where, and never a password', async () => {
      const made = await almoner(database.url, ['charity', 'create', '--name', 'Audit Hands', '--email', 'a@example.org', '--json']);
      assert.equal(made.code, 0, made.stderr);
      const { username, password, id } = JSON.parse(made.stdout) as { username: string; password: string; id: number };
      const rotated = await almoner(database.url, ['charity', 'rotate', username, '--json']);
      const newPassword = (JSON.parse(rotated.stdout) as { password: string }).password;
      assert.equal((await almoner(database.url, ['charity', 'disable', username])).code, 0);
      const again = await almoner(database.url, ['charity', 'disable', username]); // no change, no entry
      assert.equal(again.code, 0);
      assert.equal(again.stdout, `${username} was already disabled: nothing changed.\n`);
      assert.equal((await almoner(database.url, ['charity', 'enable', username])).code, 0);
      assert.match((await almoner(database.url, ['charity', 'enable', username])).stdout, /was already enabled: nothing changed/); // no entry
      assert.equal((await almoner(database.url, ['charity', 'rotate', 'no-such-charity'])).code, 2); // no change, no entry
      assert.equal((await almoner(database.url, ['donations', 'export', '--charity', username, '--format', 'jsonl', '--from', '2026-01-01'])).code, 0);

      // Gift Aid: a claim prepared and marked, through the ledger the giftaid commands use.
      const store = await openStore(database.location);
      try {
        const v = validateDonation(exampleDonation({ gift_aid: 'yes' }));
        assert.ok(v.ok);
        const donation = await store.recordDonation(id, v.donation);
        const row = { donationId: donation.id, firstName: 'Jane', lastName: 'Doe', houseNameOrNumber: '12', postcode: 'SW1A 1AA', donationDay: '2026-01-02', amountMinor: 2500 };
        const claim = await store.claims.prepare({ charityId: id, upTo: '2026-11-01', claimDate: '2026-11-24', rows: [row], needsAttention: 0 });
        await store.claims.mark(claim.id, 'submitted');
        await store.claims.mark(claim.id, 'submitted'); // no change, no entry
        // One that needs attention (no postcode): the files below write it out, names and address.
        const unfit = validateDonation(exampleDonation({ gift_aid: 'yes', donor_postcode: null, donation_date: '02-01-2026' }));
        assert.ok(unfit.ok);
        await store.recordDonation(id, unfit.donation);
      } finally {
        await store.close();
      }
      // The commands that write donors' names and addresses to files, whether or not they claim.
      const out = tempDir();
      assert.equal((await almoner(database.url, ['giftaid', 'files', '1', '--out', join(out, 'files')])).code, 0);
      assert.equal((await almoner(database.url, ['giftaid', 'files', '1', '--out', join(out, 'files')])).code, 2); // the files are there: refused, nothing taken out, no entry
      assert.equal((await almoner(database.url, ['giftaid', 'schedule', '--charity', username, '--from', '2026-01-01', '--to', '2026-11-01', '--out', join(out, 'preview')])).code, 0);
      assert.equal((await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--to', '2026-11-01', '--period-end', '04-05', '--out', join(out, 'claim')])).code, 0); // claims nothing

      const entries = await trail(database.url);
      assert.deepEqual(
        entries.map((e) => `${e.action} ${e.target}`),
        [
          `charity create ${username}`,
          `charity rotate ${username}`,
          `charity disable ${username}`,
          `charity enable ${username}`,
          `donations export ${username}`,
          'giftaid claim claim 1',
          'giftaid mark claim 1',
          'giftaid files claim 1',
          `giftaid schedule ${username}`,
          `giftaid claim ${username}`,
        ],
      );
      const me = userInfo().username;
      for (const e of entries) {
        assert.equal(e.os_user, me);
        assert.equal(e.host, hostname());
        assert.match(e.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      }
      assert.deepEqual(entries[4]!.summary, { format: 'jsonl', from: '2026-01-01T00:00:00.000000Z', to: null });
      assert.deepEqual(entries[5]!.summary, { charity_id: id, up_to: '2026-11-01', donations: 1, total_minor: 2500, needs_attention: 0, period_end: null });
      assert.deepEqual(entries[6]!.summary, { status: 'submitted' });
      assert.deepEqual(entries[7]!.summary, { status: 'submitted', donations: 1 });
      assert.deepEqual(entries[8]!.summary, { from: '2026-01-01', to: '2026-11-01', donations: 0, needs_attention: 1, period_end: null });
      assert.deepEqual(entries[9]!.summary, { charity_id: id, up_to: '2026-11-01', donations: 0, total_minor: 0, needs_attention: 1, period_end: '04-05' });
      const text = (await almoner(database.url, ['audit'])).stdout + JSON.stringify(entries);
      for (const secret of [password, newPassword, 'Jane', 'SW1A 1AA', 'jane.doe@example.com']) {
        assert.ok(!text.includes(secret), `the audit trail shows ${secret}`);
      }
      assert.deepEqual(await trail(database.url, ['--since', '2999-01-01']), []);
      assert.equal((await almoner(database.url, ['audit', '--since', '2999-01-01'])).stdout.trim(), 'No operator actions recorded since 2999-01-01 (UTC).');
    });

    test('the database refuses to change or delete an entry', async () => {
      await signUpCharityVia(database);
      await assert.rejects(rawSql(database.url, "update audit_log set action = 'nothing'"), /never changed or deleted/);
      await assert.rejects(rawSql(database.url, 'delete from audit_log'), /never changed or deleted/);
      // PostgreSQL's TRUNCATE empties a table without a row trigger seeing it (SQLite has none).
      if (backend.name === 'postgres') await assert.rejects(rawSql(database.url, 'truncate audit_log'), /never changed or deleted/);
      assert.ok((await trail(database.url)).length > 0);
    });

    test('the database refuses to overwrite an entry by inserting over it (SQLite: INSERT OR REPLACE deletes the row without its delete trigger)', async () => {
      await signUpCharityVia(database);
      const before = await trail(database.url);
      const columns = 'id, at, action, target, os_user, host, summary';
      const forged = `select id, at, action, 'forged', os_user, host, summary from audit_log`;
      const overwrite = backend.name === 'sqlite' ? `insert or replace into audit_log (${columns}) ${forged}` : `insert into audit_log (${columns}) overriding system value ${forged} on conflict (id) do update set target = excluded.target`;
      await assert.rejects(rawSql(database.url, overwrite), /never changed or deleted/);
      assert.deepEqual(await trail(database.url), before, 'every entry as it was');
    });
  });
}

async function signUpCharityVia(database: TestDatabase): Promise<void> {
  const store = await openStore(database.location);
  try {
    await signUpCharity(store, { name: 'Another', email: 'another@example.org' });
  } finally {
    await store.close();
  }
}

describe('the audit trail of backups and restores [sqlite]', () => {
  test('a backup is recorded in the database backed up; a restore, in the database restored', async () => {
    const dir = tempDir();
    const url = `sqlite:${join(dir, 'almoner.db')}`;
    assert.equal((await almoner(url, ['charity', 'create', '--name', 'B', '--email', 'b@example.org'])).code, 0);
    const file = join(dir, 'backup.db');
    assert.equal((await almoner(url, ['backup', '--out', file])).code, 0);
    assert.deepEqual((await trail(url)).map((e) => e.action), ['charity create', 'backup']);

    const restoredUrl = `sqlite:${join(tempDir(), 'almoner.db')}`;
    assert.equal((await almoner(restoredUrl, ['restore', file])).code, 0);
    const restored = await trail(restoredUrl);
    assert.deepEqual(restored.map((e) => e.action), ['charity create', 'restore'], 'the copy holds the trail up to the backup, then the restore');
    assert.equal(restored[1]!.summary.from, file);
  });
});

test("a restore's erasures again are the replaced trail's entries the backup's does not hold, by entry, not by time (an erasure begun before the backup and committed after it was missed) nor by id alone (after an earlier restore, the backup's id 3 was another action); one made again by a restore counts as the one it repeats", () => {
  const entry = (id: number, action: string, target: string, summary: Record<string, unknown> = {}) => ({ id, at: `2026-11-2${id}T10:00:00.000000Z`, action, target, summary });
  const replaced = [
    entry(1, 'donor erase', 'donor a', { charity: null }),
    entry(2, 'retention apply', 'before 2026-01-01', { retention_years: 7 }),
    entry(3, 'donor erase', 'donor b', { charity: 'helping-hands' }), // its time before entry 4's, committed after the backup began
    entry(4, 'charity rotate', 'helping-hands'),
    entry(5, 'retention apply', 'before 2026-11-28', { retention_years: 6 }),
  ];
  const key = (id: number) => entryKey(replaced[id - 1]!);
  const keys = (...ids: number[]) => new Set(ids.map(key));
  const b = { reference: 'donor b', charity: 'helping-hands', original: key(3) };
  assert.deepEqual(erasuresAfter(replaced, keys(1, 2, 4)), { donors: [b], retention: [{ years: 6, day: '2026-11-28', original: key(5) }] });
  assert.deepEqual(erasuresAfter(replaced, keys(1, 2, 3, 4, 5)), { donors: [], retention: [] });
  // The backup's own history: its entries 3 and 5 were other actions (a restore of the wrong file had come between).
  const backup = new Set([...keys(1, 2, 4), entryKey({ id: 3, at: '2026-11-23T09:00:00.000000Z', action: 'charity rotate', target: 'helping-hands' }), entryKey({ id: 5, at: '2026-11-25T09:00:00.000000Z', action: 'restore', target: '/srv/almoner.db' })]);
  assert.deepEqual(erasuresAfter(replaced, backup), { donors: [b], retention: [{ years: 6, day: '2026-11-28', original: key(5) }] });
  // Every retention period's last run, as of its day: the 7 years' run too, when the backup does not hold it (until
  // 2026-11-29 the last run alone was made again, and what a shorter period's run had erased came back).
  assert.deepEqual(erasuresAfter(replaced, keys(1, 4)), { donors: [b], retention: [{ years: 7, day: '2026-01-01', original: key(2) }, { years: 6, day: '2026-11-28', original: key(5) }] });
  const sixAgain = [...replaced, entry(6, 'retention apply', 'before 2026-11-29', { retention_years: 6 })];
  assert.deepEqual(erasuresAfter(sixAgain, keys(1, 2, 3, 4)).retention, [{ years: 6, day: '2026-11-29', original: entryKey(sixAgain[5]!) }], "a period's later run erased all its earlier one did");
  // Its last run made again (as a keep-replaced does, again_of entry 6), that period is done: the run before it is not
  // made again in turn (until 2026-11-29 the second keep-replaced made entry 5 again, and only the third said nothing to do).
  const madeAgain = heldBy([...[1, 2, 3, 4].map((id) => replaced[id - 1]!), entry(8, 'retention apply', 'before 2026-11-29', { retention_years: 6, again_of: entryKey(sixAgain[5]!) })]);
  assert.deepEqual(erasuresAfter(sixAgain, madeAgain).retention, []);
  // Donor b's erasure made again by a restore (entry 7, again_of entry 3): a backup that holds entry 3 holds it.
  const again = [...replaced, entry(6, 'restore', '/srv/almoner.db'), entry(7, 'donor erase', 'donor b', { charity: 'helping-hands', again_of: key(3) })];
  assert.deepEqual(erasuresAfter(again, keys(1, 2, 3, 4, 5)), { donors: [], retention: [] });
  assert.deepEqual(erasuresAfter(again, keys(1, 2, 4)), { donors: [b, b], retention: [{ years: 6, day: '2026-11-28', original: key(5) }] });
  // And the other way: a backup holding only the repeat (entry 7) holds the original (entry 3) too.
  assert.deepEqual(erasuresAfter(replaced, heldBy([...[1, 2, 4, 5].map((id) => replaced[id - 1]!), again[6]!])), { donors: [], retention: [] });
});
