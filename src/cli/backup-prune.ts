// `backup --prune-older-than DAYS`: once a new backup is written and checked, the backups in its
// folder older than DAYS are deleted, so that a timer's backups neither fill the disk nor keep erased
// donors' details for longer than that. Only what `backup` wrote of this database is deleted: a
// regular file (never through a link) of this user's that is a SQLite copy bearing BACKUP_MARK and
// the database's own number in its header (migration 0022), or a pg_dump archive this database's
// audit trail records `backup` writing at that path (a pg_dump archive carries no mark of ours);
// another database's backups, a restore's files, the live database, a pg_dump taken by hand and
// anything else in the folder are left alone; and never the backup just written, so that the folder
// always keeps one.
import { closeSync, lstatSync, openSync, readdirSync, readSync, realpathSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BACKUP_MARK } from '../store/open.js';

/** A backup's age, by when it was last written (backup writes it once, and never again). */
const DAY_MS = 24 * 60 * 60 * 1000;

/** The part of the name of a file a restore keeps beside its target (`almoner.db.replaced-<time>`, its side files, trail and claims). */
const RESTORE_KEPT = '.replaced-';

/**
 * Whether a file owned by `uid` is this user's to prune: another user's backup, in a folder both may
 * write to (one with the sticky bit, as /tmp, which backup takes), is theirs. Until 2026-12-01 root
 * deleted other users' backups there, and another user's made every run of theirs fail (EPERM, exit
 * 1) once it was old, readable and could not be deleted (a review).
 */
const mine = (uid: number) => process.getuid === undefined || uid === process.getuid();

/** The bytes of a SQLite database's header (SQLite's file format, 1.3). */
const SQLITE_HEADER_BYTES = 100;

/** The first SQLITE_HEADER_BYTES of the file at `path`, or fewer; none where it cannot be read (not this command's to judge, nor to delete). */
function headerOf(path: string): Buffer {
  const header = Buffer.alloc(SQLITE_HEADER_BYTES);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return Buffer.alloc(0);
  }
  try {
    return header.subarray(0, readSync(fd, header, 0, SQLITE_HEADER_BYTES, 0));
  } finally {
    closeSync(fd);
  }
}

/** A SQLite backup's header: whether it bears BACKUP_MARK (its user_version), and its database's number (its application_id, migration 0022); undefined for a file that is neither. */
function sqliteBackup(header: Buffer): { database: number } | undefined {
  if (header.length < SQLITE_HEADER_BYTES || header.toString('latin1', 0, 16) !== 'SQLite format 3\0' || header.readUInt32BE(60) !== BACKUP_MARK) return undefined;
  return { database: header.readInt32BE(68) };
}

/**
 * What `backup` wrote of the database `written` (the backup just made) is a backup of, of the files
 * in a folder: a SQLite database bearing BACKUP_MARK as its user_version (bytes 60 to 63 of its
 * header, big-endian) and the same database's number as `written` (bytes 68 to 71), or none (a
 * backup taken before migration 0022, whose database cannot be told: deleted as before; none is
 * deleted when `written` is no SQLite backup, a pg_dump archive); or a pg_dump archive (`PGDMP`) at one of the paths in `dumpsWritten` (the audit trail's `backup` entries).
 */
export function backupWritten(written: string, dumpsWritten: ReadonlySet<string>): (path: string) => boolean {
  const database = sqliteBackup(headerOf(written))?.database;
  // Each path by its folder's real path: an entry names the path as backup was given it, and the folder may be reached
  // through a symbolic link one time and not the next (such an archive was kept for ever until 2026-12-01: a review).
  const real = new Map<string, string | undefined>();
  const canonical = (path: string): string | undefined => {
    const folder = dirname(path);
    if (!real.has(folder)) {
      try {
        real.set(folder, realpathSync(folder));
      } catch {
        real.set(folder, undefined); // gone, or not to be looked into: only the path as written is known
      }
    }
    const at = real.get(folder);
    return at === undefined ? undefined : join(at, basename(path));
  };
  let dumpPaths: Set<string> | undefined;
  return (path) => {
    const header = headerOf(path);
    const backup = sqliteBackup(header);
    if (backup !== undefined) return database !== undefined && (backup.database === database || backup.database === 0);
    if (header.toString('latin1', 0, 5) !== 'PGDMP') return false;
    if (dumpsWritten.has(path)) return true;
    dumpPaths ??= new Set([...dumpsWritten].flatMap((p) => canonical(p) ?? []));
    const here = canonical(path);
    return here !== undefined && dumpPaths.has(here);
  };
}

/**
 * Deletes the backups in `folder` (those `ours` says backup wrote) last written more than
 * `olderThanDays` days before `now`, but `written` (the one just made); returns their names, oldest first. A file that cannot be deleted is
 * named in `left`, with why, and the rest are still deleted.
 */
export function pruneBackups(folder: string, olderThanDays: number, written: string, ours: (path: string) => boolean, now = Date.now()): { deleted: string[]; left: string[] } {
  const before = now - olderThanDays * DAY_MS;
  const old: Array<{ name: string; at: number }> = [];
  for (const name of readdirSync(folder)) {
    const path = join(folder, name);
    // A restore's files (besideFile in backup.ts): the database it replaced is renamed beside its target, as old as it was, and
    // bears the mark if it was a backup (a restore over one); it is keep-replaced's to read (deleted until 2026-12-01: a review).
    if (path === written || name.includes(RESTORE_KEPT)) continue;
    const info = lstatSync(path, { throwIfNoEntry: false });
    if (!info?.isFile() || info.mtimeMs >= before || !mine(info.uid) || !ours(path)) continue;
    old.push({ name, at: info.mtimeMs });
  }
  old.sort((a, b) => a.at - b.at || a.name.localeCompare(b.name));
  const deleted: string[] = [];
  const left: string[] = [];
  for (const { name } of old) {
    try {
      unlinkSync(join(folder, name));
      deleted.push(name);
    } catch (err) {
      left.push(`${name} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  return { deleted, left };
}
