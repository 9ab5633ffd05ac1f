// A restore's mark on the database it restores: made before the restore looks for anything that has
// the database open and removed only when it has finished (its claims kept, its erasures made again),
// so a server or command started in between refuses to open the database instead of taking requests
// on one being replaced (on SQLite, on the file about to be moved aside), and a restore that was
// killed is seen, with what finishes it (`keep-replaced`). On SQLite the mark is a file beside the
// database; on PostgreSQL a table of its own, which a restore never takes from a backup.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { CompiledQuery, type Kysely } from 'kysely';
import { ConfigError, type DatabaseLocation } from '../config.js';

/** What the mark says. */
export interface Restoring {
  /** When the restore began, and of which backup. */
  began: string;
  from: string;
  /** The files it leaves for keep-replaced, as it writes them. */
  left: string[];
  /** Whether it replaces a database (not: into a new SQLite file, or an empty PostgreSQL database). */
  replacing: boolean;
  /** Its process, so that keep-replaced can tell whether it still runs (on PostgreSQL a lock tells: restoreLock). */
  host: string;
  pid: number;
}

/** The PostgreSQL table that holds the mark. */
export const RESTORING_TABLE = 'almoner_restoring';

/**
 * The PostgreSQL advisory lock a restore holds on its session for its whole run, and keep-replaced
 * for its own: while one holds it, the other does not start (a keep-replaced run while the restore
 * was still at work removed its mark, and a server then served the database pg_restore replaced).
 */
export const RESTORE_LOCK = 7_261_737_420;

/** The SQLite mark's file, beside the database. */
export const restoringFile = (path: string): string => `${path}.restoring`;

/** Where a restore's mark is kept: beside the SQLite file at `path`, or in the PostgreSQL database `query` asks. */
export type MarkPlace = { path: string } | { query: (text: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>> };

/** The mark, if there is one. One that is there but cannot be read is refused, naming it (exit 2). */
export async function readMark(place: MarkPlace): Promise<Restoring | undefined> {
  let text: string;
  let where: string;
  if ('path' in place) {
    where = restoringFile(place.path);
    if (!existsSync(where)) return undefined;
    try {
      text = readFileSync(where, 'utf8');
    } catch (err) {
      throw unreadable(where, (err as Error).message);
    }
  } else {
    where = `the table ${RESTORING_TABLE}`;
    if ((await place.query('select to_regclass($1) as t', [RESTORING_TABLE]))[0]?.t == null) return undefined;
    const row = (await place.query(`select what from ${RESTORING_TABLE} limit 1`))[0];
    text = row ? String(row.what) : '';
  }
  try {
    return JSON.parse(text) as Restoring;
  } catch (err) {
    throw unreadable(where, (err as Error).message);
  }
}

const unreadable = (where: string, why: string) =>
  new ConfigError(
    `a restore has marked this database (${where}), but the mark cannot be read (${why}): a restore may be running, or have stopped early. ` +
      'If none is running, finish it with bin/almoner keep-replaced, naming the files it left beside the database or the dump, then remove the mark by hand',
  );

/** Makes the mark, or writes it again (what the restore leaves, as it writes it). */
export async function mark(place: MarkPlace, what: Restoring): Promise<void> {
  if ('path' in place) {
    // Whole or not at all: a mark cut short by a kill or a full disk could not be read.
    const file = restoringFile(place.path);
    writeFileSync(`${file}.${process.pid}`, JSON.stringify(what), { mode: 0o644 });
    renameSync(`${file}.${process.pid}`, file);
    return;
  }
  await place.query(`create table if not exists ${RESTORING_TABLE} (what text not null)`);
  // One statement: a server looking between a delete and an insert would find a mark with nothing in it.
  await place.query(`with gone as (delete from ${RESTORING_TABLE}) insert into ${RESTORING_TABLE} (what) values ($1)`, [JSON.stringify(what)]);
}

export async function unmark(place: MarkPlace): Promise<void> {
  if ('path' in place) rmSync(restoringFile(place.path), { force: true });
  else await place.query(`drop table if exists ${RESTORING_TABLE}`);
}

/** The mark of a restore by this process, begun now. */
export function thisRestore(from: string, left: string[], replacing: boolean, began = new Date()): Restoring {
  return { began: began.toISOString(), from, left, replacing, host: hostname(), pid: process.pid };
}

/**
 * Whether the restore that made `what` may still be running (SQLite: its process on this machine,
 * by pid, and a restore, as far as /proc tells). Another machine's cannot be seen from here: it may be.
 */
export function mayStillRun(what: Restoring): boolean {
  if (what.host !== hostname()) return true;
  try {
    process.kill(what.pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
  try {
    return readFileSync(`/proc/${what.pid}/cmdline`, 'utf8').includes('restore'); // a pid used again by another program is not the restore
  } catch {
    return true;
  }
}

/** Said of a database with a restore's mark on it; `then`, what to do once it is finished. */
export function unfinished(what: Restoring, then = 'then start again'): string {
  return (
    `a restore of this database began at ${what.began} (from ${what.from}) and has not finished. If it is still running, wait for it; ` +
    `if it was stopped, finish it with bin/almoner keep-replaced${what.left.length ? ` (it reads ${what.left.join(' and ')})` : ''}, ${then}`
  );
}

/**
 * Refuses (ConfigError, exit 2) a database with a restore's mark on it: run by every server and
 * command as it opens the database, after its connection is open (`db`), so that a restore that
 * has not yet made its mark sees that connection and refuses in turn; on SQLite also before, so
 * that a refusal does not leave a new empty file where the restore is to put its database.
 */
export async function refuseWhileRestoring<DB>(location: DatabaseLocation, db?: Kysely<DB>): Promise<void> {
  if (location.dialect === 'sqlite' && location.path === ':memory:') return;
  if (location.dialect === 'postgres' && !db) return;
  const place: MarkPlace =
    location.dialect === 'sqlite' ? { path: location.path } : { query: async (text, params = []) => (await db!.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, params))).rows };
  const what = await readMark(place);
  if (what) throw new ConfigError(unfinished(what));
}
