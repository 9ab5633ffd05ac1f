// Opens the database a DATABASE_URL names, with the settings that make a commit durable and a
// database outage fail fast, and brings its schema up to date.
import { accessSync, closeSync, constants, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql, type Dialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import type pg from 'pg';
import { ConfigError, DEFAULT_INSTANCE_REFRESH_MS, describeDatabase, type DatabaseLocation } from '../config.js';
import { osUser } from './audit.js';
import type { Database } from './schema.js';
import { migrate, refuseServerEncoding, refuseServerWithoutPrivileges, SQLITE_MIGRATION_WAIT_MS } from './migrate.js';
import { keepInstance } from './instances.js';
import { refuseMarkedConnection, refuseWhileRestoring, RESTORING_CODE } from './restoring.js';
import { closingClient } from './pg-client.js';
import { Store } from './store.js';
import { isDatabaseUnavailable, isRefused, refusedForGood } from './unavailable.js';
import type { Clock } from '../time.js';

/**
 * SQLite waits for another writer's lock by sleeping inside the call, which freezes a server's whole
 * event loop; the server waits this long at most in one go and retries asynchronously instead
 * (group-commit.ts). The CLI, one command at a time, keeps the default: 5 s in one go.
 */
export const SERVER_SQLITE_BUSY_TIMEOUT_MS = 20;

export interface StoreOptions {
  /** SQLite's busy_timeout: how long one statement may sleep waiting for another writer. */
  sqliteBusyTimeoutMs?: number;
  /** The clock KEYS_FOUND_MS is counted on, and on PostgreSQL the one donation ids taken ahead go stale on (DonationIds); the real one by default. */
  clock?: Clock;
  /** PostgreSQL: how long to wait for a connection, and for one query; tests shorten them instead of waiting. */
  pgTimeouts?: PgTimeouts;
  /** SQLite: how long an erasure waits for readers to let it empty the WAL (donors.ts's WAL_EMPTIED_WITHIN_MS); tests shorten it instead of waiting a minute. */
  walEmptiedWithinMs?: number;
  /** SQLite: how long a migration to run waits for another process's write lock (migrate.ts's SQLITE_MIGRATION_WAIT_MS); tests shorten it instead of waiting a minute. */
  migrationWaitMs?: number;
  /** SQLite: told once, before a migration to run waits for another process's write lock; by default a line on stderr. */
  onMigrationWait?: (waitMs: number) => void;
  /**
   * The server: a SQLite database this user cannot write is refused at once. SQLite opens it all the
   * same and reads it, so a server started, said it was ready and answered every create 503. So is a
   * PostgreSQL user without a privilege the server needs (migrate.ts's refuseServerWithoutPrivileges).
   */
  mustWrite?: boolean;
  /** A restore's own (restore, keep-replaced): the database may bear its mark (restoring.ts), which every other opening refuses. */
  duringRestore?: boolean;
  /**
   * A command that works on what is there (all but `charity create`, `serve` and a restore's): a
   * database without Almoner's tables is the wrong one (a mistyped DATABASE_URL, PostgreSQL's
   * `postgres` database), refused (ConfigError) before a table is made in it. Without this, an
   * erasure run there made Almoner's tables, found no donation, and said so with exit 0.
   */
  mustExist?: boolean;
  /**
   * A server or a command on PostgreSQL (`what`: `server`, or the command's name): its row in
   * almoner_instances, refreshed every `everyMs` while it runs and removed as it closes, by which a
   * restore sees it through a pooler too (instances.ts).
   */
  instance?: { everyMs: number; what: string; optional?: boolean };
}

export interface PgTimeouts {
  connectMs: number;
  queryMs: number;
}

/** A start (a server's, a command's) waiting for another process's migration says so, on stderr, where it waited in silence (a review, 2026-12-01). */
function sayMigrationWait(waitMs: number): void {
  process.stderr.write(`almoner: another process holds the database's write lock, and this one has its schema to bring up to date: waiting for it (up to ${Math.round(waitMs / 1000)} s)\n`);
}

/** How long a PostgreSQL connection, and one query, may be waited for before it fails (a request's 503). */
const PG_TIMEOUTS: PgTimeouts = { connectMs: 3000, queryMs: 5000 };

export async function openStore(
  location: DatabaseLocation,
  { sqliteBusyTimeoutMs = 5000, clock, pgTimeouts = PG_TIMEOUTS, mustWrite = false, duringRestore = false, mustExist = false, walEmptiedWithinMs, migrationWaitMs = SQLITE_MIGRATION_WAIT_MS, onMigrationWait = sayMigrationWait, instance }: StoreOptions = {},
): Promise<Store> {
  let db: Kysely<Database>;
  let store: Store;
  const gate: Gate = {};
  if (location.dialect === 'sqlite') {
    if (mustWrite) checkWritable(location.path);
    if (!duringRestore) await refuseWhileRestoring(location);
    const sqlite = await openSqlite(location.path, sqliteBusyTimeoutMs);
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    store = new Store(db, 'sqlite', { sqlite, clock, walEmptiedWithinMs });
  } else {
    db = new Kysely<Database>({ dialect: await postgresDialect(location.url, location.poolMax, pgTimeouts, duringRestore ? undefined : refuseMarkedConnection, gate) });
    // Batches of creates take one pooled connection each; one is left for reads (a credential, /health/ready, an
    // export's start), which a burst of creates would otherwise make wait for a batch to finish.
    store = new Store(db, 'postgres', { writeConcurrency: Math.max(1, location.poolMax - 1), clock });
  }
  try {
    // SQLite: with this connection open, so that a restore beginning now sees it and refuses
    // (PostgreSQL's connections are each checked as they open: postgresDialect's onConnect).
    if (!duringRestore) await refuseWhileRestoring(location);
    let tables: boolean | undefined;
    const hasTables = async () => (tables ??= await hasAlmonersTables(db, location.dialect));
    if (mustExist && !(await hasTables())) {
      throw new ConfigError(
        `${describeDatabase(location)} holds no Almoner database (none of its tables are there): set DATABASE_URL to the server's database, ` +
          'or create the first charity with `bin/almoner charity create`, which makes them',
      );
    }
    // Before a table is made in it: by the server, or by a command that would make the first ones (charity create, a restore).
    if (location.dialect === 'postgres' && (mustWrite || !(await hasTables()))) await refuseServerEncoding(db, location.dialect);
    await migrate(db, location.dialect, { onWait: onMigrationWait, sqliteWaitMs: migrationWaitMs });
    if (mustWrite) await refuseServerWithoutPrivileges(db, location.dialect);
    if (instance && location.dialect === 'postgres') {
      const kept = await keepInstance(location.url, { everyMs: instance.everyMs, what: instance.what, optional: instance.optional, connectMs: pgTimeouts.connectMs, queryMs: pgTimeouts.queryMs, marked: (refusal) => (gate.refused = refusal?.message) });
      gate.beforeEnd = () => kept.stop();
    }
  } catch (err) {
    await store.close();
    throw connectionRefused(err) ?? err;
  }
  return store;
}

/**
 * A PostgreSQL connection refused for what DATABASE_URL says (a database that does not exist, a user
 * it does not know or lets in, a wrong password: refusedForGood) as a setting's mistake, a
 * ConfigError (exit 2, which systemd does not restart), else undefined. It was exit 1, and `serve`
 * was restarted every 2 s for as long as nobody looked (until 2026-12-02, a review). PostgreSQL's own
 * words name the database or the user, never the password.
 */
export function connectionRefused(err: unknown): ConfigError | undefined {
  // No code: node-postgres's own, SCRAM asking for a password that DATABASE_URL does not give (pg-client.ts).
  if (err instanceof Error && /client password must be a (non-empty )?string/.test(err.message)) {
    return new ConfigError(
      "PostgreSQL asks for a password, and DATABASE_URL gives none (nor PGPASSWORD, nor ~/.pgpass): put the user's password in it (postgres://user:password@host/database, percent-encoded, README: Configuration); until then a restart will not mend it",
      { cause: err },
    );
  }
  const code = refusedForGood(err);
  if (code === undefined) return undefined;
  const fix =
    code === '3D000'
      ? "set DATABASE_URL to Almoner's database, or create it first (createdb -E UTF8, README: Running on PostgreSQL)"
      : code === '42501'
        ? "let DATABASE_URL's user connect to it (grant connect on database … to …), or set DATABASE_URL to a user that may"
        : "set DATABASE_URL's user and password to ones this PostgreSQL server lets in (percent-encoded, README: Configuration), or create that user (create role … login) or let it in (pg_hba.conf)";
  return new ConfigError(`PostgreSQL refuses the connection: ${(err as Error).message} (${code}): ${fix}; until then a restart will not mend it`, { cause: err });
}

/**
 * What `backup` writes in its copy's header (SQLite's user_version, which VACUUM INTO copies and
 * Almoner uses for nothing else), and a restore clears: a backup given to keep-replaced as the
 * database it came from is told from it (a newer backup given so settled the claims made since an
 * older one as of itself: a review, 2026-11-30), and one given as DATABASE_URL is refused
 * (openSqlite). Backups taken by a version before that day's (87512f9) bear none.
 */
export const BACKUP_MARK = 0x416c6d42; // "AlmB"

/**
 * For a command that writes beside the database before it opens it (keep-replaced's claim): the
 * refusal openSqlite would give, before that. A file that is not there, not a database, or locked
 * just now, is left to the opening.
 */
export async function refuseBackup(path: string): Promise<void> {
  if (path === ':memory:' || !existsSync(path)) return;
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  let backup = false;
  try {
    // No wait for a lock: one held (a restore's, another keep-replaced's) is left to the claim and the
    // opening after it, which say so; waited for, two keep-replaced at once met at the claim together,
    // and both could be refused (a review).
    const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true, timeout: 0 });
    try {
      backup = bearsBackupMark(db);
    } finally {
      db.close();
    }
  } catch {
    return;
  }
  if (backup) throw backupGiven(path);
}

/** Whether the open database bears BACKUP_MARK: a copy `backup` wrote. */
export function bearsBackupMark(db: BetterSqlite3.Database): boolean {
  return db.pragma('user_version', { simple: true }) === BACKUP_MARK;
}

/** The refusal of a database that bears BACKUP_MARK, given as DATABASE_URL. */
export function backupGiven(path: string): ConfigError {
  return new ConfigError(
    `DATABASE_URL names a backup that bin/almoner backup wrote (${resolve(path)}), not a database to run on: anything recorded in it, ` +
      'a Gift Aid claim above all, would be unknown to the database it was taken from. To use what it holds, restore it: ' +
      '`DATABASE_URL=sqlite:NEW-FILE bin/almoner restore BACKUP` for a look at it, or over the database with --replace (README: Backups)',
  );
}

/**
 * A sqlite: DATABASE_URL naming a folder, refused (SQLite's "unable to open database file" was taken
 * for a user who may not write it: an operator's review): by `serve` (openServerStore) and by every
 * command (cli/io.ts's theDatabase). A path this user cannot reach is left to
 * the checks that name the user.
 */
export function refuseFolder(location: DatabaseLocation): void {
  if (location.dialect !== 'sqlite' || location.path === ':memory:') return;
  let folder: boolean;
  try {
    folder = statSync(location.path, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch {
    return;
  }
  if (folder) throw new ConfigError(`DATABASE_URL names a folder, ${resolve(location.path)}, not a database file: name the file in it (sqlite:${join(resolve(location.path), 'almoner.db')}, say)`);
}

/** Whether Almoner's migrations have run in this database: their own table is there. */
async function hasAlmonersTables(db: Kysely<Database>, dialect: DatabaseLocation['dialect']): Promise<boolean> {
  const { rows } =
    dialect === 'postgres'
      ? await sql<{ found: boolean }>`select to_regclass('kysely_migration') is not null as found`.execute(db)
      : await sql<{ found: number }>`select count(*) > 0 as found from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db);
  return Boolean(rows[0]?.found);
}

/**
 * The database as a server opens it (`serve`, and under WORKERS on SQLite the primary, which writes
 * every worker's creates): a SQLite database this user cannot write refused at once, SQLite's
 * short waits for a lock, and an error that names the database (under systemd this line is all the
 * journal shows), a setting's mistake still a ConfigError (exit 2, not restarted).
 */
export async function openServerStore(location: DatabaseLocation, { instanceRefreshMs = DEFAULT_INSTANCE_REFRESH_MS }: { instanceRefreshMs?: number } = {}): Promise<Store> {
  // A folder for a database refused here, as a command's is by cli/io.ts's theDatabase.
  const opened = (async () => {
    refuseFolder(location);
    return openStore(location, { sqliteBusyTimeoutMs: SERVER_SQLITE_BUSY_TIMEOUT_MS, mustWrite: true, instance: { everyMs: instanceRefreshMs, what: 'server' } });
  })();
  return opened.catch((err: unknown) => {
    const message = `cannot open the database ${describeDatabase(location)}: ${err instanceof Error ? err.message : String(err)}`;
    throw err instanceof ConfigError ? new ConfigError(message) : new Error(message, { cause: err });
  });
}

/** The database file and its folder (where SQLite makes its -wal and -shm files) may be written by this user, or a ConfigError says which may not. */
function checkWritable(path: string): void {
  if (path === ':memory:') return;
  const folder = dirname(path);
  // A folder still to be made is made in the nearest one there (mkdir's EACCES, exit 1, was all it said: a review).
  let made = folder;
  while (!existsSync(made) && dirname(made) !== made) made = dirname(made);
  for (const [what, at] of [
    ['the database file', path],
    ['its WAL file', `${path}-wal`],
    ['its shared-memory file', `${path}-shm`],
    ['its folder', folder],
    ...(made === folder ? [] : ([['the folder its folder is to be made in,', made]] as const)),
  ] as const) {
    if (!existsSync(at)) continue; // made on first start
    try {
      accessSync(at, constants.W_OK);
    } catch (err) {
      throw new ConfigError(
        `this user (${osUser()}) may not write ${what} ${at} (${(err as NodeJS.ErrnoException).code}), and the server writes every create: ` +
          `give ${at === folder ? 'the folder' : 'it'} to the user the service runs as (a command run as root, say, left it root's)`,
      );
    }
  }
}

/**
 * The mode of every file Almoner makes that holds donors' personal data (a SQLite database, and
 * SQLite gives its -wal and -shm files the database's own; a backup; Gift Aid claims and their
 * to-do lists; a restore's ledgers): readable by its owner only, whatever the umask.
 */
export const PRIVATE_FILE = 0o600;
/** A folder Almoner makes for a SQLite database. */
const PRIVATE_FOLDER = 0o700;

async function openSqlite(path: string, busyTimeoutMs: number): Promise<BetterSqlite3.Database> {
  // Loaded only for SQLite, as pg only for PostgreSQL: each backend's start-up pays for its own driver.
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  if (path !== ':memory:') {
    mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_FOLDER });
    // Made here, empty (an empty file is an empty SQLite database), so that SQLite does not make it
    // as the umask allows: under the usual 022 every local user could read donors' data (until 2026-11-29).
    try {
      closeSync(openSync(path, 'wx', PRIVATE_FILE));
    } catch {
      // There already (EEXIST), or not to be made here (a folder this user may not write): SQLite's open says which.
    }
  }
  const db = new BetterSqlite3(path);
  // The CLI and the server share the file; wait for a writer instead of failing at once. First: setting WAL on a
  // new database takes its lock, and two processes opening it at once had one fail there, "database is locked",
  // at once (until 2026-12-01, when the set was made after it: found as the migrations' race was mended).
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  // Before anything here writes to it (WAL mode, the migrations): a backup used as the database took
  // claims of its own, the same donations the live database had claimed since under the same
  // numbers, and recorded them in the backup (a Gift Aid review, 2026-11-30). A restore's own
  // commands too: a restore reads its backup without this, and puts a copy without the mark in
  // place; keep-replaced given a backup as DATABASE_URL wrote its entry into it (a review).
  if (bearsBackupMark(db)) {
    db.close();
    throw backupGiven(path);
  }
  // WAL + synchronous=FULL: a transaction is on disk (fsynced) when COMMIT returns,
  // so a 200 always means the donation survives a crash or power loss.
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  // What a donor's erasure or a retention run replaces is overwritten with zeros where SQLite frees
  // it, not left in the file's free space, where a backup copied page by page (and anyone reading
  // the file's bytes) found erased names and addresses. Only deletions and changes pay for it.
  db.pragma('secure_delete = ON');
  return reusingStatements(db);
}

/**
 * Kysely prepares every query afresh, which costs more than running it. The same SQL text gets
 * the same prepared statement here, unless that one is still busy (an export iterating it).
 */
function reusingStatements(db: BetterSqlite3.Database): BetterSqlite3.Database {
  const statements = new Map<string, BetterSqlite3.Statement>();
  const prepare = db.prepare.bind(db);
  db.prepare = ((source: string) => {
    // SQLite ends a transaction itself on some errors (a full disk, I/O): Kysely's ROLLBACK then
    // fails with "no transaction is active" and would hide the real cause. Nothing left to undo.
    if (source === 'rollback' && !db.inTransaction) return prepare('select 1');
    // Kysely begins a transaction deferred: it reads first and takes the write lock at its first
    // write, and if another connection (the server) committed in between, that write fails at once
    // with SQLITE_BUSY_SNAPSHOT, never waiting out busy_timeout: a donor's erasure or a retention
    // run beside a busy server failed one time in three. Every transaction Almoner opens through
    // Kysely writes, so each takes the lock as it begins, waiting for it there.
    if (source === 'begin') source = 'begin immediate';
    const cached = statements.get(source);
    if (cached && !cached.busy) return cached;
    const fresh = prepare(source);
    if (statements.size < 500) statements.set(source, fresh);
    return fresh;
  }) as typeof db.prepare;
  return db;
}

const INT8_OID = 20;

/**
 * What a server's pool is told by its row's refreshes (instances.ts): while `refused` says a restore's
 * mark was found, every connection asked for is refused with it, as one opened onto the mark is
 * (a 503); `beforeEnd`, the row's removal as the pool ends.
 */
interface Gate {
  refused?: string;
  beforeEnd?: () => Promise<void>;
}

/** `onConnect`: run on each new connection before it is used; its error is the error of whatever asked for the connection. */
async function postgresDialect(connectionString: string, max: number, timeouts: PgTimeouts, onConnect: ((client: pg.ClientBase) => Promise<void>) | undefined, gate: Gate): Promise<Dialect> {
  // Loaded only for PostgreSQL, so SQLite deployments do not pay for it at start-up.
  const { default: pg } = await import('pg');
  const { default: Cursor } = await import('pg-cursor');
  const pool = new pg.Pool({
    Client: closingClient(pg),
    connectionString,
    max,
    connectionTimeoutMillis: timeouts.connectMs,
    // Idle connections are kept (node-postgres closes them after 10 s by default): a running server
    // then always has a session open, which is how `restore` sees that one is running (a server
    // idle for 10 s had none, and was restored under: a review, 2026-11-28). Through a pooler it
    // sees none of them: there, by the server's row (instances.ts).
    idleTimeoutMillis: 0,
    // No query_timeout here: node-postgres never clears it for cursors, so it would cut exports
    // short after timeouts.queryMs. Queries are timed below instead, cursors not at all.
    keepAlive: true,
    onConnect,
    // Ids, counts and pence are int8; every value Almoner stores fits a JS number exactly.
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // An idle connection that the server or the network dropped: the pool discards it and the next
  // query opens a new one. Without a listener this event would crash the process.
  pool.on('error', () => {});
  return new PostgresDialect({ pool: discardingBrokenClients(pool, timeouts.queryMs, gate), cursor: Cursor });
}

/** What of pg-cursor's Cursor discardingBrokenClients reads: its state (`error` once it has failed) and that error, read() and close(), which Kysely calls without a callback. */
interface PgCursor {
  state?: string;
  _error?: Error;
  read(rows: number): Promise<unknown[]>;
  close(): Promise<void>;
}

const ENDED_BEFORE_EVERY_ROW = 'the connection to the database ended before every row was read';

/**
 * Kysely hands every client back to the pool as healthy. A client whose query timed out or lost
 * its connection is not: node-postgres keeps the stuck query queued on it, so every later query
 * on it would time out too. Such a client is released with its error, which makes the pool
 * destroy it; that is how the service recovers on its own once the database is back.
 */
function discardingBrokenClients(pool: pg.Pool, queryTimeoutMs: number, gate: Gate): PostgresPool {
  return {
    async connect(): Promise<PostgresPoolClient> {
      // A field read, on every request's way to the database: the refreshes that set it run on a connection of their own.
      if (gate.refused !== undefined) throw Object.assign(new ConfigError(gate.refused), { code: RESTORING_CODE });
      const client = await pool.connect();
      let broken: Error | undefined;
      // pg-pool listens for errors only on idle clients: a checked-out client whose connection
      // dies between queries would otherwise emit an unhandled 'error' and crash the process.
      const onError = (err: Error) => (broken ??= err); // the first error says why: an EPIPE after a FATAL says nothing more
      client.on('error', onError);
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      return {
        query: ((...args: unknown[]) => {
          // Nothing more sent on a connection known to be dead: the transaction's ROLLBACK that Kysely
          // sends after a failure failed too (`write EPIPE`), and Kysely threw that error in place of
          // the one that said why (a review, 2026-12-02: a terminated `giftaid claim` said `write EPIPE`).
          if (broken !== undefined) return Promise.reject(broken);
          const result = query(...args);
          if (!(result instanceof Promise)) return closingWhenBroken(result as PgCursor); // a cursor: an export streams as long as it needs
          result.catch((err: unknown) => {
            if (isDatabaseUnavailable(err) && !isRefused(err)) broken = err as Error; // a statement refused leaves its connection standing
          });
          return timeLimited(result, queryTimeoutMs, () => (broken = new Error('Query read timeout')));
        }) as PostgresPoolClient['query'],
        release: () => {
          client.removeListener('error', onError);
          client.release(broken);
        },
      };
      /**
       * Why a stream's connection ended, as its command should say it: the database's own words if it
       * said why (a FATAL), else ENDED_BEFORE_EVERY_ROW, not node-postgres's
       * `Connection terminated unexpectedly` or `write EPIPE`. Kept as `broken`, what a transaction's
       * ROLLBACK on it then fails with too, so the command says it whichever error Kysely throws.
       */
      function endedBeforeEveryRow(): Error {
        // pg's DatabaseError, the server's own, has a severity; `write EPIPE`'s code looks like a SQLSTATE but is not one.
        if (broken === undefined || typeof (broken as { severity?: unknown }).severity !== 'string') broken = new Error(ENDED_BEFORE_EVERY_ROW);
        return broken;
      }
      /**
       * A cursor's close() waits for the database's ReadyForQuery, which a connection that has died
       * never sends: Kysely closes every stream's cursor as it ends, so a command streaming rows
       * (an export, a claim, a donor's request) whose connection was terminated waited for nothing
       * and Node ended it with exit 13, no message, its output cut short and its row in
       * almoner_instances left (a review, 2026-12-02: 8 of 8 exports). A cursor that has failed is
       * now not closed but its connection discarded, so its failure reaches the command. And a
       * cursor whose connection ended as it read may say it has no more rows (seen once in CI: an
       * export of 3,000 rows ended with exit 0 after 500): its close, as the stream ends, then fails,
       * so the command does not take the rows it has for all of them. A close that takes longer
       * than a query may fails as a query would.
       */
      function closingWhenBroken(cursor: PgCursor): PgCursor {
        const pgClient = client as unknown as { _ended?: boolean; _queryable?: boolean };
        /** pg's Client: ended, or no longer queryable after an error. */
        const connectionGone = () => pgClient._ended === true || pgClient._queryable === false;
        // A read waiting when the connection ends is never answered by pg-cursor once it has seen the
        // last batch's CommandComplete (it then ignores errors): an export whose connection ended just
        // after its last batch was sent waited for ever, its last rows never written and its row in
        // almoner_instances kept fresh (a review, 2026-12-02). It now fails as the connection ends.
        const read = cursor.read.bind(cursor);
        cursor.read = (rows) =>
          new Promise((resolve, reject) => {
            const ended = () => reject(endedBeforeEveryRow());
            if (cursor.state !== 'error' && connectionGone()) return ended(); // a failed cursor's read says its own error
            client.once('end', ended);
            read(rows)
              .then(resolve, (err: NodeJS.ErrnoException) => {
                // Its next batch asked for on a connection the server had closed: `write EPIPE` (a review: 8 of 8 claims terminated so), which says nothing of the database.
                if (err.code === 'EPIPE' || err.code === 'ECONNRESET' || /Connection terminated unexpectedly/.test(err.message)) return ended();
                reject(err);
              })
              .finally(() => client.removeListener('end', ended));
          });
        const close = cursor.close.bind(cursor);
        cursor.close = () => {
          if (cursor.state === 'error') {
            broken ??= cursor._error ?? new Error('a cursor failed'); // pg-cursor's own: what the ROLLBACK after it fails with too
            return Promise.resolve(); // its own error is the stream's
          }
          if (broken !== undefined || connectionGone()) return Promise.reject(endedBeforeEveryRow());
          return timeLimited(close(), queryTimeoutMs, () => (broken = new Error('Query read timeout')));
        };
        return cursor;
      }
    },
    end: async () => {
      await gate.beforeEnd?.();
      await pool.end();
    },
  };
}

/** Rejects with the error `onTimeout` returns if `work` has not settled within `ms`. */
function timeLimited<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
