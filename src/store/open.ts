// Opens the database a DATABASE_URL names, with the settings that make a commit durable,
// and brings its schema up to date.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import type { DatabaseLocation } from '../config.js';
import type { Database } from './schema.js';
import { Store } from './store.js';

export async function openStore(location: DatabaseLocation): Promise<Store> {
  const store = new Store(new Kysely<Database>({ dialect: sqliteDialect(location.path) }));
  try {
    await store.migrate();
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

function sqliteDialect(path: string): SqliteDialect {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new BetterSqlite3(path);
  // WAL + synchronous=FULL: a transaction is on disk (fsynced) when COMMIT returns,
  // so a 200 always means the donation survives a crash or power loss.
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  // The CLI and the server share the file; wait for a writer instead of failing at once.
  db.pragma('busy_timeout = 5000');
  return new SqliteDialect({ database: db });
}
