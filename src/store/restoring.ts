// A restore's mark on the database it restores: made before the restore looks for anything that has
// the database open and removed only when it has finished (its claims kept, its erasures made again),
// so a server or command started in between refuses to open the database instead of taking requests
// on one being replaced (on SQLite, on the file about to be moved aside), and a restore that was
// killed is seen, with what finishes it (`keep-replaced`). On SQLite the mark is a file beside the
// database; on PostgreSQL a table of its own, which a restore never takes from a backup.
import { accessSync, constants, existsSync, linkSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { ConfigError, type DatabaseLocation } from '../config.js';

/** A process, as far as another can tell later whether it still runs (mayStillRun). */
export interface Owner {
  host: string;
  pid: number;
  /** The machine's boot (Linux's boot_id): after a restart no process of before runs. */
  boot?: string;
  /** When the process started, in clock ticks since boot (/proc/<pid>/stat): a pid used again is another process. */
  started?: string;
  /** Its PID namespace (/proc/self/ns/pid): another container's pid means nothing here, though its host name and boot id may be this one's. */
  pids?: string;
}

/** What the mark says. */
export interface Restoring extends Owner {
  /** When the restore began, and of which backup. */
  began: string;
  from: string;
  /** The files it leaves for keep-replaced, as it writes them. */
  left: string[];
  /** Whether it replaces a database (not: into a new SQLite file, or an empty PostgreSQL database). */
  replacing: boolean;
  /**
   * PostgreSQL: files it has written while nothing is replaced yet (the trail, the claims, the
   * replaced database's dump under way): a restore stopped then replaced nothing, and keep-replaced
   * deletes them (a restore killed during pg_dump was finished as if it had replaced the database: a review).
   */
  scratch?: string[];
  /** PostgreSQL: the dump of the database it replaces (cli/backup.ts), once written: keep-replaced says where it is. */
  whole?: string;
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
      'If none is running, finish it with bin/almoner keep-replaced, naming the files it left beside the database or the dump',
  );

/**
 * Makes the mark, or writes it again (on PostgreSQL: what the restore leaves, as it writes it). On
 * SQLite it is made whole or not at all (a mark cut short by a kill or a full disk could not be
 * read), and only where there is none (two restores at once each took the other's place).
 */
export async function mark(place: MarkPlace, what: Restoring): Promise<void> {
  if ('path' in place) {
    createWhole(restoringFile(place.path), JSON.stringify(what), () => new ConfigError(`another restore has just marked ${place.path}: let it finish`));
    return;
  }
  await place.query(`create table if not exists ${RESTORING_TABLE} (what text not null)`);
  // One statement: a server looking between a delete and an insert would find a mark with nothing in it.
  await place.query(`with gone as (delete from ${RESTORING_TABLE}) insert into ${RESTORING_TABLE} (what) values ($1)`, [JSON.stringify(what)]);
}

/** `file`, with `text`, whole (written beside it, then linked into place), and only if there is none: else `taken()` is thrown. */
function createWhole(file: string, text: string, taken: () => Error): void {
  const beside = `${file}.${process.pid}`;
  rmSync(beside, { force: true }); // a killed run's, with this pid (a link is removed, not followed)
  writeFileSync(beside, text, { mode: 0o644, flag: 'wx' });
  try {
    linkSync(beside, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw taken();
    throw err;
  } finally {
    rmSync(beside, { force: true });
  }
}

/** How long a lock's taker waits for another's (lockFile): enough for two begun at once to settle which goes on. */
const LOCK_WAIT_MS = 250;

/**
 * An exclusive lock on `file` (a SQLite file, made if missing), held while this process lives or
 * until it is released: its release, or undefined while another process holds it. SQLite's own
 * lock, so it goes with its process, killed or not, on this machine or another (through a shared
 * file system that locks). BEGIN EXCLUSIVE holds it until the transaction ends. A moment's wait,
 * not none: two begun at the same instant each hold a shared lock on the way to the exclusive one,
 * and SQLite answers one of them busy at once so that it lets go and the other goes on (waiting for
 * that). With no wait, the other was answered busy too and both were refused; with
 * locking_mode=EXCLUSIVE the loser never let go (it keeps every lock it took), so both waited out
 * the wait and were refused (in half the rounds of test/store/keeping-claim.test.ts; in 117 pairs of
 * 200 with the wait).
 */
export async function lockFile(file: string): Promise<(() => void) | undefined> {
  const held = new (await import('better-sqlite3')).default(file);
  try {
    held.pragma(`busy_timeout = ${LOCK_WAIT_MS}`);
    held.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    held.close();
    if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) return undefined;
    throw err;
  }
  return () => held.close();
}

/**
 * keep-replaced's own claim on a SQLite database's mark, so that two at once do not both make the
 * erasures again (PostgreSQL has the restore's lock): lockFile on the file beside the mark
 * (`….restoring.keeping`, left there, empty), held while it runs, refused (exit 2) while another
 * holds it. A claim written to a file and taken over once its process was gone was taken by two at
 * once, each reading it gone and the second removing the first's (a review, 2026-11-29), and one
 * left by another machine's could not be taken at all. Its release.
 */
export async function claimKeeping(path: string): Promise<() => void> {
  const file = `${restoringFile(path)}.keeping`;
  // One this user may not write SQLite opens read-only, without a word, and a read-only file's lock
  // excludes nothing: two ran at once (a review; one left by root, say, then the service's user).
  try {
    accessSync(file, constants.W_OK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`${file} (keep-replaced's claim) cannot be written by this user: once no keep-replaced is running, delete it, or run as its owner`);
  }
  let release: (() => void) | undefined;
  try {
    release = await lockFile(file);
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_NOTADB') throw new ConfigError(`${file} is a claim an earlier version of keep-replaced left: once none is running, delete it`);
    throw err;
  }
  if (!release) throw new ConfigError(`another keep-replaced of ${path} is running: wait for it`);
  return release;
}

export async function unmark(place: MarkPlace): Promise<void> {
  if ('path' in place) rmSync(restoringFile(place.path), { force: true });
  else await place.query(`drop table if exists ${RESTORING_TABLE}`);
}

/** This process, for a mark (Owner). */
export function thisProcess(): Owner {
  return { host: hostname(), pid: process.pid, boot: bootId(), started: startOf(process.pid), pids: pidNamespace() };
}

/** The mark of a restore by this process, begun at `began`. */
export function thisRestore(from: string, left: string[], replacing: boolean, began = new Date()): Restoring {
  return { ...thisProcess(), began: began.toISOString(), from, left, replacing };
}

/** Whether the process `who` can be seen from here: on this machine (its host name) and in this PID namespace (not another container's). */
export function seenFromHere(who: Owner): boolean {
  if (who.host !== hostname()) return false;
  const here = pidNamespace();
  return who.pids === undefined || here === undefined || who.pids === here;
}

/**
 * Whether the process `who` may still be running: not after the machine restarted (its boot id), nor
 * when its pid is gone or now another process's (started at another time). Another machine's (or
 * container's) cannot be seen from here: it may be.
 */
export function mayStillRun(who: Owner): boolean {
  if (!seenFromHere(who)) return true; // another machine's boot id is always another; another container's pid is not this one's
  if (who.boot !== undefined && bootId() !== undefined && who.boot !== bootId()) return false;
  try {
    process.kill(who.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false; // gone (EPERM: alive, another user's)
  }
  const started = startOf(who.pid);
  return who.started === undefined || started === undefined || started === who.started;
}

/** Whether the process `who` is certainly running: seen from here, alive, and started when it did. */
export function seenRunning(who: Owner): boolean {
  return seenFromHere(who) && who.started !== undefined && mayStillRun(who) && startOf(who.pid) === who.started;
}

function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** A process's start time, in clock ticks since boot: /proc/<pid>/stat's 22nd field (after the name, which may hold spaces). */
function startOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
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
 * Refuses (ConfigError, exit 2) a SQLite database with a restore's mark on it: run by every server
 * and command as it opens the database, before (so that a refusal does not leave a new empty file
 * where the restore is to put its database) and after its connection is open, so that a restore
 * that has not yet made its mark sees that connection and refuses in turn. PostgreSQL's connections
 * are each checked as they open (refuseMarkedConnection).
 */
export async function refuseWhileRestoring(location: DatabaseLocation): Promise<void> {
  if (location.dialect !== 'sqlite' || location.path === ':memory:') return;
  const what = await readMark({ path: location.path });
  if (what) throw new ConfigError(unfinished(what));
}

/** The code of refuseMarkedConnection's error: to a request, the database is unavailable (a 503; unavailable.ts). */
export const RESTORING_CODE = 'ALMONER_RESTORING';

/**
 * Every PostgreSQL connection of a server or command, as it opens (pg-pool's onConnect), before
 * any query of its own: one to a database with a restore's mark is refused. At start-up that is
 * the ConfigError of any marked database (exit 2). A running server keeps its connections open, so
 * a restore beginning sees them and refuses; but one whose connections were all dropped (a restart
 * of PostgreSQL, a failover, `idle_session_timeout`) had none for the restore to see, and reconnected
 * to the database being replaced without a look (a review, 2026-11-29): its requests now get 503s
 * until the restore has finished.
 */
export async function refuseMarkedConnection(client: { query(text: string, params?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }> }): Promise<void> {
  try {
    const what = await readMark({ query: async (text, params = []) => (await client.query(text, params)).rows });
    if (what) throw new ConfigError(unfinished(what));
  } catch (err) {
    // A mark, or one there but not readable (the restore made its table and has not yet written the
    // mark into it: two statements): a database being replaced, a 503, not a 500 (a review, 2026-11-29).
    if (err instanceof ConfigError) Object.assign(err, { code: RESTORING_CODE });
    throw err;
  }
}
