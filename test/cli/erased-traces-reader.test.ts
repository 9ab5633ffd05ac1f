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
let server: ServerProcess | undefined;

before(async () => {
  assertBuilt();
  path = join(tempDir(), 'almoner.db');
  url = `sqlite:${path}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Reader', '--email', 'r@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
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

test('donor erase while another connection reads: once it has exited 0, neither the database file nor its WAL holds what it erased', async () => {
  server = await new ServerProcess(url).listening(); // a running server: a command's close is then never the last connection
  const reader = new BetterSqlite3(path);
  reader.exec('begin');
  reader.prepare('select count(*) from donations').get(); // a read held open, as an export to a slow reader holds it
  const readerDone = new Promise<void>((resolve) =>
    setTimeout(() => {
      reader.exec('commit');
      reader.close();
      resolve();
    }, 7000), // longer than the command's 5 s busy timeout
  );
  const erased = await almoner(url, ['donor', 'erase', '--email', 'reader@example.org']);
  await readerDone;
  assert.match(erased.stdout, /erased donor first name/);
  if (erased.code === 0) {
    assert.deepEqual(traces([path, `${path}-wal`]), [], 'the command said it erased the donor, and exited 0');
  } else {
    assert.match(erased.stderr, /still/, 'a command that could not clear the file says so');
  }
});
