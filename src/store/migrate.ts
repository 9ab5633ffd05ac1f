// Brings a database's schema up to date: every migration in migrations/, in order, once.
import { DEFAULT_MIGRATION_TABLE, Migrator, sql, type Kysely } from 'kysely';
import { ConfigError, type DatabaseLocation } from '../config.js';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';
import { isDatabaseUnavailable } from './unavailable.js';

/** PostgreSQL's SQLSTATE for a privilege the user lacks. */
const INSUFFICIENT_PRIVILEGE = '42501';

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
    const { rows } = await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(db);
    applied = rows.map((row) => row.name);
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err;
    // A user who may not read Almoner's tables: said so, not as Kysely's "migration failed: permission denied for table kysely_migration_lock" (an operator's review).
    if ((err as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE) {
      throw new ConfigError(`this database user may not read Almoner's tables (${(err as Error).message}): connect as the user that owns them, or grant this one their use; nothing was changed`);
    }
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
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    const said = error instanceof Error ? error.message : String(error);
    // A user who may read the tables but not change them, with a migration to run (an upgrade): said so, exit 2, where the
    // database's own words came through, exit 1, which systemd restarts for good (a review, 2026-11-30).
    if ((error as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE) {
      throw new ConfigError(
        `this database user may not bring Almoner's tables up to date${failed ? ` (migration ${failed})` : ''}: ${said}. Run bin/almoner once as the user that owns them (any command: it migrates), then start the server again; nothing was changed`,
      );
    }
    throw new Error(`Database migration${failed ? ` ${failed}` : ''} failed: ${said}`);
  }
}
