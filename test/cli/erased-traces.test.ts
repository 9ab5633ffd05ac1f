// What a donor's erasure replaces leaves no trace in the SQLite file, its WAL, or a backup taken
// after it (SQLite only; on PostgreSQL, pg_dump copies rows, not pages). Before secure_delete and
// backups by VACUUM INTO, the erased name, e-mail and address stayed readable in the file's free
// space and in every backup copied page by page from it; so do the traces of an erasure made by an
// earlier version, which a backup now leaves behind. A restore from a backup file with its WAL
// beside it brings back what that WAL holds, as the summary it prints counts it.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

/** A donor whose every personal value is a word found nowhere else, so the file's bytes can be searched for it. */
const donor = (tag: string) => ({
  donor_first_name: `Firstname${tag}`,
  donor_last_name: `Lastname${tag}`,
  donor_email: `mail${tag.toLowerCase()}@example.org`,
  donor_phone: `07700 9${tag.length}0000`,
  donor_address: `1 Street${tag} Road`,
  donor_city: `City${tag}`,
  donor_postcode: `PC${tag}`,
  donor_ip: '203.0.113.77',
  gift_aid: 'no',
});

/** Which of the donor's values the files' bytes still hold. */
function tracesOf(tag: string, files: string[]): string[] {
  const bytes = Buffer.concat(files.filter((f) => existsSync(f)).map((f) => readFileSync(f)));
  return [`Firstname${tag}`, `Lastname${tag}`, `mail${tag.toLowerCase()}@example.org`, `Street${tag}`, `City${tag}`].filter((word) => bytes.includes(word));
}

describe('erased data leaves no trace in the file or a backup [sqlite]', () => {
  let dir: string;
  let path: string;
  let url: string;
  before(async () => {
    assertBuilt();
    dir = tempDir();
    path = join(dir, 'almoner.db');
    url = `sqlite:${path}`;
    const made = await almoner(url, ['charity', 'create', '--name', 'Traces', '--email', 't@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const store = await openStore(parseDatabaseUrl(url));
    try {
      const [charity] = await store.listCharities();
      for (const tag of ['Erased', 'Earlier', 'Kept']) {
        const v = validateDonation(exampleDonation(donor(tag)));
        assert.ok(v.ok);
        await store.recordDonation(charity!.id, v.donation);
      }
      // Dozens more, so that the donors' rows share their pages with others, as in any real database.
      for (let i = 0; i < 60; i++) {
        const v = validateDonation(exampleDonation({ donor_email: `other-${i}@example.org` }));
        assert.ok(v.ok);
        await store.recordDonation(charity!.id, v.donation);
      }
    } finally {
      await store.close();
    }
  });

  test('donor erase, then backup: neither the database, its WAL nor the backup holds what was erased', async () => {
    // An erasure made by an earlier version, without secure_delete: its traces are in the file's free space.
    const earlier = new BetterSqlite3(path);
    earlier.pragma('secure_delete = OFF');
    earlier.prepare("update donations set donor_first_name = null, donor_last_name = null, donor_email = 'erased@invalid', donor_address = null, donor_city = null where donor_email = ?").run('mailearlier@example.org');
    earlier.pragma('wal_checkpoint(truncate)');
    earlier.close();
    assert.ok(tracesOf('Earlier', [path]).length > 0, 'the earlier erasure left traces for the backup to leave behind');

    const erased = await almoner(url, ['donor', 'erase', '--email', 'mailerased@example.org']);
    assert.equal(erased.code, 0, erased.stderr);
    assert.match(erased.stdout, /erased donor first name/);
    assert.deepEqual(tracesOf('Erased', [path, `${path}-wal`]), []);

    const backup = join(dir, 'backup.db');
    const made = await almoner(url, ['backup', '--out', backup]);
    assert.equal(made.code, 0, made.stderr);
    assert.deepEqual(tracesOf('Erased', [backup]), []);
    assert.deepEqual(tracesOf('Earlier', [backup]), []);
    assert.equal(tracesOf('Kept', [backup]).length, 5, 'a donor not erased is in the backup whole');
  });

  test('restore from a backup file with a WAL beside it: the restored database holds what the WAL holds', async () => {
    // A copy of a live database, taken with cp: the file and its WAL, not checkpointed.
    const live = join(tempDir(), 'live.db');
    const made = await almoner(`sqlite:${live}`, ['charity', 'create', '--name', 'Live', '--email', 'l@example.org']);
    assert.equal(made.code, 0, made.stderr);
    const writer = new BetterSqlite3(live);
    writer.pragma('wal_autocheckpoint = 0');
    const before = (writer.prepare('select count(*) as n from donations').get() as { n: number }).n;
    writer
      .prepare("insert into donations (charity_id, donor_email, gift_aid, amount, amount_minor, donation_type, donation_date, zakat_donation, recorded_at) values (1, 'in-the-wal@example.org', 0, '5', 500, 'one-time', '2026-11-28T00:00:00.000000Z', 0, '2026-11-28T00:00:00.000000Z')")
      .run();
    const snapshot = join(tempDir(), 'snapshot.db');
    copyFileSync(live, snapshot);
    copyFileSync(`${live}-wal`, `${snapshot}-wal`);
    writer.close();

    const target = join(tempDir(), 'restored.db');
    const restored = await almoner(`sqlite:${target}`, ['restore', snapshot]);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stdout + restored.stderr, new RegExp(`\\b${before + 1} donations?\\b`)); // "1 donation" since 2026-11-30
    const check = new BetterSqlite3(target, { readonly: true });
    try {
      assert.equal((check.prepare('select count(*) as n from donations').get() as { n: number }).n, before + 1);
      assert.ok(check.prepare("select 1 from donations where donor_email = 'in-the-wal@example.org'").get());
    } finally {
      check.close();
    }
  });

  test("restore --replace erases again what the replaced database erased after the backup; a restore elsewhere says to", async () => {
    const backup = join(dir, 'before-erasure.db');
    assert.equal((await almoner(url, ['backup', '--out', backup])).code, 0);
    const erased = await almoner(url, ['donor', 'erase', '--email', 'MAILKEPT@example.org']); // in another case than stored
    assert.equal(erased.code, 0, erased.stderr);

    const restored = await almoner(url, ['restore', backup, '--replace']);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stdout, /erased again what the replaced database erased after the backup: 1 donor erasure \(1 donation\)/);
    const exported = await almoner(url, ['donor', 'export', '--email', 'mailkept@example.org']);
    assert.equal(exported.code, 0, exported.stderr);
    assert.deepEqual((JSON.parse(exported.stdout) as { donations: unknown[] }).donations, [], 'the donor erased after the backup is erased again');
    assert.deepEqual(tracesOf('Kept', [path]), [], 'in the database');
    assert.deepEqual(tracesOf('Kept', [`${path}-wal`]), [], 'in its WAL');
    const trail = await almoner(url, ['audit', '--json']);
    const actions = trail.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { action: string }).action);
    assert.deepEqual(actions.slice(-3), ['restore', 'donor erase', 'donor export'], 'the erasure made again is audited, after the restore');

    const elsewhere = await almoner(`sqlite:${join(tempDir(), 'fresh.db')}`, ['restore', backup]);
    assert.equal(elsewhere.code, 0, elsewhere.stderr);
    assert.match(elsewhere.stdout, /erase those donors again/);
  });
});
