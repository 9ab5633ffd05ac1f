// An erasure made while another connection holds a read open (a `donations export` to a slow
// reader, a `backup`'s VACUUM INTO, any long query) on a database a server keeps open: the WAL
// cannot be checkpointed at that moment, and the erased values stayed in the database file's own
// pages, which the WAL only shadows, after the command had said "erased" and exited 0. With the
// server's connection open, no later command's close checkpoints it either, and the server's own
// automatic checkpoint waits for 1000 pages of writes.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { ServerProcess } from '../support/server.js';

const WORDS = ['FirstnameReader', 'LastnameReader', 'CityReader', 'StreetReader'];

/** Which of the donor's values these files' bytes still hold. */
function traces(files: string[]): string[] {
  const bytes = Buffer.concat(files.filter((f) => existsSync(f)).map((f) => readFileSync(f)));
  return WORDS.filter((word) => bytes.includes(word));
}

let path: string;
let url: string;
let authorization: string;
let server: ServerProcess | undefined;

before(async () => {
  assertBuilt();
  path = join(tempDir(), 'almoner.db');
  url = `sqlite:${path}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Reader', '--email', 'r@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
  const { username, password } = JSON.parse(made.stdout) as { username: string; password: string };
  authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const store = await openStore(parseDatabaseUrl(url));
  try {
    const [charity] = await store.listCharities();
    const donor = { donor_first_name: 'FirstnameReader', donor_last_name: 'LastnameReader', donor_email: 'reader@example.org', donor_address: '1 StreetReader Road', donor_city: 'CityReader', gift_aid: 'no' };
    for (const d of [donor, ...Array.from({ length: 40 }, (_, i) => ({ donor_email: `other-${i}@example.org` }))]) {
      const v = validateDonation(exampleDonation(d));
      assert.ok(v.ok);
      await store.recordDonation(charity!.id, v.donation);
    }
  } finally {
    await store.close(); // the last connection: the rows are checkpointed into the database file
  }
  assert.deepEqual(traces([path]), WORDS, 'the donor is in the database file before the erasure');
});

after(() => server?.kill());

test('donor erase while another connection reads: it waits for the reader without holding the server up, then neither the database file nor its WAL holds what it erased', async () => {
  server = await new ServerProcess(url).listening(); // a running server: a command's close is then never the last connection
  const reader = new BetterSqlite3(path);
  reader.exec('begin');
  reader.prepare('select count(*) from donations').get(); // a read held open, as an export to a slow reader holds it
  const readerDone = new Promise<void>((resolve) =>
    setTimeout(() => {
      reader.exec('commit');
      reader.close();
      resolve();
    }, 7000), // longer than the command's 5 s busy timeout, and than a create's 4.5 s for the database
  );
  const erasing = almoner(url, ['donor', 'erase', '--email', 'reader@example.org']);
  let finished = false;
  void erasing.then(() => (finished = true));
  // Meanwhile the server records donations: until 2026-11-30 the erasure's checkpoint held the write lock
  // while it waited, each try for the 5 s busy timeout, and creates were answered 503 (an operator's review).
  const statuses: number[] = [];
  while (!finished) {
    const res = await fetch(`${server.url}/api/v1/donation/create`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify(exampleDonation({ donor_email: `meanwhile-${statuses.length}@example.org` })),
    });
    statuses.push(res.status);
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 100));
  }
  const erased = await erasing;
  await readerDone;
  assert.ok(statuses.length >= 20, `creates sent while it waited: ${statuses.length}`);
  assert.deepEqual([...new Set(statuses)], [200], `every create while the erasure waited: ${statuses.join(' ')}`);
  assert.equal(erased.code, 0, erased.stderr); // the reader let go within the minute it waits
  assert.match(erased.stdout, /erased donor first name/);
  assert.deepEqual(traces([path, `${path}-wal`]), [], 'the command said it erased the donor, and exited 0');
});

test('an erasure whose reader outlasts its wait: what it erased is returned, with what is left said after it (the command printed nothing, and exited 1, until 2026-11-30); a run that erased nothing only warns', async () => {
  const store = await openStore(parseDatabaseUrl(url), { walEmptiedWithinMs: 300 });
  const reader = new BetterSqlite3(path);
  try {
    reader.exec('begin');
    reader.prepare('select count(*) from donations').get();
    const found = await store.donors.erase({ email: 'other-1@example.org', today: '2026-11-30', dryRun: false });
    assert.equal(found.donations.length, 1, 'the donation is erased, and said');
    assert.equal(found.tracesLeft?.erasedNow, true);
    assert.match(found.tracesLeft.message, /^the erasure is done and recorded, but what was erased is still in the database file's pages: .* Run the same command again once it has finished$/);
    const run = await store.donors.applyRetention({ today: '2026-11-30', retentionYears: 6, dryRun: false });
    assert.deepEqual(run.erased, []);
    assert.equal(run.tracesLeft?.erasedNow, false);
    assert.match(run.tracesLeft.message, /^nothing was erased now, but .* if an earlier erasure or retention run exited 1/);
  } finally {
    if (reader.inTransaction) reader.exec('commit');
    reader.close();
  }
  try {
    assert.deepEqual(await store.donors.applyRetention({ today: '2026-11-30', retentionYears: 6, dryRun: false }), { erased: [] }, 'the reader gone, the WAL is emptied');
  } finally {
    await store.close();
  }
});
