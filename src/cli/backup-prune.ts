// `backup --prune-older-than DAYS`: once a new backup is written and checked, the backups in its
// folder older than DAYS are deleted, so that a timer's backups neither fill the database's disk
// nor keep erased donors' details for longer than that. Only what `backup` wrote is deleted: a
// regular file (never through a link) whose SQLite header bears BACKUP_MARK (a restore's files,
// the live database, a pg_dump and anything else in the folder are left alone), and never the
// backup just written, so that the folder always keeps one.
import { closeSync, lstatSync, openSync, readdirSync, readSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { BACKUP_MARK } from '../store/open.js';

/** A backup's age, by when it was last written (backup writes it once, and never again). */
const DAY_MS = 24 * 60 * 60 * 1000;

/** Whether the file at `path` is a SQLite database bearing BACKUP_MARK as its user_version (bytes 60 to 63 of its header, big-endian). */
function bearsMark(path: string): boolean {
  const header = Buffer.alloc(64);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return false; // unreadable: not this command's to judge, nor to delete
  }
  try {
    if (readSync(fd, header, 0, 64, 0) < 64) return false;
  } finally {
    closeSync(fd);
  }
  return header.toString('latin1', 0, 16) === 'SQLite format 3\0' && header.readUInt32BE(60) === BACKUP_MARK;
}

/**
 * Deletes the backups in `folder` last written more than `olderThanDays` days before `now`, but
 * `written` (the one just made); returns their names, oldest first. A file that cannot be deleted is
 * named in `left`, with why, and the rest are still deleted.
 */
export function pruneBackups(folder: string, olderThanDays: number, written: string, now = Date.now()): { deleted: string[]; left: string[] } {
  const before = now - olderThanDays * DAY_MS;
  const old: Array<{ name: string; at: number }> = [];
  for (const name of readdirSync(folder)) {
    const path = join(folder, name);
    if (path === written) continue;
    const info = lstatSync(path, { throwIfNoEntry: false });
    if (!info?.isFile() || info.mtimeMs >= before || !bearsMark(path)) continue;
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
