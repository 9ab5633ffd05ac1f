// The migrations run as one transaction on both backends: a run that fails half way leaves nothing
// of itself. Until 2026-12-01 SQLite's ran through Kysely's Migrator, each migration on its own: a
// database at 0004 whose 0007 failed was left at 0006, 0005's rebuild of idempotency_keys kept. And
// on SQLite the transaction's wait for the write lock (60 s) is the migration's only: the server's
// connection waits 20 ms for a lock again afterwards, so its creates never sleep out a minute.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, sql } from 'kysely';
import { migrations } from '../../src/store/migrations/index.js';
import { openServerStore, openStore, SERVER_SQLITE_BUSY_TIMEOUT_MS } from '../../src/store/open.js';
import { BACKENDS, migratedTo, queryPostgres, type TestDatabase } from '../support/backends.js';

/** The database as it stood at `version`, then `also` run in it. */
async function migratedToThen(database: TestDatabase, version: string, also?: string): Promise<void> {
  const db = await migratedTo(database, version);
  try {
    if (also) await sql.raw(also).execute(db);
  } finally {
    await db.destroy();
  }
}

/** What a plain connection reads: the migrations recorded, and idempotency_keys' columns. */
async function schemaOf(database: TestDatabase): Promise<{ applied: string[]; keyColumns: string[] }> {
  const location = database.location;
  if (location.dialect === 'postgres') {
    const applied = await queryPostgres<{ name: string }>(location.url, 'select name from kysely_migration order by name');
    const columns = await queryPostgres<{ name: string }>(location.url, "select column_name as name from information_schema.columns where table_name = 'idempotency_keys' order by ordinal_position");
    return { applied: applied.map((r) => r.name), keyColumns: columns.map((r) => r.name) };
  }
  const db = new BetterSqlite3(location.path, { readonly: true });
  try {
    const applied = db.prepare('select name from kysely_migration order by name').all() as Array<{ name: string }>;
    const columns = db.prepare("select name from pragma_table_info('idempotency_keys')").all() as Array<{ name: string }>;
    return { applied: applied.map((r) => r.name), keyColumns: columns.map((r) => r.name) };
  } finally {
    db.close();
  }
}

for (const backend of BACKENDS) {
  test(`a migration failing half way: nothing of the run is left (0005's rebuild undone with it), and the failure named as before [${backend.name}]`, async () => {
    const database = await backend.createDatabase();
    try {
      // 0007 makes audit_log: one already there fails it, after 0005 and 0006 have run.
      await migratedToThen(database, '0004_commit_tokens', 'create table audit_log (x integer)');
      const before = await schemaOf(database);
      assert.deepEqual(before.applied, ['0001_initial', '0002_idempotency_keys', '0003_giftaid_claims', '0004_commit_tokens']);
      assert.ok(before.keyColumns.includes('locked_until'));
      await assert.rejects(openStore(database.location), { message: /^Database migration 0007_audit_log failed: .*"audit_log" already exists$/ });
      // Until 2026-12-01 SQLite's was left at 0006: idempotency_keys rebuilt, without locked_until.
      assert.deepEqual(await schemaOf(database), before);
    } finally {
      await database.drop();
    }
  });
}

for (const backend of BACKENDS.filter((b) => b.name === 'sqlite')) {
  test(`a server opening a database with a migration to run: its connection waits ${SERVER_SQLITE_BUSY_TIMEOUT_MS} ms for a lock again afterwards, not the migration's 60 s [${backend.name}]`, async () => {
    const database = await backend.createDatabase();
    try {
      await migratedToThen(database, '0021_instances_say_what');
      const store = await openServerStore(database.location); // applies 0022
      try {
        const db = (store as unknown as { db: Kysely<any> }).db;
        assert.equal((await sql<{ n: number }>`select count(*) as n from kysely_migration`.execute(db)).rows[0]!.n, Object.keys(migrations('sqlite')).length);
        assert.deepEqual((await sql`pragma busy_timeout`.execute(db)).rows, [{ timeout: SERVER_SQLITE_BUSY_TIMEOUT_MS }]);
      } finally {
        await store.close();
      }
    } finally {
      await database.drop();
    }
  });

  test(`a migration to run while another process holds the write lock for all of the wait: said so, and nothing changed [${backend.name}]`, async () => {
    const database = await backend.createDatabase();
    try {
      await migratedToThen(database, '0021_instances_say_what');
      const before = await schemaOf(database);
      const holder = new BetterSqlite3(database.location.dialect === 'sqlite' ? database.location.path : '');
      holder.pragma('journal_mode = WAL'); // as a server leaves it: in rollback mode, switching to WAL would meet the lock first
      holder.exec('begin immediate');
      try {
        // The wait shortened from its 60 s (SQLITE_MIGRATION_WAIT_MS). Until a review on 2026-12-01 the message was "database is locked" alone.
        await assert.rejects(openStore(database.location, { migrationWaitMs: 200 }), {
          message: /^the database's schema is to be brought up to date, and another process held its write lock for all of 0 s this one waited .*start again once it has finished$/,
        });
      } finally {
        holder.exec('rollback');
        holder.close();
      }
      // As it was, whatever migrations come after (it counted one fewer than this version's, which a later migration broke: 2026-12-01).
      assert.deepEqual(await schemaOf(database), before);
    } finally {
      await database.drop();
    }
  });
}
