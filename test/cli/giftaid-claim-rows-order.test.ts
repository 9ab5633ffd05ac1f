// A claim's write transaction (SQLite's write lock, held while the server's creates wait) holds only
// what must be in it: the rows are built and their statements compiled before it begins (a scale
// review of 2026-11-30 measured a claim of 629,000 donations holding the lock 14 to 26 s, creates
// answered 503 meanwhile), and they are inserted in donation id order, each with its position in the
// claim's files (earliest first). In that order the ledger's key (claim, donation), the unique index
// of live rows (donation) and the check that each donation is there are each met in the order they
// are kept in, not at random as by day; before, rows went in by position. The files and the ledger
// still give the rows earliest first (test/cli/giftaid.test.ts reads them).
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { recordGiftAided } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

/** The claim's rows (donation id, position) in the order they were inserted: SQLite's rowid, PostgreSQL's place in a table only ever appended to. */
async function rowsAsInserted(url: string): Promise<Array<[number, number]>> {
  const query = (order: string) => `select donation_id, position from giftaid_claim_donations where claim_id = 1 order by ${order}`;
  if (url.startsWith('sqlite:')) {
    const db = new BetterSqlite3(url.slice('sqlite:'.length), { readonly: true });
    try {
      return (db.prepare(query('rowid')).all() as Array<{ donation_id: number; position: number }>).map((r) => [r.donation_id, r.position]);
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(query('ctid'))).rows.map((r: { donation_id: string; position: number }) => [Number(r.donation_id), Number(r.position)]);
  } finally {
    await client.end();
  }
}

for (const backend of BACKENDS) {
  describe(`giftaid claim's rows (${backend.name})`, () => {
    test('are inserted in donation id order, each with its place in the files (earliest first)', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const made = await almoner(database.url, ['charity', 'create', '--name', 'Row Order', '--email', 'ro@example.org', '--json']);
        assert.equal(made.code, 0, made.stderr);
        const { id: charityId, username } = JSON.parse(made.stdout) as { id: number; username: string };
        // Recorded latest day first: ids 1, 2, 3, 4 are dated 4, 6, 8 and 10 days ago, so the files list them 4, 3, 2, 1.
        for (const [n, daysAgo] of [[1, 4], [2, 6], [3, 8], [4, 10]] as const) {
          await recordGiftAided(database.url, charityId, [{ donor_email: `donor${n}@example.com`, donor_last_name: `Donor${n}` }], daysAgo);
        }
        const out = tempDir();
        const claimed = await almoner(database.url, ['giftaid', 'claim', '--charity', username, '--out', out, '--json']);
        assert.equal(claimed.code, 0, claimed.stderr);
        assert.equal((JSON.parse(claimed.stdout) as { donations: number }).donations, 4);
        assert.deepEqual(await rowsAsInserted(database.url), [[1, 4], [2, 3], [3, 2], [4, 1]]);
        assert.deepEqual(readdirSync(out).filter((f) => f.endsWith('.ods')), ['claim-1-1.ods']);
      } finally {
        await database.drop();
      }
    });
  });
}
