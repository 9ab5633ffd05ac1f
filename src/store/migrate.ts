// Brings a database's schema up to date: every migration in migrations/, in order, once.
import { DEFAULT_MIGRATION_TABLE, sql, type Kysely } from 'kysely';
import { ConfigError, type DatabaseLocation } from '../config.js';
import { migrations, newerThanThis, WITHDRAWN_MIGRATIONS } from './migrations/index.js';
import type { Database } from './schema.js';
import { isBusy, isDatabaseUnavailable } from './unavailable.js';

/** PostgreSQL's SQLSTATE for a privilege the user lacks. */
const INSUFFICIENT_PRIVILEGE = '42501';

/** How long a process opening a SQLite database waits for another's migration, which holds the write lock while it runs (its busy_timeout meanwhile). */
export const SQLITE_MIGRATION_WAIT_MS = 60_000;

/** How long SQLite's write lock is waited for before the wait is said (MigrateOptions.onWait). */
const QUIET_WAIT_MS = 100;

export interface MigrateOptions {
  /** SQLITE_MIGRATION_WAIT_MS, which a test shortens. */
  sqliteWaitMs?: number;
  /** SQLite: told once, before it waits, when another process holds the write lock the migrations need (so that a start waiting for it is not silent). */
  onWait?: (waitMs: number) => void;
}

/** Applies every pending migration; safe to call from several processes at once. */
export async function migrate(db: Kysely<Database>, dialect: DatabaseLocation['dialect'], { sqliteWaitMs = SQLITE_MIGRATION_WAIT_MS, onWait = () => {} }: MigrateOptions = {}): Promise<void> {
  if (await isUpToDate(db, dialect)) return;
  // Processes starting together take turns on a lock held by one transaction, which does the whole
  // run (its bookkeeping table, the withdrawn migrations undone, every pending migration): the
  // second finds nothing left to do. On SQLite the database's write lock (Kysely's `begin` is
  // `begin immediate` there, open.ts), waited for up to SQLITE_MIGRATION_WAIT_MS rather than the
  // server's 20 ms; until 2026-12-01 Kysely's Migrator ran SQLite's, which takes no lock there and
  // runs each migration on its own: two processes opening a database with a migration to run (a
  // server starting as the backup timer's command runs, after an upgrade; two servers on a new
  // database) both ran it, and one failed (`UNIQUE constraint failed: kysely_migration.name`, `table
  // "charities" already exists`), exit 1 (a review: 9 of 12 pairs of commands after 0022).
  // On PostgreSQL an advisory lock of the transaction. Until 2026-11-30 this was a session-level
  // advisory lock, and Kysely's Migrator took another: behind a transaction pooler (PgBouncer's
  // pool_mode = transaction) each statement outside a transaction may run on another server
  // connection, so a second instance could take the "held" lock on the same one, and the unlock ran
  // elsewhere and released nothing: the lock stayed with an idle server connection of the pooler,
  // and the next start that had a migration to run waited for it until its query timed out, exit 1,
  // again at each restart (an operator's review).
  const run = () =>
    db.transaction().execute(async (trx) => {
      if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext('almoner:migrate'))`.execute(trx);
      await migrateWithin(trx, dialect);
    });
  // SQLite's lock is first asked for with a short wait (a server's commit lasts a few milliseconds), so that a longer
  // wait is said (onWait) before it begins.
  const waited = dialect === 'sqlite' ? await busyTimeout(db, Math.min(QUIET_WAIT_MS, sqliteWaitMs)) : undefined;
  try {
    try {
      await run();
    } catch (err) {
      if (waited === undefined || !lockedOut(err)) throw err;
      onWait(sqliteWaitMs);
      await setBusyTimeout(db, sqliteWaitMs);
      await run();
    }
  } catch (err) {
    const migration = (err as { migration?: string }).migration;
    // Another process held SQLite's write lock all the while: said so, where "database is locked" alone made a start that had
    // waited a minute in silence look like a fault of this one's (a review).
    if (dialect === 'sqlite' && lockedOut(err)) {
      throw new Error(
        `the database's schema is to be brought up to date, and another process held its write lock for all of ${Math.round(sqliteWaitMs / 1000)} s ` +
          `this one waited (another Almoner's migration of a large database, say, or a long write of a command): start again once it has finished`,
      );
    }
    // The database gone before a migration ran (its lock waited for past the query timeout, say): said as such, as before.
    if (err instanceof ConfigError || (migration === undefined && isDatabaseUnavailable(err))) throw err;
    throw migrationFailed(err, migration);
  } finally {
    if (waited !== undefined) await setBusyTimeout(db, waited);
  }
}

/** SQLite: busy_timeout set to `waitMs`; the one it was. */
async function busyTimeout(db: Kysely<Database>, waitMs: number): Promise<number> {
  const { rows } = await sql<{ timeout: number }>`pragma busy_timeout`.execute(db);
  await setBusyTimeout(db, waitMs);
  return Number(rows[0]?.timeout ?? 0);
}

const setBusyTimeout = (db: Kysely<Database>, waitMs: number) => sql.raw(`pragma busy_timeout = ${Math.round(waitMs)}`).execute(db);

/** SQLite's write lock held by another process as the migrations' transaction began (before any migration ran). */
const lockedOut = (err: unknown): boolean => (err as { migration?: string }).migration === undefined && isBusy(err);

/** Whether the migrations' bookkeeping table is there, read within `trx` as of now. */
async function hasMigrationTable(trx: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<boolean> {
  // PostgreSQL: in pg_class, read as of this statement: not to_regclass, which answers from the connection's cache and,
  // on a connection that had looked for the table before the instance it waited for made it, said it was not there.
  const { rows } =
    dialect === 'postgres'
      ? await sql<{ n: number }>`
          select count(*)::int as n from pg_catalog.pg_class c join pg_catalog.pg_namespace s on s.oid = c.relnamespace
            where c.relname = ${DEFAULT_MIGRATION_TABLE} and s.nspname = any (current_schemas(false))`.execute(trx)
      : await sql<{ n: number }>`select count(*) as n from sqlite_master where type = 'table' and name = ${DEFAULT_MIGRATION_TABLE}`.execute(trx);
  return Number(rows[0]!.n) > 0;
}

/**
 * Within `trx` (which holds the migrators' lock): what Kysely's Migrator does, in the same tables,
 * all in one transaction, without its own locks. A failed migration's error names it (`migration`).
 */
async function migrateWithin(trx: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<void> {
  const table = sql.table(DEFAULT_MIGRATION_TABLE);
  // Looked for first, as Kysely does: "create table if not exists" is refused to a PostgreSQL user without CREATE on the schema, even when
  // the table is there.
  if (!(await hasMigrationTable(trx, dialect))) await sql`create table ${table} (name varchar(255) not null primary key, "timestamp" varchar(255) not null)`.execute(trx);
  await undoWithdrawn(trx, dialect);
  const applied = (await sql<{ name: string }>`select name from ${table} order by "timestamp", name`.execute(trx)).rows.map((row) => row.name);
  refuseNewer(newerThanThis(dialect, applied));
  const all = migrations(dialect);
  const known = Object.keys(all).sort();
  applied.forEach((name, i) => {
    if (known[i] !== name) throw new Error(`corrupted migrations: expected previously executed migration ${name} to be at index ${i} but ${known[i]} was found in its place`);
  });
  for (const name of known.slice(applied.length)) {
    try {
      await all[name]!.up(trx);
    } catch (err) {
      throw Object.assign(err as object, { migration: name });
    }
    await sql`insert into ${table} (name, "timestamp") values (${name}, ${new Date().toISOString()})`.execute(trx);
  }
}

/** A newer Almoner's migrations in the database: refused (exit 2). Kysely said "corrupted migrations: previously executed migration 0099_x is missing". */
function refuseNewer(newer: string[]): void {
  if (newer.length === 0) return;
  throw new ConfigError(
    `the database's schema is newer than this Almoner's (it has ${newer.sort().join(', ')}): run the version of Almoner that made it, ` +
      'or restore a backup made by this one; nothing was changed',
  );
}

/** A migration's failure as said to the operator: a user who may not change the tables, exit 2; anything else, exit 1. */
function migrationFailed(error: unknown, failed: string | undefined): Error {
  const said = error instanceof Error ? error.message : String(error);
  // A user who may read the tables but not change them, with a migration to run (an upgrade): said so, exit 2, where the
  // database's own words came through, exit 1, which systemd restarts for good (a review, 2026-11-30).
  if ((error as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE) {
    return new ConfigError(
      `this database user may not bring Almoner's tables up to date${failed ? ` (migration ${failed})` : ''}: ${said}. Run bin/almoner once as the user that owns them (any command: it migrates), then start the server again; nothing was changed`,
    );
  }
  return new Error(`Database migration${failed ? ` ${failed}` : ''} failed: ${said}`);
}

/**
 * Whether exactly the known migrations have run: one query, where taking the migrators' lock and
 * reading the catalogue first took tens of milliseconds of every start. Anything else, such as a new
 * database or a pending migration, is migrateWithin's to handle.
 */
async function isUpToDate(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<boolean> {
  let applied: string[];
  try {
    const { rows } = await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(db);
    applied = rows.map((row) => row.name);
  } catch (err) {
    // A user who may not read Almoner's tables: said so, not as Kysely's "migration failed: permission denied for table kysely_migration_lock"
    // (an operator's review). Before the check for a database unavailable, which takes a privilege revoked from a running server as such.
    if ((err as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE) {
      throw new ConfigError(`this database user may not read Almoner's tables (${(err as Error).message}): connect as the user that owns them, or grant this one their use; nothing was changed`);
    }
    if (isDatabaseUnavailable(err)) throw err;
    return false; // no bookkeeping table yet
  }
  const known = Object.keys(migrations(dialect));
  // One that was taken back is undone by migrateWithin, not taken for a newer Almoner's.
  if (applied.some((name) => name in WITHDRAWN_MIGRATIONS)) return false;
  refuseNewer(newerThanThis(dialect, applied));
  return applied.length === known.length && known.every((name) => applied.includes(name));
}

/**
 * What a server does with Almoner's tables on PostgreSQL: a create's row (and its id, taken from the
 * sequence with nextval), its key and its commit token, credentials read, and the hourly purge of
 * keys and tokens. One privilege each: has_table_privilege('t', 'a, b') is true when any is held.
 */
const SERVER_PRIVILEGES: ReadonlyArray<readonly [table: string, privilege: 'select' | 'insert' | 'update' | 'delete']> = [
  ['charities', 'select'],
  ['donations', 'select'],
  ['donations', 'insert'],
  ['idempotency_keys', 'select'],
  ['idempotency_keys', 'insert'],
  ['idempotency_keys', 'delete'],
  ['commit_tokens', 'select'],
  ['commit_tokens', 'insert'],
  ['commit_tokens', 'delete'],
  // Its row, by which a restore sees it (instances.ts).
  ['almoner_instances', 'select'],
  ['almoner_instances', 'insert'],
  ['almoner_instances', 'update'],
  ['almoner_instances', 'delete'],
];

/**
 * A server's database user on PostgreSQL that lacks a privilege the server needs, refused (exit 2)
 * with the grants that put it right. Until 2026-11-30 a user that could read the tables but not
 * insert (no USAGE on the donations' sequence, the usual slip) started, said it was ready and
 * answered every create 500 (an operator's review). Only what surely fails is refused, as a user
 * that works must not be stopped by an upgrade (a review of the first version, which refused
 * three): a select or an insert granted on some columns only passes (has_any_column_privilege; a
 * delete is the whole table's), and the sequence's UPDATE, which nextval takes as well as USAGE
 * (pg_write_all_data grants it), passes too. SQLite's own case is the file's (open.ts's checkWritable).
 */
export async function refuseServerWithoutPrivileges(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<void> {
  if (dialect !== 'postgres') return;
  const needed = sql.join(SERVER_PRIVILEGES.map(([table, privilege]) => sql`(${table}, ${privilege})`));
  const { rows } = await sql<{ grant: string }>`
    select 'grant ' || p || ' on ' || t || ' to ' || quote_ident(current_user) as grant
      from (values ${needed}) as needed(t, p)
      where not case when p = 'delete' then has_table_privilege(t, p) else has_any_column_privilege(t, p) end
    union all
    select 'grant usage on sequence ' || s || ' to ' || quote_ident(current_user)
      from (select pg_get_serial_sequence('donations', 'id') as s) as sequence where not has_sequence_privilege(s, 'usage, update')`.execute(db);
  if (rows.length === 0) return;
  throw new ConfigError(
    `this database user may not do what the server does with Almoner's tables: as their owner, ${rows.map((r) => r.grant).join('; ')}; ` +
      'or connect as the user that owns them; nothing was changed',
  );
}

/**
 * The server's PostgreSQL database in an encoding other than UTF-8 (or SQL_ASCII, which stores the
 * bytes as sent), refused (exit 2): donors' names come in every script, and one its encoding has no
 * character for (a Łukasz in LATIN1, an emoji in any) was a 500 for that create, its log line quoting
 * the name's bytes; a username so written was a 500 before it was judged, never counted by the
 * throttle (a security review, 2026-11-30). Refused too by a command that would make Almoner's tables
 * in it (`charity create`, the README's first step: until a review the same day it made them, and the
 * charity, before serve refused the database). The commands that take data out still open it. The
 * fix names a locale: on a cluster made in a LATIN1 locale, `createdb -E UTF8` alone fails ("encoding
 * UTF8 does not match locale").
 */
export async function refuseServerEncoding(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<void> {
  if (dialect !== 'postgres') return;
  const { rows } = await sql.raw<ServerEncoding>(SERVER_ENCODING_QUERY).execute(db);
  refuseEncoding(rows[0]!);
}

/** The database's encoding and name, as refuseEncoding reads them: a statement for any PostgreSQL client (a restore's is pg's own). */
export const SERVER_ENCODING_QUERY = "select current_setting('server_encoding') as encoding, current_database() as database";
export interface ServerEncoding {
  encoding: string;
  database: string;
}

/** Refuses (a ConfigError, exit 2) a database whose encoding cannot hold every donor's name: any but UTF8 and SQL_ASCII. */
export function refuseEncoding({ encoding, database }: ServerEncoding): void {
  if (encoding === 'UTF8' || encoding === 'SQL_ASCII') return;
  throw new ConfigError(
    `the database ${database} is encoded in ${encoding}, which cannot hold every donor's name (a Łukasz, a 李, an emoji): give Almoner a database in UTF8 ` +
      `(createdb -E UTF8 --locale=C.UTF-8 -T template0 almoner), move the data into it (pg_dump --format=custom, then bin/almoner restore), and point DATABASE_URL at it; nothing was changed`,
  );
}

/**
 * Undoes each withdrawn migration (migrations/index.ts) the database ran, and forgets it, before the
 * migrations run, which refuse a database that ran a migration this version does not know. Each
 * step may be run again: a run stopped between them is finished by the next.
 */
async function undoWithdrawn(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<void> {
  let applied: string[];
  try {
    applied = (await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(db)).rows.map((row) => row.name);
  } catch {
    return; // no bookkeeping table yet
  }
  for (const name of applied.filter((n) => n in WITHDRAWN_MIGRATIONS)) {
    await WITHDRAWN_MIGRATIONS[name]!(db, dialect);
    await sql`delete from ${sql.table(DEFAULT_MIGRATION_TABLE)} where name = ${name}`.execute(db);
  }
}

