// Brings a database's schema up to date: every migration in migrations/, in order, once.
import { DEFAULT_MIGRATION_TABLE, Migrator, sql, type Kysely } from 'kysely';
import { ConfigError, type DatabaseLocation } from '../config.js';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';
import { isDatabaseUnavailable } from './unavailable.js';

/** Applies every pending migration; safe to call from several processes at once. */
export async function migrate(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<void> {
  if (await isUpToDate(db, dialect)) return;
  if (dialect === 'sqlite') return migrateOn(db, dialect); // SQLite's write lock serialises migrators
  // Instances starting together take turns: a session-level advisory lock held on one connection
  // covers the whole run, including the creation of Kysely's own bookkeeping tables.
  await db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(hashtext('almoner:migrate'))`.execute(conn);
    try {
      await migrateOn(conn, dialect);
    } finally {
      await sql`select pg_advisory_unlock(hashtext('almoner:migrate'))`.execute(conn);
    }
  });
}

/**
 * Whether exactly the known migrations have run: one query, where Kysely's Migrator takes its locks
 * and reads the catalogue first, tens of milliseconds of every start. Anything else, such as a new
 * database or a pending migration, is the Migrator's to handle.
 */
async function isUpToDate(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<boolean> {
  let applied: string[];
  try {
    // On PostgreSQL, Almoner's own (migrateOn): another application's, later on the search_path, was read as Almoner's.
    const here = dialect === 'postgres' ? await almonerSchema(db) : undefined;
    const table = here === undefined ? sql.table(DEFAULT_MIGRATION_TABLE) : sql.id(here, DEFAULT_MIGRATION_TABLE);
    const { rows } = await sql<{ name: string }>`select name from ${table}`.execute(db);
    applied = rows.map((row) => row.name);
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err;
    return false; // no bookkeeping table yet
  }
  const known = Object.keys(migrations(dialect));
  const newer = applied.filter((name) => !known.includes(name)).sort();
  // Kysely said "corrupted migrations: previously executed migration 0099_x is missing".
  if (newer.length > 0) {
    throw new ConfigError(
      `the database's schema is newer than this Almoner's (it has ${newer.join(', ')}): run the version of Almoner that made it, ` +
        'or restore a backup made by this one; nothing was changed',
    );
  }
  return applied.length === known.length && known.every((name) => applied.includes(name));
}

async function migrateOn(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<void> {
  const provider = { getMigrations: async () => migrations(dialect) };
  // On PostgreSQL, Kysely's bookkeeping tables named in Almoner's schema (the search_path's first):
  // unnamed, Kysely took another application's kysely_migration, in a schema of its own, for
  // Almoner's, and every start on a new database failed ("relation kysely_migration does not exist").
  const migrationTableSchema = dialect === 'postgres' ? await almonerSchema(db) : undefined;
  const { error, results } = await new Migrator({ db, provider, ...(migrationTableSchema !== undefined && { migrationTableSchema }) }).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    throw new Error(`Database migration ${failed ?? ''} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * Almoner's schema on PostgreSQL, as one query: the first schema on the search_path whose
 * kysely_migration holds Almoner's first migration (read with query_to_xml, which runs a query made
 * for each schema, in plain SQL; a table this user may not read is not Almoner's, and is not read), else the search_path's first that exists (a new database; null
 * when none does). Not simply the first that exists: a schema named as the user ("$user", first on
 * PostgreSQL's default path) made after Almoner's tables were in public would have had a new, empty
 * Almoner migrated into it, shadowing the real one; nor the first kysely_migration found, which may
 * be another application's.
 */
export const ALMONER_SCHEMA_SQL = `select coalesce(
  (select s from unnest(current_schemas(false)) with ordinality as t(s, i)
    where case when to_regclass(quote_ident(s) || '.kysely_migration') is null then false
               when not has_table_privilege(quote_ident(s) || '.kysely_migration', 'select') then false
               else (xpath('/row/found/text()', query_to_xml(format('select exists (select 1 from %I.kysely_migration where name = %L) as found', s, '0001_initial'), false, true, '')))[1]::text = 'true' end
    order by i limit 1),
  current_schema()) as here`;

async function almonerSchema(db: Kysely<Database>): Promise<string | undefined> {
  return (await sql<{ here: string | null }>`${sql.raw(ALMONER_SCHEMA_SQL)}`.execute(db)).rows[0]?.here ?? undefined;
}
