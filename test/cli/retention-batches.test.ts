// A retention run over years of donations: the first run after an install that never ran it, or a
// timer that stopped, finds hundreds of thousands due. It read, worked out and erased them all in
// one transaction, holding SQLite's write lock throughout (607,000 due among 2,500,000: about 16 s,
// every create of the server meanwhile answered 503) and every erasure in memory at once (2.9 GB),
// until a review of 2026-11-30. It now goes in batches of donation ids, each its own transaction,
// and the command prints each batch as it is done. Scaled down here: 60,000 due donations under a
// 64 MB heap (the old run ran out of memory at 30,000), and a batch of 2 ids in the store's own run.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { openStore } from '../../src/store/open.js';
import { tempDir } from '../support/backends.js';
import { insertOldDonations } from '../support/app.js';
import { almoner, assertBuilt } from '../support/cli.js';

async function newDatabase(n: number): Promise<{ path: string; url: string }> {
  const path = join(tempDir(), 'almoner.db');
  const url = `sqlite:${path}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Old Gifts', '--email', 'old@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
  await insertOldDonations(url, n);
  return { path, url };
}

before(() => assertBuilt());

test('retention apply over 60,000 due donations runs in a 64 MB heap, erases them all and says so', async () => {
  const n = 60_000;
  const { path, url } = await newDatabase(n);
  const run = await almoner(url, ['retention', 'apply'], { NODE_OPTIONS: '--max-old-space-size=64' }, { timeoutMs: 90_000 }); // a small heap's work, slowed several times over on a loaded machine
  assert.equal(run.code, 0, run.stderr.slice(-2000));
  const lines = run.stdout.trimEnd().split('\n');
  assert.equal(lines.length, n + 1, 'a line for each donation, and the count');
  assert.match(lines.at(-1)!, /^60000 donations\. /);
  assert.match(lines[0]!, /^donation 1 \(old-gifts-\w+, 2010-01-01, Gift Aid\): erased /);
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    assert.deepEqual(db.prepare("select count(*) as n from donations where erased_at is null or donor_email like 'donor%'").get(), { n: 0 });
    const entries = db.prepare("select summary from audit_log where action = 'retention apply'").all() as Array<{ summary: string }>;
    assert.equal(entries.reduce((sum, e) => sum + Number(JSON.parse(e.summary).donations), 0), n, "the audit entries' donations add up to the run's");
  } finally {
    db.close();
  }
});

test('retention in batches: another writer gets the write lock between them, and each batch is audited', async () => {
  const { path, url } = await newDatabase(5);
  const other = new BetterSqlite3(path, { timeout: 0 }); // never waits for the lock: it has it at once, or fails
  const store = await openStore(parseDatabaseUrl(url));
  try {
    const batches: number[][] = [];
    const run = await store.donors.applyRetention({
      today: '2026-11-30',
      retentionYears: 6,
      dryRun: false,
      idsABatch: 2,
      each: (erased) => {
        batches.push(erased.map((e) => e.id));
        // What a server's create does: a write, which the run's transaction, were it still open, would refuse at once (SQLITE_BUSY).
        other.prepare("insert into commit_tokens (token, committed_at) values (?, '2026-11-30T00:00:00.000000Z')").run(`between-${batches.length}`);
      },
    });
    assert.deepEqual(batches, [[1, 2], [3, 4], [5]]);
    assert.deepEqual(run.erased, [], "handed to each batch's callback, not kept");
    const entries = other.prepare("select summary from audit_log where action = 'retention apply' order by id").all() as Array<{ summary: string }>;
    assert.deepEqual(entries.map((e) => JSON.parse(e.summary).donations), [2, 2, 1]);
    assert.deepEqual(other.prepare("select count(*) as n from commit_tokens where token like 'between-%'").get(), { n: 3 });
  } finally {
    await store.close();
    other.close();
  }
});
