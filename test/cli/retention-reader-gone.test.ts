// `retention apply` prints each batch's donations as it erases them. Its reader gone early (`| head -1`),
// main.ts's EPIPE handler ended it at once, exit 0: it stopped after its first batch, the others not
// erased and, on SQLite, the WAL not checkpointed, where the README says an erasure is checkpointed or
// the command exits 1 (a review of 2026-12-02). An erasure once begun now goes to its end, its lines
// no longer written, and says on standard error that they were not.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { test } from 'node:test';
import { insertOldDonations } from '../support/app.js';
import { BACKENDS, queryPostgres, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, type Run } from '../support/cli.js';
import BetterSqlite3 from 'better-sqlite3';

const DUE = 12_000; // three of retention's batches of 5,000 ids

async function query<R>(database: TestDatabase, text: string): Promise<R[]> {
  if (database.location.dialect === 'postgres') return queryPostgres(database.url, text) as Promise<R[]>;
  const db = new BetterSqlite3(database.location.path, { readonly: true });
  try {
    return db.prepare(text).all() as R[];
  } finally {
    db.close();
  }
}

/** `bin/almoner <args> | head -1`, as a shell runs it: the command's own exit status, and head's output. */
function throughHead(database: TestDatabase, args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-c', '"$@" | head -1; exit "${PIPESTATUS[0]}"', 'bash', BIN, ...args], { env: childEnv(database.url), timeout: 90_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

for (const backend of BACKENDS) {
  test(`retention apply | head -1 erases every batch${backend.name === 'sqlite' ? ' and checkpoints the WAL' : ''}, exit 0, saying its lines went unwritten [${backend.name}]`, { timeout: 120_000 }, async () => {
    assertBuilt();
    const database = await backend.createDatabase();
    try {
      const made = await almoner(database.url, ['charity', 'create', '--name', 'Old Gifts', '--email', 'old@example.org', '--json']);
      assert.equal(made.code, 0, made.stderr);
      await insertOldDonations(database.url, DUE);
      const run = await throughHead(database, ['retention', 'apply']);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^donation 1 \(old-gifts-\w+, 2010-01-01, Gift Aid\): erased [^\n]*\n$/, 'head took the first line');
      if (database.location.dialect === 'sqlite') {
        // Looked at before anything opens the database again (the last connection to close checkpoints it).
        const wal = `${database.location.path}-wal`;
        const walBytes = existsSync(wal) ? statSync(wal).size : 0;
        assert.equal(walBytes, 0, `the WAL was left holding ${walBytes} bytes, not checkpointed`);
      }
      const [left] = await query<{ n: number }>(database, "select count(*) as n from donations where erased_at is null or donor_email like 'donor%'");
      assert.equal(Number(left!.n), 0, 'every due donation erased');
      const entries = await query<{ summary: string }>(database, "select summary from audit_log where action = 'retention apply' order by id");
      assert.deepEqual(entries.map((e) => JSON.parse(e.summary).donations), [5000, 5000, 2000], 'an audit entry for each batch');
      assert.match(run.stderr, /not every line could be written \(EPIPE: its reader went away\); the erasure went on to its end: 12000 donations\. /);
    } finally {
      await database.drop();
    }
  });
}
