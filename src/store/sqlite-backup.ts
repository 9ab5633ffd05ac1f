// Backups of a SQLite database: taken while the server runs and keeps answering, checked before
// they are reported, and put back only while nothing has the database open. (PostgreSQL has its
// own tools for this: see the README.)
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fchmodSync, fsyncSync, linkSync, lstatSync, openSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, type Stats } from 'node:fs';
import { uptime } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { toAuditRecord, type AuditRecord } from './audit.js';
import { readLedger, readLedgerRows, type LedgerCopy, type LedgerPages, type LedgerRow } from './claims.js';
import { newerThanThis } from './migrations/index.js';
import { BACKUP_MARK, backupGiven, bearsBackupMark, PRIVATE_FILE } from './open.js';
import { thisProcess, type Owner } from './restoring.js';

/** What a checked copy holds. */
export interface CopySummary {
  bytes: number;
  charities: number;
  donations: number;
  idempotencyKeys: number;
  giftaidClaims: number;
  /** The last migration the copy has: the schema version it was made with. */
  schema: string;
}

/** Not done, and nothing changed: the operator asked for something that cannot be done as asked. */
export class CopyRefused extends Error {}

async function driver(): Promise<typeof BetterSqlite3> {
  return (await import('better-sqlite3')).default;
}

/**
 * Opens the database at `path` to read only, for `use`. A read-only connection to a database in
 * WAL mode makes the -wal and -shm files it needs and, unable to checkpoint, leaves them when it
 * closes. Beside a backup file (`tidy`) that had none (a copy of a live database, or one restored
 * before), those it made are removed again once it has closed, if the WAL is still empty: checking
 * or restoring a backup leaves its folder as it was. Never beside the live database a backup is
 * taken from: a server that opened it meanwhile would have them removed under it.
 */
async function readingOnly<T>(path: string, use: (db: BetterSqlite3.Database) => T, { tidy }: { tidy: boolean }): Promise<T> {
  const Database = await driver();
  const made = tidy ? ['-wal', '-shm'].filter((suffix) => !existsSync(path + suffix)) : [];
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return use(db);
  } finally {
    db.close();
    if (made.includes('-wal') && existsSync(`${path}-wal`) && statSync(`${path}-wal`).size === 0) {
      for (const suffix of made) rmSync(path + suffix, { force: true });
    }
  }
}

const hasTable = (db: BetterSqlite3.Database, name: string): boolean =>
  db.prepare("select 1 from sqlite_master where type = 'table' and name = ?").get(name) !== undefined;

/**
 * Copies the database at `source` to `out`. The copy is read from one snapshot: in WAL mode a
 * reader never blocks the writer, so a server using the database keeps answering and committing,
 * and the copy holds exactly what was committed when it began. It is written beside `out`, fsynced
 * and checked, then renamed into place: `out` is a whole, checked copy or nothing.
 */
export async function backUpSqlite(source: string, out: string): Promise<CopySummary> {
  return writeNewBackup(out, async (partial) => {
    await copyRows(source, partial, out, { tidy: false, userVersion: BACKUP_MARK }); // the live database
    return checkCopy(partial);
  });
}

/**
 * A new backup at `out`, which `write` makes in a file beside it (`out.partial-<pid>-<place>`, made first,
 * empty and its owner's alone, in a folder no other user may write: putInPlace), then put at `out`
 * only if nothing is there (placeAsNew): SQLite's copy, or PostgreSQL's pg_dump archive (cli/backup.ts).
 * `beforePlace`, given what `write` gave, runs once the copy is whole, checked and fsynced, just
 * before it is put at `out` (PostgreSQL's audit entry, by which --prune-older-than knows the archive).
 * A SIGTERM or SIGINT meanwhile removes the file beside `out` (`write`'s `stopped` is aborted: a
 * pg_dump it runs is killed) and ends the process as the signal would have: until 2026-12-02 the
 * signal ended it at once and that file was left for ever (a review). One that comes during a
 * synchronous step (SQLite's VACUUM INTO, its integrity check) is seen once that step is done.
 */
export function writeNewBackup<T>(out: string, write: (partial: string, stopped: AbortSignal) => Promise<T>, beforePlace?: (written: T) => Promise<void>): Promise<T> {
  return putInPlace(out, write, () => {}, { overwrite: false, beforePlace, stopOnSignal: true });
}

/**
 * Puts `partial` at `target` only if nothing is there: a hard link, which fails if the name is
 * taken, where a rename replaces what is there. The command looks for a file of that name before it
 * begins, but another backup to the same name begun at the same moment (overlapping timers, a
 * script run again while its first run still went) looked too, found none, and each renamed its
 * copy into place, the second over the first, both saying `backup written` (a review, 2026-11-30:
 * in 8 rounds of 15). A file system without hard links (some FUSE and network ones) is looked at
 * first and then renamed into, as before.
 */
function placeAsNew(partial: string, target: string): void {
  try {
    linkSync(partial, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      // A link there (one to nothing, too) is no file another command wrote (said so until 2026-12-01; a review); never followed.
      if (lstatSync(target, { throwIfNoEntry: false })?.isSymbolicLink()) throw linkRefused(target);
      throw new CopyRefused(`${target} was written meanwhile, by another command (another backup to the same name, begun at the same time?): it is left as it is, and this copy is not kept; give the backup a new name`);
    }
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    if (lstatSync(target, { throwIfNoEntry: false })?.isSymbolicLink()) throw linkRefused(target); // rename would replace it
    if (existsSync(target)) throw new CopyRefused(`${target} was written meanwhile, by another command: it is left as it is, and this copy is not kept; give the backup a new name`);
    renameSync(partial, target);
    return;
  }
  rmSync(partial, { force: true });
}

const linkRefused = (target: string) =>
  new CopyRefused(`${target} is a symbolic link, put there while this backup was made: a backup is never written through a link, so it is refused; the link is left as it is, and this copy is not kept; give the backup a new name`);

/**
 * Writes what the database at `source` holds (with its WAL, if it has one) to a new file at `to`,
 * from one read snapshot, with VACUUM INTO: the rows, not the pages. A copy of the pages (SQLite's
 * backup API, or the file's bytes) also carries their free space, where SQLite leaves what a
 * change or deletion replaced: a backup taken after a donor's erasure held the erased name, e-mail
 * and address, and kept them as long as the backup was kept. The copy is one self-contained file
 * (rollback journal, not WAL); the server sets WAL again when it opens a restored copy.
 */
async function copyRows(source: string, to: string, destination: string, { tidy, userVersion = 0, databaseNumber = 0 }: { tidy: boolean; userVersion?: number; databaseNumber?: number }): Promise<void> {
  let read = false;
  await readingOnly(source, (opened) => {
    opened.pragma('busy_timeout = 5000');
    // Also for the copy: building it, SQLite moves rows between pages, and would leave copies of
    // them in the space they leave, where an erasure after a restore could not reach them.
    opened.pragma('secure_delete = ON');
    opened.prepare('select count(*) from sqlite_master').get();
    read = true;
    // A backup's backup is refused, as every command refuses a backup for its database (open.ts): `cp` copies one whole.
    if (userVersion === BACKUP_MARK && bearsBackupMark(opened)) throw backupGiven(source);
    try {
      opened.prepare('vacuum into ?').run(to);
    } catch (err) {
      // SQLite names neither file, or only the one beside the destination ("unable to open database: x.db.partial-123").
      throw new Error(`cannot write ${destination} (first as ${basename(to)} beside it): ${(err as Error).message}`);
    }
  }, { tidy }).catch((err: unknown) => {
    if (read) throw err;
    const hint =
      (err as { code?: string }).code === 'SQLITE_READONLY_DIRECTORY'
        ? ` (to read a database in WAL mode SQLite makes its -shm file beside it, and this user may not write in ${dirname(source)}: run the command as the user the server runs as)`
        : '';
    throw new Error(`cannot read the database at ${source}: ${(err as Error).message}${hint}`);
  });
  const copy = new (await driver())(to);
  try {
    copy.pragma('journal_mode = DELETE');
    copy.pragma(`user_version = ${userVersion}`); // a backup's mark, or none: a restored database is no backup
    // Restored over a database (--replace), the copy takes that database's number (migration 0022): it
    // is that database going on, and the backups it wrote are still its own to prune. A backup from
    // before 0022 bears none, and 0022 gave the restored database a new one, so those backups were
    // never pruned again (a review, 2026-12-01); one of another database gave it that database's.
    if (databaseNumber !== 0) copy.pragma(`application_id = ${databaseNumber}`);
  } finally {
    copy.close();
  }
}

/**
 * Checks that `path` is a whole Almoner database this version can open: SQLite's integrity check,
 * the schema's migrations (none newer than this version knows), and what it holds.
 */
export async function checkCopy(path: string): Promise<CopySummary> {
  const walBeside = existsSync(`${path}-wal`); // before opening it, which makes one
  let opened = false;
  const check = (db: BetterSqlite3.Database): CopySummary => {
    opened = true;
    let integrity: unknown;
    try {
      integrity = db.pragma('integrity_check', { simple: true });
    } catch (err) {
      throw new CopyRefused(`${path} is not a SQLite database, or is damaged: ${(err as Error).message}`);
    }
    if (integrity !== 'ok') throw new CopyRefused(`${path} is damaged: SQLite's integrity check says ${String(integrity)}`);
    if (!hasTable(db, 'kysely_migration')) {
      // A live database's file in WAL mode copied without its WAL, which held everything since its last checkpoint.
      const walLeftBehind = db.pragma('journal_mode', { simple: true }) === 'wal' && !walBeside;
      throw new CopyRefused(
        walLeftBehind
          ? `${path} is a SQLite database in WAL mode without its WAL beside it, and holds no Almoner schema: a copy of a live database made with cp, say, leaves behind what was still in the WAL. Take backups with bin/almoner backup`
          : `${path} is a SQLite database, but not Almoner's (it has no migrations table)`,
      );
    }
    const applied = (db.prepare('select name from kysely_migration order by name').all() as { name: string }[]).map((r) => r.name);
    const unknown = newerThanThis('sqlite', applied); // a withdrawn one is undone as the restored database is opened
    if (unknown.length) throw new CopyRefused(`${path} was made by a newer Almoner (its schema has ${unknown.join(', ')}): restore it with that version`);
    const count = (table: string) => (db.prepare(`select count(*) as n from ${table}`).get() as { n: number }).n;
    return {
      bytes: statSync(path).size,
      charities: count('charities'),
      donations: count('donations'),
      idempotencyKeys: count('idempotency_keys'),
      giftaidClaims: count('giftaid_claims'),
      schema: applied.at(-1) ?? '(none)',
    };
  };
  try {
    return await readingOnly(path, check, { tidy: true });
  } catch (err) {
    if (opened) throw err;
    throw new CopyRefused(`${path} cannot be opened as a SQLite database: ${(err as Error).message}`);
  }
}

/** Whether another connection (a server, another command) has the database open: it then holds a lock an exclusive one cannot get. */
export async function inUse(path: string): Promise<boolean> {
  const Database = await driver();
  const db = new Database(path, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE; COMMIT');
    return false;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code?.startsWith('SQLITE_BUSY')) return true;
    if (code === 'SQLITE_NOTADB' || code?.startsWith('SQLITE_CORRUPT')) {
      throw new CopyRefused(
        `the database at ${path} is damaged (${(err as Error).message}), so SQLite cannot say whether a server or another command has it open: ` +
          `stop the server, move the file aside (with any -wal and -shm files beside it), then restore into its place`,
      );
    }
    throw err;
  } finally {
    db.close();
  }
}

/**
 * Refuses a restore over the database at `target` without `replace`, or while a server or another
 * command has it open. Asked by the restore before it marks the database too (backup.ts): a restore
 * refused for a running server had marked it first, and a backup or a claim begun in those
 * milliseconds was refused, told that a restore had not finished and to run keep-replaced with a
 * file that never was (a review, 2026-11-30: 2 rounds of 6, restore beside backup). Asked again
 * once it is marked, as a server may have started meanwhile.
 */
export async function refuseOccupied(target: string, replace: boolean): Promise<void> {
  if (!replace) throw new CopyRefused(`there is a database at ${target} already: add --replace to put the backup in its place (the old one is kept beside it, renamed)`);
  if (await inUse(target)) throw new CopyRefused(`the database at ${target} is in use (a server or another command has it open): stop it, then restore`);
}

/** What a restore reads of the database it replaces, before it goes: its audit trail and its claim ledger; and whether it is a copy `backup` wrote (BACKUP_MARK). */
export type Replaced = { trail: AuditRecord[]; ledger: LedgerCopy | LedgerPages; backupCopy?: boolean };

/**
 * What the database at `replaced` (the one a restore moved aside) holds that a restore must not
 * lose: its audit trail, whose erasures are made again (audit.ts's erasuresAfter), and its claim
 * ledger (ClaimLedger.keepFrom takes what the restored one lacks): its claims' rows read from the
 * file again as they are asked for, a claim's at a time (readLedger), while the file is kept beside.
 */
export async function readReplaced(replaced: string): Promise<Replaced> {
  const Database = await driver();
  // Not read-only: a read-only connection to a database in WAL mode leaves -wal and -shm files beside it.
  const open = () => new Database(replaced, { fileMustExist: true });
  const old = open();
  try {
    const trail = hasTable(old, 'audit_log') ? (old.prepare('select * from audit_log order by id').all() as Parameters<typeof toAuditRecord>[0][]).map(toAuditRecord) : [];
    const { every: _, ...ledger } = await readLedger((table) => hasTable(old, table), (query) => old.prepare(query).all() as Record<string, unknown>[]);
    return { trail, ledger: { ...ledger, rowsOf: (claimId) => claimRowsIn(open, claimId) }, backupCopy: bearsBackupMark(old) };
  } finally {
    old.close();
  }
}

/** A claim's rows in the replaced database (LedgerPages), on a connection of their own, closed once they are read. */
async function* claimRowsIn(open: () => BetterSqlite3.Database, claimId: number): AsyncIterable<LedgerRow[]> {
  const db = open();
  try {
    const { rowsOf } = await readLedgerRows((table) => hasTable(db, table), (query) => db.prepare(query).all() as Record<string, unknown>[]);
    yield* rowsOf(claimId);
  } finally {
    db.close();
  }
}

/** The files SQLite keeps beside a database, which it would read with whatever database it finds there. */
const SIDE_FILES = ['-wal', '-shm', '-journal'];

/**
 * Puts the checked backup `from` in place of the database at `target`, which nothing may have open.
 * The copy is written beside the target and fsynced first; only then is an existing database moved
 * aside, renamed with its side files, never deleted, and the copy renamed into place: the target is
 * the old database or the whole backup, never a part of one, and a copy that fails leaves the old
 * one where it was. Side files left without their database (a WAL, which SQLite would replay onto
 * the backup) are refused. The database replaced is kept as `keepAs`. A SIGTERM or SIGINT before
 * the swap stops it: the copy is removed and nothing is moved (putInPlace; the restore holds the
 * signal, so it is not ended by it here: cli/backup.ts).
 */
export async function restoreSqlite(from: string, target: string, { replace, keepAs }: { replace: boolean; keepAs: string }): Promise<{ summary: CopySummary; replaced: boolean }> {
  const summary = await checkCopy(from);
  const exists = existsSync(target);
  let databaseNumber = 0;
  if (exists) {
    await refuseOccupied(target, replace);
    databaseNumber = await numberOf(target);
  } else {
    const stale = SIDE_FILES.map((suffix) => target + suffix).filter((path) => existsSync(path));
    if (stale.length > 0) {
      throw new CopyRefused(
        `${stale.join(' and ')} ${stale.length === 1 ? 'is' : 'are'} beside ${target} without the database ${stale.length === 1 ? 'it belongs' : 'they belong'} to: SQLite would apply ${stale.length === 1 ? 'it' : 'them'} to the backup. Move ${stale.length === 1 ? 'it' : 'them'} away, then restore`,
      );
    }
  }
  await putInPlace(
    target,
    // The rows, as a backup is taken: a backup file with a WAL beside it (copied from a live
    // database) is restored with what that WAL holds, as checkCopy counted it, not without it.
    async (partial) => copyRows(from, partial, target, { tidy: true, databaseNumber }),
    () => {
      if (!exists) return;
      for (const suffix of SIDE_FILES) if (existsSync(target + suffix)) renameSync(target + suffix, keepAs + suffix);
      renameSync(target, keepAs);
    },
    { stopOnSignal: true },
  );
  return { summary, replaced: exists };
}

/** The number migration 0022 gave the database at `path` (its application_id, read through SQLite, as its WAL may hold it), or 0: none, or not to be read. */
async function numberOf(path: string): Promise<number> {
  try {
    return await readingOnly(path, (db) => Number(db.pragma('application_id', { simple: true })), { tidy: false }); // its side files, if any, are moved aside with it
  } catch {
    return 0; // the restore says what is wrong with it, as before
  }
}

/**
 * Puts back what a restore killed in the middle of its swap (restoreSqlite) had moved aside to
 * `keptAs`: the database `target` was, with its side files, when the backup is not yet in its place;
 * or side files moved without their database, which is still in place (without its WAL, committed
 * transactions would be lost). Whether anything was put back. (The copy it was writing goes with
 * removeCopyOf.)
 */
export function undoSwap(target: string, keptAs: string): boolean {
  if (existsSync(target) && existsSync(keptAs)) return false; // the swap was made: nothing to put back
  const moved = [...SIDE_FILES.map((suffix) => keptAs + suffix), keptAs].filter((f) => existsSync(f));
  for (const file of moved) renameSync(file, target + file.slice(keptAs.length));
  return moved.length > 0;
}

/**
 * Undoes a restore's swap (restoreSqlite) whole, for a restore stopped once its backup was in place: the restored database at
 * `target` removed, its side files first (one left beside the database put back would be applied to it), and the one it
 * replaced, kept as `keptAs`, put back in its place with its own (undoSwap); restored into a new file (no `keptAs`), there is
 * then none, as before. Killed half-way, it is keep-replaced's to finish: the restore, if the restored database is still there;
 * else the database put back (undoSwap).
 */
export function undoRestore(target: string, keptAs: string | undefined): void {
  for (const suffix of SIDE_FILES) rmSync(target + suffix, { force: true });
  rmSync(target, { force: true });
  if (keptAs) undoSwap(target, keptAs);
}

/**
 * Where a process runs, as the name of a copy it writes says (partialOf): its machine's name and its
 * PID namespace (a container's pid means nothing outside it), hashed to 8 hexadecimal digits. A copy
 * whose name bears this process's place was written on this machine, in this PID namespace, so
 * whether its process still runs can be told from here (removeStaleCopies).
 */
export function placeOf(who: Pick<Owner, 'host' | 'pids'>): string {
  return createHash('sha256').update(`${who.host}\0${who.pids ?? ''}`).digest('hex').slice(0, 8);
}

let here: string | undefined;
const thisPlace = () => (here ??= placeOf(thisProcess()));

/** The copy that process `pid`, running at `place` (placeOf), writes beside `target` before renaming it into place (putInPlace). */
export const partialOf = (target: string, pid = process.pid, place = thisPlace()): string => `${target}.partial-${pid}-${place}`;

/** A copy's name (partialOf), or one an Almoner before 2026-12-02 wrote (`….partial-<pid>`, no place). */
const PARTIAL_NAME = /\.partial-([0-9]+)(?:-([0-9a-f]{8}))?$/;

/** How long a copy not written to is taken for one no process writes any more, whoever's it is: a day (a backup writes its copy as it goes; a large one takes minutes). */
const STALE_COPY_MS = 24 * 60 * 60 * 1000;

/**
 * The copy the restore (or backup) `who`, known not to run (a restore's mark), was writing beside
 * `target`, removed: its name now, and as an Almoner before 2026-12-02 named it. The names of
 * those removed. A killed restore's copy was left there for ever: keep-replaced left it (until
 * 2026-12-02; a review).
 */
export function removeCopyOf(target: string, who: Owner): string[] {
  const removed: string[] = [];
  for (const name of [partialOf(target, who.pid, placeOf(who)), `${target}.partial-${who.pid}`]) {
    if (!mine(name)) continue;
    rmSync(name, { force: true });
    removed.push(basename(name));
  }
  return removed;
}

/** The regular file at `path` (not a link, never followed), if there is one and it is this user's. */
function mine(path: string): Stats | undefined {
  const info = lstatSync(path, { throwIfNoEntry: false });
  return info?.isFile() && (process.getuid === undefined || info.uid === process.getuid()) ? info : undefined;
}

/**
 * Removes the copies in `folder` that a backup or restore killed before it finished left there
 * (SIGKILL, the machine losing power: putInPlace removes its own on a failure or SIGTERM, but these
 * cannot be caught), and returns their names. Only this user's regular files named as such a copy
 * (partialOf), and only where no process can still be writing them: one written from this machine
 * and PID namespace (its name's place) whose process is gone (process.kill(pid, 0): ESRCH), or which
 * was last written before the machine last started; or any not written to for STALE_COPY_MS (one
 * written elsewhere, another container, a machine sharing the folder, or by an Almoner before
 * 2026-12-02, whose name bears no place). A copy another backup or restore is writing is left. Until
 * 2026-12-02 each was left beside the backups for ever, with every donor in it (a review). Nothing is
 * removed in a folder other users may write to (refuseSharedFolder: backup and restore refuse it).
 */
export function removeStaleCopies(folder: string, now = Date.now()): { removed: string[]; left: string[] } {
  const removed: string[] = [];
  const left: string[] = [];
  try {
    refuseSharedFolder(folder);
  } catch {
    return { removed, left };
  }
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return { removed, left };
  }
  const booted = now - uptime() * 1000;
  for (const name of names) {
    const [, pidText, place] = PARTIAL_NAME.exec(name) ?? [];
    if (pidText === undefined) continue;
    const path = join(folder, name);
    const info = mine(path);
    if (!info) continue;
    const pid = Number(pidText);
    const fromHere = place === thisPlace();
    // This process's own name is putInPlace's to take (openAsNew); one of this machine's may be a copy still being written.
    if (fromHere && pid === process.pid) continue;
    const stale = now - info.mtimeMs > STALE_COPY_MS || (fromHere && (info.mtimeMs < booted - 60_000 || !running(pid)));
    if (!stale) continue;
    try {
      rmSync(path);
      removed.push(name);
    } catch (err) {
      left.push(`${name} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  return { removed: removed.sort(), left };
}

/** Whether process `pid` runs here (EPERM: it does, another user's). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The signals by which an operator or systemd stops a command (Ctrl-C, systemctl stop). */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * Holds the SIGTERM or SIGINT that comes from now until `release()` for the command to act on at its next step, where Node's
 * default ended the process at once (a SQLite restore's: cli/backup.ts): `signal`, the first to come. Held, a putInPlace
 * stopped by it (stopOnSignal) removes its copy and leaves the process to the holder (endBySignal).
 */
export function holdStopSignals(): { readonly signal: NodeJS.Signals | undefined; release(): void } {
  let first: NodeJS.Signals | undefined;
  const hold = (signal: NodeJS.Signals) => {
    first ??= signal;
  };
  for (const s of STOP_SIGNALS) process.on(s, hold);
  return {
    get signal() {
      return first;
    },
    release: () => {
      for (const s of STOP_SIGNALS) process.removeListener(s, hold);
    },
  };
}

/** Ends this process by `signal`, as it would have ended without a handler, unless another handler (a store's, say) is left to end it. */
export function endBySignal(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

/**
 * Writes `target` by way of a file beside it: `write` fills that file, which is then made
 * PRIVATE_FILE and fsynced, `beforePlace` is awaited (writeNewBackup),
 * `beforeRename` makes room, and it is renamed into place, so `target` is whole or untouched; on a
 * failure before that rename the file beside it is removed. With `stopOnSignal` (a backup, a restore), so it is
 * on a SIGTERM or SIGINT, which then ends the process (writeNewBackup), unless the command holds it (holdStopSignals: a restore).
 */
async function putInPlace<T>(
  target: string,
  write: (partial: string, stopped: AbortSignal) => Promise<T>,
  beforeRename: () => void = () => {},
  { overwrite = true, beforePlace, stopOnSignal = false }: { overwrite?: boolean; beforePlace?: (written: T) => Promise<void>; stopOnSignal?: boolean } = {},
): Promise<T> {
  const partial = partialOf(target, process.pid);
  // Made first, empty and its owner's alone (VACUUM INTO takes an empty file, and SQLite gives its
  // journal the file's mode): until 2026-11-29 SQLite made it as the umask allowed, 0644 under the usual
  // 022, and anyone on the machine could open it while the rows went in and read them all (a review).
  // Refused, a file that is not this run's to make is left where it is.
  let fd: number;
  try {
    refuseSharedFolder(dirname(target));
    fd = openAsNew(partial);
  } catch (err) {
    throw new Error(`cannot write ${target} (first as ${basename(partial)} beside it): ${(err as Error).message}`);
  }
  const stop = new AbortController();
  const stopped = (signal: NodeJS.Signals) => {
    for (const s of STOP_SIGNALS) process.removeListener(s, stopped);
    rmSync(partial, { force: true });
    stop.abort(signal); // a pg_dump writing it is killed
    endBySignal(signal); // a store open meanwhile (its row in almoner_instances: withStoreAt) ends the process itself once that row is gone
  };
  if (stopOnSignal) for (const s of STOP_SIGNALS) process.on(s, stopped);
  const refuseIfStopped = async () => {
    if (!stopOnSignal) return;
    // A signal that came during a synchronous step (SQLite's copy or check) waits in libuv's pipe until the event loop next polls,
    // which the second of two setImmediate turns comes after (one alone, begun from the poll phase, runs before it polls again).
    for (let turn = 0; turn < 2; turn++) await new Promise((resolveTurn) => setImmediate(resolveTurn));
    if (stop.signal.aborted) throw new Error(`stopped by ${String(stop.signal.reason)}: ${target} is not written, and the file beside it is removed`);
  };
  try {
    try {
      fchmodSync(fd, PRIVATE_FILE);
    } finally {
      closeSync(fd);
    }
    const result = await write(partial, stop.signal);
    await refuseIfStopped();
    chmodSync(partial, PRIVATE_FILE); // as it was made, whatever happened to it meanwhile
    syncFile(partial);
    if (beforePlace) {
      await beforePlace(result);
      await refuseIfStopped();
    }
    beforeRename();
    if (overwrite) renameSync(partial, target);
    else placeAsNew(partial, target);
    syncFile(dirname(target));
    return result;
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  } finally {
    for (const s of STOP_SIGNALS) process.removeListener(s, stopped);
  }
}

/**
 * Refuses a folder other users can write to, or one inside such a folder, unless it has the sticky
 * bit (as /tmp): there one of them can remove the copy's file between its making and SQLite's
 * writing into it by name, and put their own in its place, to own the backup (a review, as
 * `nobody`, in a folder of mode 0777, after the copy was made O_EXCL), or rename the folder away and
 * put theirs in its place. So too a folder another user owns, or one inside it: its owner can do
 * the same (as OpenSSH's StrictModes holds). Run as root into the service's own folder, that was a
 * copy root wrote by name where the service's user could point the name anywhere, and a restored
 * database the server, run as that user, then refused (until 2026-11-29; reviews): it is to be run
 * as that user. The folder is looked at as named and as it really is, through any link.
 */
export function refuseSharedFolder(dir: string, where = 'where the copy is written'): void {
  const me = process.getuid?.();
  for (const start of new Set([resolve(dir), realpathSync(dir)])) {
    for (let folder = start; ; folder = dirname(folder)) {
      const { mode, uid } = statSync(folder);
      const holds = folder === start ? '' : `, which holds ${dir},`;
      if ((mode & 0o022) !== 0 && (mode & 0o1000) === 0) {
        throw new Error(
          `the folder ${folder}${holds} can be written by other users (mode ${(mode & 0o7777).toString(8).padStart(4, '0')}), so one of them could put a file of theirs ${where}: use a folder only this user can write to (chmod go-w ${folder}), or one with the sticky bit, as /tmp has`,
        );
      }
      if (me !== undefined && uid !== 0 && uid !== me) {
        const owner = userName(uid);
        const runAs = owner ?? `'#${uid}'`; // sudo's form for a user id with no name (a container's volume)
        throw new Error(
          `the folder ${folder}${holds} is ${owner ?? `user ${uid}`}'s, so they could put a file of theirs ${where}: run the command as that user (sudo -u ${runAs} …), or use a folder of this user's`,
        );
      }
      if (dirname(folder) === folder) break;
    }
  }
}

/** A user's name by id, from /etc/passwd; undefined for an id with none. */
function userName(uid: number): string | undefined {
  try {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.split(':')[2] === String(uid));
    return line?.split(':')[0];
  } catch {
    return undefined;
  }
}

/**
 * Creates `path`, which must be new: opened plainly, a file already there was written into, so
 * another user of a folder both could write to (a shared backup folder, /tmp) could make the file
 * first, guessing the pid in its name, and own the backup written into it, every donor in it
 * (until 2026-11-29; a review). One of this user's own, left by a run killed with the same pid, is
 * removed first; anything else there (another's file, a link) is refused.
 */
function openAsNew(path: string): number {
  try {
    return openSync(path, 'wx', PRIVATE_FILE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const there = lstatSync(path);
    if (!there.isFile() || there.uid !== process.getuid?.()) {
      throw new Error(`${path} is already there and is not a file of this user's: remove it, and write to a folder only this user can write to`, { cause: err });
    }
    rmSync(path);
    return openSync(path, 'wx', PRIVATE_FILE);
  }
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
