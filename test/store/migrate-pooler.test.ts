// PostgreSQL behind a transaction pooler (PgBouncer's pool_mode = transaction, the usual production
// setting): each statement outside a transaction may run on another server connection, and a
// server connection outlives the client's. A session-level advisory lock is then no lock: until
// 2026-11-30 migrate() took one (and Kysely's Migrator another) and released it with a statement
// that ran on another server connection, which released nothing; the lock stayed with an idle
// server connection of the pooler, and the next start with a migration to run waited for it until
// its query timed out, exit 1, at every restart (an operator's review, with PgBouncer 1.18). Here
// the pooler is played by a pool that runs each statement outside a transaction on a server
// connection no statement used before, the most a transaction pooler may do, against a real
// PostgreSQL; every server connection is kept open until the locks are looked at.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Kysely, PostgresDialect, sql, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import { migrate } from '../../src/store/migrate.js';
import { migrations } from '../../src/store/migrations/index.js';
import type { Database } from '../../src/store/schema.js';
import { BACKENDS, queryPostgres, type TestDatabase } from '../support/backends.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

/** A transaction pooler at its most: a transaction keeps its server connection; any other statement gets a new one. */
function transactionPooler(url: string): { pool: PostgresPool; servers: pg.Client[] } {
  const servers: pg.Client[] = [];
  const server = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    servers.push(client);
    return client;
  };
  const pool: PostgresPool = {
    async connect(): Promise<PostgresPoolClient> {
      let pinned: pg.Client | undefined;
      return {
        query: (async (text: string, params: unknown[]) => {
          const on = pinned ?? (await server());
          if (/^\s*(begin|start transaction)\b/i.test(text)) pinned = on;
          if (/^\s*(commit|rollback)\b/i.test(text)) pinned = undefined;
          return on.query(text, params);
        }) as unknown as PostgresPoolClient['query'],
        release: () => {},
      };
    },
    end: async () => {},
  };
  return { pool, servers };
}

describe('PostgreSQL: migrations through a transaction pooler', { skip: postgres ? false : 'TEST_DATABASE_URL is not set', timeout: 60_000 }, () => {
  let database: TestDatabase;
  const opened: Array<{ db: Kysely<Database>; servers: pg.Client[] }> = [];

  after(async () => {
    for (const { db, servers } of opened) {
      await db.destroy();
      await Promise.all(servers.map((s) => s.end()));
    }
    await database?.drop();
  });

  const throughPooler = () => {
    const { pool, servers } = transactionPooler(database.url);
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    opened.push({ db, servers });
    return db;
  };

  /** The advisory locks held in the database, by any session (the pooler's server connections are all still open). */
  const advisoryLocksHeld = async () =>
    (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_locks where locktype = 'advisory' and granted and database = (select oid from pg_database where datname = current_database())"))[0]!.n;

  test('a new database migrated through the pooler: every migration once, and no lock left with a server connection', async () => {
    database = await postgres!.createDatabase();
    await migrate(throughPooler(), 'postgres');
    const applied = await queryPostgres<{ name: string }>(database.url, 'select name from kysely_migration order by name');
    assert.deepEqual(
      applied.map((r) => r.name),
      Object.keys(migrations('postgres')).sort(),
    );
    // Before the fix: 2, the migrate lock and Kysely's, held by idle server connections for as long as the pooler keeps them.
    assert.equal(await advisoryLocksHeld(), 0);
  });

  // Before the fix this one waited for the lock the first left, for ever: the suite's timeout ends it.
  test('an upgrade (a withdrawn migration to undo) by two instances at once through the pooler: both finish, and leave no lock either', async () => {
    await queryPostgres(database.url, "insert into kysely_migration (name, timestamp) values ('0018_previous_password', '2026-11-29T21:10:00.000Z')");
    await Promise.all([migrate(throughPooler(), 'postgres'), migrate(throughPooler(), 'postgres')]);
    const withdrawn = await queryPostgres(database.url, "select name from kysely_migration where name = '0018_previous_password'");
    assert.equal(withdrawn.length, 0);
    assert.equal(await advisoryLocksHeld(), 0);
    const db = throughPooler();
    assert.equal(Number((await sql<{ n: number }>`select count(*) as n from donations`.execute(db)).rows[0]!.n), 0);
  });
});

describe('PostgreSQL: two instances migrating a new database at once, each on a connection of its own', { skip: postgres ? false : 'TEST_DATABASE_URL is not set', timeout: 60_000 }, () => {
  let database: TestDatabase;
  after(() => database?.drop());

  // Each instance first looks for the tables (not there) on its connection, then waits for the other's migration
  // to commit. The one that waited made the bookkeeping table again, "relation kysely_migration already exists",
  // exit 1, when it asked to_regclass, which answers from the connection's cache, where the earlier look left "not
  // there" (this fix's first version: 2 of 3 starts of two servers through PgBouncer on a new database).
  test('the one that waited finds the migrations done', async () => {
    database = await postgres!.createDatabase();
    const outsider = new pg.Client({ connectionString: database.url });
    await outsider.connect();
    const instances = [0, 1].map(() => new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url, max: 1 }) }) }));
    try {
      await outsider.query("begin; select pg_advisory_xact_lock(hashtext('almoner:migrate'))");
      // Each connection has looked for the bookkeeping table as openStore does (hasAlmonersTables) before it migrates: not there.
      for (const db of instances) await sql`select to_regclass('kysely_migration')`.execute(db);
      const both = instances.map((db) => migrate(db, 'postgres'));
      // Asked on connections of their own: within the outsider's transaction pg_stat_activity is as it was at its first look.
      const waiting = "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory' and datname = current_database()";
      while ((await queryPostgres<{ n: number }>(database.url, waiting))[0]!.n < 2) {
        await new Promise((r) => setTimeout(r, 10));
      }
      await outsider.query('commit');
      await Promise.all(both);
      const applied = await queryPostgres<{ name: string }>(database.url, 'select name from kysely_migration order by name');
      assert.deepEqual(
        applied.map((r) => r.name),
        Object.keys(migrations('postgres')).sort(),
      );
    } finally {
      await outsider.end();
      await Promise.all(instances.map((db) => db.destroy()));
    }
  });
});
