// The databases every HTTP and CLI test runs against: SQLite always, PostgreSQL when
// TEST_DATABASE_URL names a server. Each test file gets its own fresh database and drops it after.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { parseDatabaseUrl, type DatabaseLocation } from '../../src/config.js';
import { migrations } from '../../src/store/migrations/index.js';

export interface TestDatabase {
  /** For DATABASE_URL in a child process. */
  url: string;
  location: DatabaseLocation;
  drop(): Promise<void>;
}

export interface Backend {
  name: 'sqlite' | 'postgres';
  createDatabase(): Promise<TestDatabase>;
}

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'almoner-test-'));
}

/** Mounts a tmpfs of `size` (say '2m') at `path`, for a full disk; mounting needs root: where it cannot be mounted, why. */
export function mountTmpfs(path: string, size: string): string | undefined {
  mkdirSync(path, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', path], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return `cannot mount a small tmpfs here (${(err as Error).message.split('\n')[0]})`;
  }
}

const sqlite: Backend = {
  name: 'sqlite',
  async createDatabase() {
    const dir = tempDir();
    const url = `sqlite:${join(dir, 'almoner.db')}`;
    return { url, location: parseDatabaseUrl(url), drop: async () => rmSync(dir, { recursive: true, force: true }) };
  },
};

function postgres(serverUrl: string): Backend {
  return {
    name: 'postgres',
    async createDatabase() {
      const name = `${TEST_DATABASE_PREFIX}_${process.pid}_${randomBytes(4).toString('hex')}`;
      await queryPostgres(serverUrl, `create database ${name}`);
      const url = new URL(serverUrl);
      url.pathname = `/${name}`;
      return {
        url: url.href,
        location: parseDatabaseUrl(url.href),
        drop: async () => void (await queryPostgres(serverUrl, `drop database if exists ${name} with (force)`)),
      };
    },
  };
}

/** One statement on a connection of its own, straight to the database (no pool, no proxy): its rows. */
export async function queryPostgres<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** Runs one statement on the database at `url` directly, as someone at a SQL prompt would. */
export async function rawSql(url: string, statement: string): Promise<void> {
  const location = parseDatabaseUrl(url);
  if (location.dialect === 'sqlite') {
    const db = new BetterSqlite3(location.path);
    try {
      db.exec(statement);
    } finally {
      db.close();
    }
    return;
  }
  await queryPostgres(url, statement);
}

/**
 * Asks pg_stat_activity, on a connection of its own, until `found` says yes or `ms` pass. Never on a
 * session inside a transaction (the one holding the lock, say): PostgreSQL reads pg_stat_activity once
 * a transaction and answers that snapshot to its end, so a statement that began to wait after the
 * first look was never seen (a flaky failure in a full run, 2026-12-02).
 */
async function watchActivity<T>(url: string, ms: number, what: string, found: (client: pg.Client) => Promise<T | undefined>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const deadline = Date.now() + ms; Date.now() < deadline; await new Promise((r) => setTimeout(r, 10))) {
      const seen = await found(client);
      if (seen !== undefined) return seen;
    }
  } finally {
    await client.end();
  }
  throw new Error(`${what} within ${ms} ms`);
}

/** Resolves once a session of the database at `url` waits for an advisory lock (one a transaction of the test's holds, say); fails after `ms`. */
export async function waitingForAdvisoryLock(url: string, ms = 10_000): Promise<'waiting'> {
  return watchActivity(url, ms, 'no session waited for an advisory lock', async (client) => {
    const { rows } = await client.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory' and datname = current_database()");
    return rows[0]!.n > 0 ? 'waiting' : undefined;
  });
}

/** The pid of a session of the database at `url` whose statement, holding `piece` (any: ''), waits for a lock (one the test holds, say); fails after `ms`. */
export async function waitingFor(url: string, piece: string, ms: number): Promise<number> {
  return watchActivity(url, ms, `no statement holding ${JSON.stringify(piece)} waited for a lock`, async (client) => {
    const { rows } = await client.query<{ pid: number }>(
      "select pid from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database() and pid <> pg_backend_pid() and strpos(query, $1) > 0",
      [piece],
    );
    return rows[0]?.pid;
  });
}

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

/** What each test database's name begins with (letters, digits, `_`): `almoner_test` unless TEST_DATABASE_PREFIX says, for runs beside others on one server. */
const TEST_DATABASE_PREFIX = /^[a-z_][a-z0-9_]{0,30}$/.test(process.env.TEST_DATABASE_PREFIX ?? '') ? process.env.TEST_DATABASE_PREFIX! : 'almoner_test';

export const BACKENDS: Backend[] = [sqlite, ...(TEST_DATABASE_URL ? [postgres(TEST_DATABASE_URL)] : [])];
export const SQLITE = sqlite;

/** The database as it stood at `version`, through Kysely alone: its connection, for the caller to use and destroy. */
export async function migratedTo(database: Pick<TestDatabase, 'location'>, version: string): Promise<Kysely<any>> {
  const location = database.location;
  const dialect =
    location.dialect === 'sqlite'
      ? new SqliteDialect({ database: new BetterSqlite3(location.path) })
      : new PostgresDialect({ pool: new pg.Pool({ connectionString: location.url, max: 1 }) });
  const db = new Kysely<any>({ dialect });
  const { error } = await new Migrator({ db, provider: { getMigrations: async () => migrations(location.dialect) } }).migrateTo(version);
  if (error) {
    await db.destroy();
    throw error;
  }
  return db;
}

/** Holds the SQLite file at `path` with an exclusive lock, so that whatever reads or copies it waits (a backup of it, a restore from it), until `release`. */
export function holdExclusively(path: string): { release(): void } {
  const holder = new BetterSqlite3(path);
  holder.pragma('locking_mode = EXCLUSIVE');
  holder.exec('BEGIN EXCLUSIVE');
  return {
    release: () => {
      holder.exec('COMMIT');
      holder.close();
    },
  };
}
