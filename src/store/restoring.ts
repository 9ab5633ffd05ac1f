// A restore's mark on the database it restores: made before the restore looks for anything that has
// the database open and removed only when it has finished (its claims kept, its erasures made again),
// so a server or command started in between refuses to open the database instead of taking requests
// on one being replaced (on SQLite, on the file about to be moved aside), and a restore that was
// killed is seen, with what finishes it (`keep-replaced`). On SQLite the mark is a file beside the
// database; on PostgreSQL a table of its own, which pg_restore --clean leaves, as no backup has it.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { CompiledQuery, type Kysely } from 'kysely';
import { ConfigError, type DatabaseLocation } from '../config.js';

/** What the mark says: when the restore began, of which backup, and the files it leaves for keep-replaced. */
export interface Restoring {
  began: string;
  from: string;
  left: string[];
}

/** The PostgreSQL table that holds the mark. */
export const RESTORING_TABLE = 'almoner_restoring';

/** The SQLite mark's file, beside the database. */
export const restoringFile = (path: string): string => `${path}.restoring`;

/** Where a restore's mark is kept: beside the SQLite file at `path`, or in the PostgreSQL database `query` asks. */
export type MarkPlace = { path: string } | { query: (text: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>> };

export async function readMark(place: MarkPlace): Promise<Restoring | undefined> {
  if ('path' in place) {
    const file = restoringFile(place.path);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Restoring) : undefined;
  }
  if ((await place.query('select to_regclass($1) as t', [RESTORING_TABLE]))[0]?.t == null) return undefined;
  const row = (await place.query(`select what from ${RESTORING_TABLE} limit 1`))[0];
  return row && (JSON.parse(String(row.what)) as Restoring);
}

/** Makes the mark; readable by this user only on SQLite, as it names the backup's files. */
export async function mark(place: MarkPlace, what: Restoring): Promise<void> {
  if ('path' in place) {
    writeFileSync(restoringFile(place.path), JSON.stringify(what), { flag: 'wx', mode: 0o600 });
    return;
  }
  await place.query(`create table if not exists ${RESTORING_TABLE} (what text not null)`);
  await place.query(`insert into ${RESTORING_TABLE} (what) values ($1)`, [JSON.stringify(what)]);
}

export async function unmark(place: MarkPlace): Promise<void> {
  if ('path' in place) rmSync(restoringFile(place.path), { force: true });
  else await place.query(`drop table if exists ${RESTORING_TABLE}`);
}

/** Said of a database with a restore's mark on it. */
export function unfinished(what: Restoring): string {
  return (
    `a restore of this database began at ${what.began} (from ${what.from}) and has not finished. If it is still running, wait for it; ` +
    `if it was stopped, finish it with bin/almoner keep-replaced (it reads ${what.left.length ? what.left.join(' and ') : 'the files it left'}), then start again`
  );
}

/**
 * Refuses (ConfigError, exit 2) a database with a restore's mark on it: run by every server and
 * command as it opens the database, after its connection is open, so that a restore that has not
 * yet made its mark sees that connection and refuses in turn.
 */
export async function refuseWhileRestoring<DB>(location: DatabaseLocation, db: Kysely<DB>): Promise<void> {
  if (location.dialect === 'sqlite' && location.path === ':memory:') return;
  const place: MarkPlace =
    location.dialect === 'sqlite' ? { path: location.path } : { query: async (text, params = []) => (await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, params))).rows };
  const what = await readMark(place);
  if (what) throw new ConfigError(unfinished(what));
}
