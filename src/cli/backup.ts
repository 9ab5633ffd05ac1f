// bin/almoner backup and restore: a checked copy of the SQLite database, taken while the server
// runs, and put back while it does not. On PostgreSQL, pg_dump takes the backup (the README shows
// how) and `restore` runs pg_restore for the operator, so that donors erased since come back erased.
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, closeSync, constants, existsSync, lstatSync, openSync, readFileSync, readlinkSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import type pg from 'pg';
import { ukDay } from '../time.js';
import { ConfigError, describeDatabase, parseDatabaseUrl, readPostgresUrl, type DatabaseLocation } from '../config.js';
import { charitiesChangedIn, charityChangesAfter, claimsUnsettledBy, type CharityChange, continuesFrom, entryKey, restoredTrail, erasuresAfter, heldBy, osUser, toAuditRecord, type AuditAction, type AuditEntry, type AuditRecord, type ErasuresSince } from '../store/audit.js';
import { refuseEncoding, SERVER_ENCODING_QUERY, type ServerEncoding } from '../store/migrate.js';
import { newerThanThis } from '../store/migrations/index.js';
import type { CharityRow } from '../store/schema.js';
import { columnsSetBy, type CredentialColumn, OLD_PASSWORD_LEFT, type Store } from '../store/store.js';
import { backUpSqlite, CopyRefused, endBySignal, holdStopSignals, writeNewBackup, readReplaced, refuseOccupied, refuseSharedFolder, removeCopyOf, removeStaleCopies, restoreSqlite, STOP_SIGNALS, undoRestore, undoSwap, type CopySummary, type Replaced } from '../store/sqlite-backup.js';
import { readLedger, readLedgerRows, type DatabaseLedger, type KeptClaims, type LedgerCopy, type LedgerPages, type LedgerQueries, type LedgerRow, type RefusedWhy } from '../store/claims.js';
import { readLedgerFile, writeLedgerFile } from '../store/ledger-file.js';
import { claimKeeping, mark, mayStillRun, readMark, refuseWhileRestoring, RESTORE_LOCK, RESTORING_TABLE, seenFromHere, seenRunning, thisRestore, unfinished, unmark, type MarkPlace, type Restoring } from '../store/restoring.js';
import { connectionRefused, PRIVATE_FILE, refuseBackup } from '../store/open.js';
import { closingClient } from '../store/pg-client.js';
import { INSTANCES_TABLE, runningInstances, runningSaid } from '../store/instances.js';
import { backupWritten, pruneBackups } from './backup-prune.js';
import { count, print, theDatabase, withStoreAt } from './io.js';
import { UsageError } from './usage.js';

const counts = (s: CopySummary) => ({ charities: s.charities, donations: s.donations, schema: s.schema });

/** What a copy holds; `checked`, how it was checked (SQLite's integrity_check, or pg_restore reading a pg_dump archive back). */
const describe = (s: CopySummary, checked = 'integrity ok') =>
  `${(s.bytes / 1048576).toFixed(1)} MB, ${checked}, schema ${s.schema}: ${count(s.charities, 'charity', 'charities')}, ` +
  `${count(s.donations, 'donation')}, ${count(s.idempotencyKeys, 'idempotency key')}, ${count(s.giftaidClaims, 'Gift Aid claim')}`;

const writable = (folder: string) => {
  try {
    accessSync(folder, constants.W_OK);
    return true;
  } catch {
    return false;
  }
};

/** Whether there is a symbolic link at `file`; false where its folder cannot be looked into (the checks after say why, exit 2: a raw EACCES, exit 1, until 2026-12-01). */
const linkAt = (file: string): boolean => {
  try {
    return lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink() === true;
  } catch {
    return false;
  }
};

/** A refusal from the store is the operator's to fix: exit 2. */
async function refusalsAreUsage<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof CopyRefused) throw new UsageError(err.message);
    throw err;
  }
}

/**
 * Removes the copies a backup or restore killed before it finished (SIGKILL, a power cut) left in
 * `folder` (removeStaleCopies), and says which: they were left there for ever, every donor in them
 * (until 2026-12-02; a review). One that cannot be removed is said on stderr, and the command goes on.
 */
function sayStaleCopies(folder: string): void {
  const { removed, left } = removeStaleCopies(folder);
  if (removed.length > 0) print(`removed ${count(removed.length, 'unfinished copy', 'unfinished copies')} that a backup or restore stopped before it finished left in ${folder}: ${namesOf(removed)}`);
  if (left.length > 0) process.stderr.write(`almoner: warning: ${count(left.length, 'unfinished copy', 'unfinished copies')} left by a backup or restore stopped before it finished could not be removed: ${left.join(', ')}\n`);
}

export function backupCommand(): Command {
  return new Command('backup')
    .description('copy the database while the server runs (SQLite: its rows, with VACUUM INTO; PostgreSQL: pg_dump --format=custom), check the copy, and say what it holds')
    .requiredOption('--out <file>', 'where to write the copy (a new file: a backup never overwrites one)')
    .option('--prune-older-than <days>', "then delete the backups in the copy's folder written more than this many days ago (only files backup wrote; never the new one)", pruneDays)
    .action(async ({ out, pruneOlderThan }: { out: string; pruneOlderThan?: number }) => {
      const location = theDatabase();
      if (out.trim() === '') throw new UsageError('--out is empty: give the backup a file name'); // resolve('') is the current folder
      const file = resolve(out);
      // A link to nothing: existsSync follows it and found nothing, and the whole copy was made, then refused as a file
      // "written meanwhile, by another command", which there was not (until 2026-12-01; a review). The link is never followed (placeAsNew).
      if (linkAt(file) && !existsSync(file)) {
        throw new UsageError(`${file} is a symbolic link to ${readlinkSync(file)}, which does not exist: a backup is never written through a link, so it is refused; give the backup a new name, or remove the link`);
      }
      if (existsSync(file)) throw new UsageError(statSync(file).isDirectory() ? `${file} is a folder: give the backup a file name (--out ${join(out, 'almoner-backup.db')}, say)` : `${file} exists already: give the backup a new name`);
      if (!existsSync(dirname(file))) throw new UsageError(`the folder ${dirname(file)} does not exist`);
      if (!writable(dirname(file))) throw new UsageError(`this user (${osUser()}) may not write in the folder ${dirname(file)}`);
      // A database half-restored is no backup's to take (PostgreSQL's mark is read by backUpPostgres).
      await refuseWhileRestoring(location);
      sayStaleCopies(dirname(file));
      // In the database backed up, after the copy: the copy is of what was there before. A backup
      // taken by a user who may read the database but not write it is still a backup: said, not failed.
      let unrecorded: string | undefined;
      const record = async (summary: CopySummary) => {
        try {
          await withStoreAt(location, (store) => store.audit({ action: 'backup', target: file, summary: counts(summary) }));
        } catch (err) {
          unrecorded = (err as Error).message;
        }
      };
      // PostgreSQL: recorded before the archive is put at its name, as --prune-older-than knows an archive only by its entry (pruneAfter):
      // one killed between the two left an archive no prune ever deleted (until 2026-12-02; a review). Now it leaves its file beside
      // (the next backup removes it) and an entry naming a file that is not there, which prunes nothing. SQLite's copy bears its mark.
      const summary = await refusalsAreUsage(() => (location.dialect === 'postgres' ? backUpPostgres(location, file, record) : backUpSqlite(location.path, file)));
      print(`backup written to ${file}: ${location.dialect === 'postgres' ? describe(summary, 'a pg_dump archive pg_restore reads') : describe(summary)}`);
      if (location.dialect === 'sqlite') await record(summary);
      if (unrecorded !== undefined) {
        const unpruned = location.dialect === 'postgres' ? ' (so --prune-older-than will not know it as a backup of this database: delete it yourself once it is old)' : '';
        process.stderr.write(`almoner: warning: the backup is written, but its entry in the audit trail could not be${unpruned}: ${unrecorded}\n`);
      }
      if (pruneOlderThan !== undefined) await pruneAfter(location, dirname(file), pruneOlderThan, file);
    });
}

/**
 * On PostgreSQL, `backup` runs pg_dump for the operator (since 2026-12-01; before, it said to run
 * pg_dump by hand, and the timer was for SQLite only): the whole database, as `pg_dump
 * --format=custom` takes it, but for the rows of running servers (almoner_instances: a restore makes
 * its table again empty), from one snapshot that the counts it reports are read from too, into a
 * file of this user's alone that is put in place only once pg_restore has read it back and found
 * Almoner's schema, and `record` has written its audit entry (once the snapshot's transaction has
 * ended: a store opened by a newer version migrates, and would wait for its locks). Through the
 * connection string's own user and settings (libpqEnvironment: its password never on a command
 * line). Refused while a restore has marked the database.
 */
async function backUpPostgres(location: Extract<DatabaseLocation, { dialect: 'postgres' }>, file: string, record: (summary: CopySummary) => Promise<void>): Promise<CopySummary> {
  const env = libpqEnvironment(location.url);
  return withPostgres(location.url, async (client) => {
    await client.query('begin isolation level repeatable read read only');
    let open = true;
    const end = async () => {
      if (!open) return;
      open = false;
      await client.query('commit');
    };
    try {
      // Idle in its transaction while pg_dump runs: a database's idle_in_transaction_session_timeout ended it under a dump that
      // outlasted it, and the command died of it (an unhandled 'error' event, exit 1, a partial file left: until 2026-12-01, a
      // review). Set aside for this transaction, as pg_dump sets them aside for its own; statement_timeout for the counts.
      await client.query("set local idle_in_transaction_session_timeout = 0; set local statement_timeout = 0");
      const snapshot = (await client.query<{ s: string }>('select pg_export_snapshot() as s')).rows[0]!.s;
      // Read in the snapshot itself: a restore marks the database before pg_restore begins and unmarks it once done, so a
      // snapshot without the mark is of no restore half done (read before the snapshot, a restore could mark and finish between).
      const marked = await readMark(pgPlace(client));
      if (marked) throw new ConfigError(unfinished(marked));
      let held: Record<string, unknown>;
      try {
        [held] = (
          await client.query(
            `select (select count(*) from charities)::int as charities, (select count(*) from donations)::int as donations,
                    (select count(*) from idempotency_keys)::int as keys, (select count(*) from giftaid_claims)::int as claims,
                    (select max(name) from kysely_migration) as schema`,
          )
        ).rows as [Record<string, unknown>];
      } catch (err) {
        if ((err as { code?: string }).code === '42P01') throw new UsageError(`${describeDatabase(location)} holds no Almoner database (${(err as Error).message}): set DATABASE_URL to the server's database`);
        throw err;
      }
      return await writeNewBackup(file, async (partial, stopped) => {
        const { code, ended, stderr } = await runPgTool('pg_dump', ['--format=custom', `--snapshot=${snapshot}`, `--exclude-table-data=${INSTANCES_TABLE}`, `--file=${partial}`, `--dbname=${libpqDbname(env)}`], env, { stopped });
        if (code !== 0) throw new Error(`pg_dump could not write the backup (${ended}), so none was kept:\n${stderr.trim().split('\n').slice(-5).join('\n')}`);
        if ((await schemasOf(partial, env)).almonerIn.length === 0) throw new Error(`pg_restore finds no Almoner schema in what pg_dump wrote, so no backup was kept`);
        return {
          bytes: statSync(partial).size,
          charities: Number(held.charities),
          donations: Number(held.donations),
          idempotencyKeys: Number(held.keys),
          giftaidClaims: Number(held.claims),
          schema: String(held.schema),
        };
      }, async (summary) => {
        await end().catch(() => {}); // pg_dump has read its snapshot: a session ended since takes nothing from the archive
        await record(summary);
      });
    } finally {
      await end().catch(() => {});
    }
  });
}

/**
 * The files' names, oldest first, the first SHOWN_NAMES of them and how many more: a first prune of a
 * folder of two years of backups deleted 2,920, and its line and audit entry named each (90 kB; a review).
 */
const namesOf = (names: readonly string[]): string =>
  names.length <= SHOWN_NAMES ? names.join(', ') : `${names.slice(0, SHOWN_NAMES).join(', ')} and ${names.length - SHOWN_NAMES} more`;
const SHOWN_NAMES = 20;

/** --prune-older-than's days: a whole number from 1 (a day's backups kept at least) to 36500. */
function pruneDays(raw: string): number {
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 1 || n > 36_500) throw new InvalidArgumentError('give a whole number of days from 1 to 36500.');
  return n;
}

/**
 * The backups in `folder` older than `days` deleted (backup-prune.ts), said, and recorded in the audit trail when there were any:
 * one opening of the database for both the trail's `backup` entries (PostgreSQL's archives bear no mark of ours; SQLite's copies do) and the entry.
 */
async function pruneAfter(location: DatabaseLocation, folder: string, days: number, written: string): Promise<void> {
  const left = await withStoreAt(location, async (store) => {
    const dumpsWritten = new Set(location.dialect === 'postgres' ? (await store.auditTrail()).filter((e) => e.action === 'backup').map((e) => e.target) : []);
    const { deleted, left } = pruneBackups(folder, days, written, backupWritten(written, dumpsWritten));
    // One that could not be deleted is said here too: "none deleted" said there was none to delete (until 2026-12-01; a review).
    const notDeleted = left.length > 0 ? `${count(left.length, 'old backup')} could not be (see below)` : '';
    print(
      deleted.length > 0
        ? `deleted ${count(deleted.length, 'backup')} older than ${count(days, 'day')} from ${folder}: ${namesOf(deleted)}${notDeleted && `; ${notDeleted}`}`
        : left.length > 0
          ? `no backup deleted of those in ${folder} older than ${count(days, 'day')}: ${left.length} could not be (see below)`
          : `no backup in ${folder} is older than ${count(days, 'day')}: none deleted`,
    );
    if (deleted.length > 0) {
      try {
        await store.audit({ action: 'backup prune', target: folder, summary: { older_than_days: days, deleted: deleted.length, files: namesOf(deleted) } });
      } catch (err) {
        process.stderr.write(`almoner: warning: the old backups are deleted, but their entry in the audit trail could not be written: ${(err as Error).message}\n`);
      }
    }
    return left;
  });
  if (left.length > 0) throw new Error(`${count(left.length, 'old backup')} could not be deleted: ${left.join(', ')}`);
}

export function restoreCommand(): Command {
  return new Command('restore')
    .description('put a backup in place of the database (stop the server first): one made by `backup` on SQLite, by pg_dump --format=custom on PostgreSQL')
    .argument('<file>', 'the backup')
    .option('--replace', 'replace the database that is there (on SQLite it is kept beside it, renamed, not deleted; on PostgreSQL it is kept as a pg_dump archive beside the backup, with its audit trail)')
    .option('--discard-replaced', "PostgreSQL: do not keep the replaced database's pg_dump (when pg_dump cannot read it: another role's table, a damaged one, no room beside the backup); its audit trail and claims are kept all the same")
    .action(async (from: string, { replace = false, discardReplaced = false }: { replace?: boolean; discardReplaced?: boolean }) => {
      const location = theDatabase({ mayCreate: true });
      if (location.dialect === 'postgres') return restorePostgres(location, resolve(from), replace, discardReplaced);
      if (discardReplaced) throw new UsageError('--discard-replaced is for PostgreSQL: on SQLite the replaced database is kept by renaming it, which costs nothing');
      const file = resolve(from);
      const target = resolve(location.path);
      refuseNoBackup(file);
      // Put in its own place, it left a second copy of every donor's details beside it, and said "restored" (an operator's review).
      if (existsSync(target) && sameFile(file, target)) throw new UsageError(`${from} is the database itself, not a backup of it: give the file bin/almoner backup wrote`);
      if (!existsSync(dirname(target))) throw new UsageError(`the folder ${dirname(target)} does not exist`);
      // The copy is written beside the database, then renamed into place: SQLite's "unable to open database", exit 1, said neither where nor why.
      if (!writable(dirname(target))) throw new UsageError(`this user (${osUser()}) may not write in the folder ${dirname(target)}: run the command as the user the server runs as`);
      // Before the mark is written there: a folder another user can write, or owns (root restoring into the service's), is refused first.
      try {
        refuseSharedFolder(dirname(target));
      } catch (err) {
        throw new Error(`cannot restore to ${target}: ${(err as Error).message}`);
      }
      // Marked before anything is looked at, so that a server starting from now on refuses, and one started before is seen by restoreSqlite.
      const place = { path: target };
      const began = new Date();
      const keptAs = besideFile(target, began);
      const existed = existsSync(target);
      if (existed) await refusalsAreUsage(() => refuseOccupied(target, replace)); // not marked, for others to see, only to be refused
      await markOrRefuse(place, thisRestore(file, existed ? [keptAs] : [], existed, began));
      // From here, a SIGTERM or SIGINT (systemctl stop, Ctrl-C) stops the restore at its next step, and it undoes what it did, removes its
      // mark and ends by the signal: until 2026-12-02 it ended the command at once, the mark and the copy being written left for keep-replaced.
      const stop = holdStopSignals();
      try {
        sayStaleCopies(dirname(target)); // marked: no other restore is at work here
        const { summary, replaced: swapped } = await refusalsAreUsage(() => restoreSqlite(file, target, { replace, keepAs: keptAs })).catch(async (err: unknown) => {
          // Nothing replaced yet, or the restore stands (a failure after the swap): then its mark stays, for keep-replaced.
          if (!(existed ? existsSync(keptAs) : existsSync(target))) await unmark(place);
          else throw notFinished(err, target, existed ? keptAs : undefined);
          if (stop.signal) endStopped(stop, `before it replaced anything: the copy it was writing is removed, and ${existed ? 'the database is as it was' : 'there is no database, as before'}`);
          throw err;
        });
        // A replaced database too damaged to read its trail from does not undo the restore: it is said.
        let replaced: Replaced | undefined;
        let unread: string | undefined;
        if (swapped) {
          try {
            replaced = await readReplaced(keptAs);
          } catch (err) {
            unread = err instanceof Error ? err.message : String(err);
          }
        }
        // Opened as the server would open it (a backup from an earlier version is migrated now), and
        // the restore is the first entry of the restored database's trail after the backup's own.
        const again = await withStoreAt(
          location,
          async (store) => {
            const backupTrail = await store.auditTrail();
            const restored = heldBy(backupTrail);
            // Whether the claims made since the backup were taken in: a claim is refused until they are, or the operator has checked (giftaid.ts).
            // Known only from a replaced database that goes on from the backup, its own settled (not one the server had just made: a review).
            const continuing = replaced && continuesFrom(replaced.trail, backupTrail) ? replaced : undefined;
            const claims_since_backup = continuing && !claimsUnsettledBy(continuing.trail) ? 'kept' : 'unknown';
            await store.audit({ action: 'restore', target, summary: { from: file, replaced_kept_as: swapped ? keptAs : null, ...counts(summary), claims_since_backup } });
            // Should keeping its claims fail, the ledger is in the replaced database, kept beside. Nothing was changed here since the restore.
            const taken = replaced ? await takeIn(store, replaced, restored, { saved: keptAs, remove: false }, continuing && new Map()) : { said: [], finished: true, charities: undefined };
            return { ...taken, charities: charitiesSaid(continuing !== undefined, taken.charities) };
          },
          { duringRestore: true },
        ).catch((err: unknown) => {
          if (stop.signal) return undefined; // undone below
          throw notFinished(err, target, swapped ? keptAs : undefined);
        });
        // Stopped once the backup was in place: that is undone, rather than finished, so the database is as it was whenever the
        // signal came. What was done since (the restore's entry, the claims kept, the erasures made again) was done in the restored
        // database alone, which goes; the one kept aside was only read.
        if (stop.signal || again === undefined) {
          undoRestore(target, swapped ? keptAs : undefined);
          await unmark(place);
          endStopped(stop, `once its backup was in place: that is undone, ${swapped ? 'the database that was there is back in its place, as it was' : 'and there is no database, as before'}`);
          return;
        }
        if (again.finished) await unmark(place);
        if (swapped) print(`the database that was there is kept as ${keptAs}`);
        print(`restored ${file} to ${target}: ${describe(summary)}`);
        const lost = replaced && notInBackup(replaced.ledger.donationCount, summary.donations, keptAs);
        if (lost) print(lost);
        for (const line of again.said) if (line) print(line);
        if (!replaced) {
          if (unread !== undefined) process.stderr.write(`almoner: warning: the database that was there could not be read (${unread}).\n`);
          print(NO_ERASURES);
          print(NO_LEDGER);
        }
        print(again.charities);
      } finally {
        stop.release();
      }
    });
}

/**
 * A restore that failed once its backup was in place (a disk that filled as the restored database was
 * first opened, say): the database is the backup, marked, and every server and command refuses it
 * until keep-replaced finishes it. Said with the error, which alone (`database or disk is full`) said
 * neither that the restore had gone half way nor what to do (a review). The error's code is kept.
 */
function notFinished(err: unknown, target: string, keptAs: string | undefined): Error {
  const message = err instanceof Error ? err.message : String(err);
  const said = new (err instanceof UsageError ? UsageError : Error)(
    `the backup is in place at ${target}${keptAs ? `, and the database that was there is kept as ${keptAs}` : ''}, but the restore did not finish: ${message}. ` +
      'Servers and commands refuse the database until it is finished: once the cause is fixed (room on the disk, say), finish it with bin/almoner keep-replaced',
  );
  const code = (err as { code?: unknown } | null)?.code;
  if (code !== undefined) Object.assign(said, { code });
  return said;
}

/**
 * A SQLite restore stopped by the signal `stop` held (holdStopSignals), once it has undone what it did and removed its mark:
 * `said` of what it undid, and the process ended by that signal, no longer held (endBySignal).
 */
function endStopped(stop: ReturnType<typeof holdStopSignals>, said: string): void {
  const signal = stop.signal!;
  stop.release();
  process.stderr.write(`almoner: the restore was stopped by ${signal} ${said}; its mark is removed\n`);
  endBySignal(signal);
}

/**
 * Finishes a restore that stopped before it had taken in what the replaced database recorded after
 * the backup (killed, the machine lost, or its keeping of claims failed): from what the restore
 * left, named by its mark (restoring.ts) or given, it does again what the restore would have done
 * last, and removes the mark. Each step is a no-op when done already, so it is safe to run again;
 * it refuses while the restore runs.
 */
export function keepReplacedCommand(): Command {
  return new Command('keep-replaced')
    .description(
      "finish a restore that stopped early: keep the Gift Aid claims, erase again the donors, and carry over the charities' credentials, that the replaced database recorded after the backup (safe to run again)",
    )
    .argument(
      '[files...]',
      "what the restore left, if its mark does not name it: on SQLite the replaced database (almoner.db.replaced-<time>); on PostgreSQL its trail (<dump>.replaced-trail-<time>.jsonl) and, if there is one, its claims (<dump>.replaced-claims-<time>.json); or, after a restore into another database, the one the backup came from (its SQLite file, or its postgres:// URL)",
    )
    .option('--not-running', 'the restore that marked the database is not running, though this cannot tell (it ran on another machine or in another container): go ahead')
    .action(async (given: string[], { notRunning = false }: { notRunning?: boolean }) => {
      // A restore into a new SQLite file may have stopped before there was one.
      const location = theDatabase({ mayCreate: true });
      await atMark(location, async (place) => {
        if ('path' in place) await refuseBackup(place.path); // before its claim is made beside it
        // SQLite: two at once would both make the erasures again. Claimed before the mark is read: one that
        // waited for another's claim read the mark that one had removed, and did its work again (a review).
        const release = 'path' in place ? await claimKeeping(place.path) : () => {};
        try {
          await keepReplaced(location, place, given, notRunning);
        } finally {
          release();
        }
      });
    });
}

/** keep-replaced once it holds its claim (or, on PostgreSQL, the restore's lock): reads the mark, refuses while its restore may run, and finishes it. */
async function keepReplaced(location: DatabaseLocation, place: MarkPlace, given: string[], notRunning: boolean): Promise<void> {
  // A mark that cannot be read names no files: those given are taken, and the mark goes once they are.
  let marked: Restoring | undefined;
  let unreadable = false;
  try {
    marked = await readMark(place);
  } catch (err) {
    // Whose it is cannot be told either: the operator says the restore is not running.
    if (!(err instanceof ConfigError) || given.length === 0 || !notRunning) {
      throw err instanceof ConfigError && given.length > 0 ? new UsageError(`${err.message}; with the files named, add --not-running once no restore is running`) : err;
    }
    unreadable = true;
  }
  // PostgreSQL: a pg_restore still at work on the database, its restore's process gone (killed by SIGKILL, the OOM killer): its
  // comment is there until it commits, and until 2026-12-02 keep-replaced took it as one that replaced nothing, deleted the
  // replaced database's files and unmarked, and pg_restore then put the backup in place, the newer data gone for good (a review).
  // Not to be overridden by --not-running: it is seen running.
  if ((marked || unreadable) && !('path' in place)) {
    const at = await stillRestoring(place);
    if (at) {
      throw new UsageError(
        `${at.said} ${at.pids.length === 1 ? 'is' : 'are'} still at work on ${describeDatabase(location)}: the restore ${marked ? `begun at ${marked.began} ` : ''}stopped, but what it started may go on, and yet put the backup in place. ` +
          `Wait for ${at.pids.length === 1 ? 'it' : 'them'} to end, or end ${at.pids.length === 1 ? 'it' : 'them'} (${at.pids.map((pid) => `select pg_cancel_backend(${pid})`).join('; ')}), then run bin/almoner keep-replaced again`,
      );
    }
  }
  // --not-running is the operator's word for what cannot be seen from here, not against a restore seen running.
  if (marked && 'path' in place && mayStillRun(marked) && (!notRunning || seenRunning(marked))) {
    throw new UsageError(
      `the restore begun at ${marked.began} may still be running (process ${marked.pid} on ${marked.host}): wait for it` +
        (seenFromHere(marked) ? '' : `, or, if it is not running, add --not-running`),
    );
  }
  await finish(location, place, marked, unreadable, given);
}

/** What the restore that `marked` the database wrote beside its backup (the replaced database's trail, claims and dump) and its scratch files, deleted: for a restore that replaced nothing. */
function removeRestoreFiles(marked: Restoring): void {
  for (const f of [...marked.left, ...(marked.whole ? [marked.whole] : []), ...(marked.scratch ?? [])]) rmSync(f, { force: true });
}

/** keep-replaced's work, once nothing else is at it: what the restore that `marked` the database would have done last. */
async function finish(location: DatabaseLocation, place: MarkPlace, marked: Restoring | undefined, unreadable: boolean, given: string[]): Promise<void> {
  const done = (said: string) => print(`${said}: ${describeDatabase(location)} may be used again`);
  // SQLite: the copy the restore was writing beside the database goes, whatever else it got as far as (until 2026-12-02 it was
  // left there for ever, every donor in it, unless the swap was undone: a review), and any other left by a backup or restore killed.
  if ('path' in place) {
    const copies = marked ? removeCopyOf(place.path, marked) : [];
    if (copies.length > 0) print(`removed the copy the restore was writing when it stopped: ${copies.join(', ')}`);
    sayStaleCopies(dirname(place.path));
  }
  // Killed in the middle of its swap: the database that was there goes back in its place.
  const keptAs = marked?.replacing && 'path' in place ? marked.left[0] : undefined;
  if (keptAs && 'path' in place && undoSwap(place.path, keptAs)) {
    await unmark(place);
    return done(`the restore begun at ${marked!.began} (from ${marked!.from}) stopped in the middle of putting its backup in place: the database that was there is back, as it was`);
  }
  if ('path' in place && !existsSync(place.path)) {
    if (!marked) throw new UsageError(`there is no database at ${describeDatabase(location)}, and no restore of one is unfinished`);
    await unmark(place);
    return done(`the restore begun at ${marked.began} (from ${marked.from}) stopped before its backup was in place; there is no database yet (restore it again)`);
  }
  // PostgreSQL, with no migrations' table, which every backup holds (restorePostgres refuses one without): pg_restore never committed, so
  // nothing was restored. Into an empty database (or one of another application's) the restore wrote no comment to tell it by, and
  // until 2026-12-02 keep-replaced took it as finished: it made Almoner's tables there, empty, and recorded a restore that never took
  // place (a review). Nothing is recorded, nor made: the database is left as it was, for the restore to be run again.
  if (marked && !('path' in place) && !(await holdsMigrations(place))) {
    removeRestoreFiles(marked);
    await unmark(place);
    return done(`the restore begun at ${marked.began} (from ${marked.from}) stopped before it restored anything: the database is as it was, without Almoner's tables (restore it again)`);
  }
  // PostgreSQL: stopped while pg_restore ran, which rolled back (Ctrl-C, pg_restore killed): nothing was replaced, and what it wrote goes.
  if (marked?.replacing && !('path' in place) && (await replacedNothing(place, marked))) {
    removeRestoreFiles(marked);
    await place.query(NOT_REPLACED_YET_GONE).catch(() => {}); // run as a user that does not own the table: left, naming this restore alone
    await recordKeepReplaced(location, 'the restore had replaced nothing');
    await unmark(place);
    return done(`the restore begun at ${marked.began} (from ${marked.from}) stopped before it replaced anything: the database is as it was`);
  }
  // The files the mark names that the restore got as far as writing, and those given.
  const files = [...new Set([...(marked?.left ?? []).filter((f) => existsSync(f)), ...given.map((f) => (isPostgresUrl(f) ? f : resolve(f)))])];
  if (files.length === 0) {
    // Run when unsure whether a restore finished: it did (until 2026-11-29 this was exit 2).
    if (!marked) return print(`nothing to do: no restore of ${describeDatabase(location)} is unfinished (it bears no mark); to take in what a restore left that it never marked, give its files`);
    if (marked.replacing) {
      // Nothing replaced: what it had written meanwhile (the claims file holds donors' names and addresses, the dump everything) goes.
      for (const f of marked.scratch ?? []) rmSync(f, { force: true });
      await recordKeepReplaced(location, 'the restore had replaced nothing');
      await unmark(place);
      return done(`the restore begun at ${marked.began} (from ${marked.from}) stopped before it replaced anything: the database is as it was`);
    }
    // Into a new or empty database: nothing was replaced, so nothing is to be taken in, but what the restore would have said, and
    // recorded as it would have been: the claims since the backup unknown here, so that giftaid claim refuses until they are settled
    // (a restore killed after pg_restore left none, and the next claim took claim 1's donations again: a review).
    await withStoreAt(
      location,
      async (store) => {
        if (!restoreRecorded(await store.auditTrail(), marked)) {
          await store.audit({ action: 'restore', target: describeDatabase(location), summary: { from: marked.from, began: marked.began, finished_by: 'keep-replaced', claims_since_backup: 'unknown' } });
        }
        await store.audit(keepReplacedEntry(location, { from: '', claims_kept: false, outcome: 'a restore into a new or empty database, finished' }));
      },
      { duringRestore: true },
    );
    await unmark(place);
    print(NO_ERASURES);
    print(NO_LEDGER);
    return done(`the restore begun at ${marked.began} (from ${marked.from}) is finished`);
  }
  const read = await Promise.all(files.map((f) => readLeftOver(f, location)));
  const of = (what: 'trail' | 'ledger') => {
    const from = read.filter((r) => r[what] !== undefined);
    if (from.length > 1) throw new UsageError(`give one replaced ${what === 'trail' ? 'audit trail' : 'claim ledger'}, not ${from.length} (${from.map((r) => r.file).join(', ')})`);
    return from[0];
  };
  const [trail, ledger] = [of('trail'), of('ledger')];
  // The trail tells that a ledger is this database's: alone, another database's claims were taken in.
  if (ledger && !trail) throw new UsageError(`${ledger.file} is a claim ledger without its audit trail: give the trail the same restore left too (….replaced-trail-….jsonl)`);
  // And that it is the trail the same restore left: the ledger's charities' rows are what the trail's changes carry over, and another
  // restore's are older or newer than those changes (until 2026-11-30 taken unchecked: a rotation carried as the password it replaced).
  if (ledger?.besideTrail && trail && !sameStamp(trailStamp(trail.trail ?? []), ledger.besideTrail)) {
    const { entries, last } = ledger.besideTrail;
    const lastAt = last === null ? undefined : recordedAt(last);
    throw new UsageError(
      `${ledger.file} and ${trail.file} were left by two restores, not one: the claims file was written beside a trail of ${entries} entr${entries === 1 ? 'y' : 'ies'}` +
        `${lastAt ? ` (the last recorded at ${lastAt})` : ''}, and that trail holds ${trail.trail?.length ?? 0}. ` +
        'Give the trail and the claims file of one restore (their names end in the same time), or the trail alone',
    );
  }
  // A claims file an older Almoner wrote says no trail (besideTrail): the two restores' names, which end in the time each began, still tell them apart.
  const [ledgerBegan, trailBegan] = [ledger && !ledger.besideTrail && restoreTimeIn(ledger.file, 'claims'), trail && restoreTimeIn(trail.file, 'trail')];
  if (ledgerBegan && trailBegan && ledgerBegan !== trailBegan) {
    throw new UsageError(
      `${ledger!.file} and ${trail!.file} were left by two restores, not one: their names end in two times (${ledgerBegan}, ${trailBegan}). ` +
        'Give the trail and the claims file of one restore (their names end in the same time), or the trail alone',
    );
  }
  const taken = await withStoreAt(
    location,
    async (store) => {
      const current = await store.auditTrail();
      const restored = heldBy(current);
      // A backup and the database it replaced share their history up to the backup: a trail that shares none of it is another database's, whose erasures are not this one's to make.
      // Unless the restore's mark names it: then it is what this restore replaced, with a backup of another database (another machine's),
      // and is taken in as the restore itself takes it in (until 2026-12-01 refused, and the database stayed refused: a review).
      const entries = trail?.trail ?? [];
      const replacedHere = trail !== undefined && (marked?.left ?? []).includes(trail.file);
      if (trail && entries.length > 0 && !replacedHere && !entries.some((e) => restored.has(entryKey(e)))) {
        throw new UsageError(`${trail.file} shares no entry with the audit trail of ${describeDatabase(location)}: it is another database's, not the one this database's restore replaced`);
      }
      // A restore killed before it recorded itself (on PostgreSQL, as soon as pg_restore had committed): recorded
      // now, first, as the restore would have, so that the trail says the data went back to a backup, and which.
      // Whether the claims since the backup are known here once it is done (audit.ts's claimsUnsettledBy): only from a replaced ledger whose own were settled.
      // And only from a database that goes on from the restored backup, with something recorded since: the backup file itself,
      // or a database the server had just made, given as the one the backup came from, settled them (a review).
      // (The restore being finished, killed before it recorded itself, put back the whole of what is there now.) From the
      // restore's own files, the database it replaced, nothing need be recorded since the backup.
      const backupTrail = marked && !restoreRecorded(current, marked) ? current : restoredTrail(current);
      // The exemption is for the restore's own files (its mark names them), not a database given beside its mark: the backup file,
      // given to finish a killed restore into a new file, settled them (a review).
      const ownFiles = trail !== undefined && (marked?.left ?? []).includes(trail.file);
      // Nor from a copy `backup` wrote, given for the database it came from: claims made after that copy are not in it (a review).
      const aBackup = read.some((r) => r.backupCopy === true);
      const settles = ledger !== undefined && !aBackup && !claimsUnsettledBy(entries) && continuesFrom(entries, backupTrail) && (ownFiles || entries.length > backupTrail.length);
      if (marked && !restoreRecorded(current, marked)) {
        await store.audit({
          action: 'restore',
          target: describeDatabase(location),
          summary: { from: marked.from, began: marked.began, finished_by: 'keep-replaced', replaced_left: files.map(shownSource).join(', '), replaced_kept_as: marked.whole ?? null, claims_since_backup: settles ? 'kept' : 'unknown' },
        });
      }
      const copy = { trail: entries, ledger: ledger?.ledger ?? { claims: [], rows: [], withoutDonation: [] } };
      // The claims file a PostgreSQL restore wrote (its mark names it) goes once its claims are kept, as the restore's own would have; never a
      // file the operator named (run again with the same files, it was not there: a review), nor a replaced SQLite database.
      const named = new Set(given.map((f) => (isPostgresUrl(f) ? f : resolve(f))));
      const restoresOwn = ledger !== undefined && ledger.trail === undefined && (marked?.left ?? []).includes(ledger.file) && !named.has(ledger.file);
      // Charities' credentials carried over from a trail given (of this database's history: one that is not is refused above), but
      // for what this database changed since the restore (restoredTrail): its own change stands.
      const changedHere = trail && charitiesChangedIn(current.slice(backupTrail.length));
      const taken = await takeIn(store, copy, restored, ledger && { saved: ledger.file, remove: restoresOwn }, changedHere);
      // What it took in, and from where (a database given by its URL without the password), and whether it kept the claims: until 2026-11-30 only
      // a restore it finished named them (an operator's review). After what it did, so that a run that failed to keep them settles nothing.
      await store.audit(keepReplacedEntry(location, { from: files.map(shownSource).join(', '), claims_kept: settles && taken.finished }));
      const lost = marked?.whole ? notInBackup(ledger?.ledger?.donationCount, await store.count('donations'), marked.whole) : undefined;
      const copyOnly = aBackup
        ? `${read.find((r) => r.backupCopy)!.file} is a copy bin/almoner backup wrote, not the database it came from: what it holds is taken in, but claims made after it are not known here, so giftaid claim refuses until the operator has compared them with what was sent to HMRC (--checked-since-backup)`
        : undefined;
      return { ...taken, said: [marked?.whole && `the database that was there is kept as ${marked.whole}`, lost, taken.charities, ...taken.said, copyOnly] };
    },
    { duringRestore: true },
  );
  for (const line of taken.said) if (line) print(line);
  if (!taken.finished) return;
  if (taken.said.every((line) => !line)) print(`nothing to do: the database holds every claim and erasure that ${files.map(shownSource).join(' and ')} recorded after the backup`);
  if (!trail) print(`no audit trail was given: donors erased after the backup are not erased again by this, nor are charities' passwords and states changed since carried over (give the trail${location.dialect === 'postgres' ? ', <dump>.replaced-trail-<time>.jsonl' : ''})`);
  if (marked || unreadable) {
    await unmark(place);
    done(marked ? `the restore begun at ${marked.began} is finished` : 'the restore is finished');
  }
}

/** A keep-replaced run that took nothing in, recorded all the same (each run is): `outcome` says what it found. */
async function recordKeepReplaced(location: DatabaseLocation, outcome: string): Promise<void> {
  try {
    await withStoreAt(location, (store) => store.audit(keepReplacedEntry(location, { from: '', claims_kept: false, outcome })), { duringRestore: true });
  } catch {
    // A database with no trail to record in (an empty PostgreSQL database a restore into it had not reached): nothing to record.
  }
}

/** A keep-replaced run's audit entry: what it took in (`from`), whether that settled the claims since the backup (audit.ts's claimsUnsettledBy), and what it found. */
const keepReplacedEntry = (location: DatabaseLocation, summary: { from: string; claims_kept: boolean; outcome?: string }): AuditEntry => ({
  action: 'keep-replaced',
  target: describeDatabase(location),
  summary,
});

/** Whether the restore that `marked` the database recorded itself in its `trail` before it stopped (its `restore` entry, from its backup, since it began). */
function restoreRecorded(trail: AuditRecord[], marked: Restoring): boolean {
  const began = Date.parse(marked.began);
  return trail.some((e) => e.action === 'restore' && e.summary.from === marked.from && Date.parse(e.at) >= began);
}

/**
 * `work` on the mark of a restore of the database at `location` (restoring.ts). On PostgreSQL with
 * the restore's lock held on a session of its own, for as long as `work` runs: refused while a
 * restore, or another keep-replaced, holds it.
 */
async function atMark<T>(location: DatabaseLocation, work: (place: MarkPlace) => Promise<T>): Promise<T> {
  if (location.dialect === 'sqlite') return work({ path: resolve(location.path) });
  return withPostgres(location.url, async (client) => {
    await lockRestore(client);
    return work(pgPlace(client));
  });
}

/** The restore's lock (RESTORE_LOCK) on this session, until it ends; refused (exit 2) while another session holds it. */
async function lockRestore(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ got: boolean }>('select pg_try_advisory_lock($1) as got', [RESTORE_LOCK]);
  if (!rows[0]?.got) throw new UsageError('a restore of this database, or a keep-replaced, is running: wait for it');
}

/**
 * A file a restore left, read: the replaced SQLite database (its trail and ledger), a PostgreSQL
 * restore's trail (JSON lines, as `audit --json` prints them) or its claim ledger (one JSON object).
 */
async function readLeftOver(file: string, location: DatabaseLocation): Promise<{ file: string; trail?: AuditRecord[]; ledger?: LedgerCopy | LedgerPages; besideTrail?: TrailStamp; backupCopy?: boolean }> {
  if (isPostgresUrl(file)) return readOtherPostgres(file, location);
  // A connection string mistyped (postgres:/…, libpq's host=… password=…), taken for a path, was shown whole, password and all.
  if (/(?:^|\/)postgres(?:ql)?:|password\s*=/i.test(file)) throw new UsageError('a database to read from is given as postgres://user:password@host:port/database (that one is not: its password is not shown)');
  if (!existsSync(file)) throw new UsageError(`there is no file at ${file}`);
  const unreadable = (err: unknown) => new UsageError(`${file} cannot be read by this user (${osUser()}): ${(err as Error).message}`);
  // Its first bytes, then the rest as it is: a claims file is read without its rows (readLedgerFile), which were read whole until 2026-12-01.
  const header = Buffer.alloc(16);
  try {
    const fd = openSync(file, 'r');
    try {
      readSync(fd, header, 0, 16, 0);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw unreadable(err);
  }
  if (header.toString('latin1') === 'SQLite format 3\0') {
    try {
      return { file, ...(await readReplaced(file)) };
    } catch (err) {
      throw new UsageError(`${file} is a SQLite database that cannot be read: ${(err as Error).message}`);
    }
  }
  const notOurs = new UsageError(`${file} is not what a restore leaves (a replaced SQLite database, a .replaced-trail-….jsonl or a .replaced-claims-….json)`);
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  let one: ReturnType<typeof readLedgerFile>;
  try {
    one = readLedgerFile(file);
  } catch (err) {
    throw unreadable(err);
  }
  if (one && Array.isArray(one.fields.claims)) {
    const { fields: first, rowsOf } = one;
    return {
      file,
      ledger: {
        claims: first.claims,
        charities: Array.isArray(first.charities) ? first.charities : undefined,
        largestDonationId: typeof first.largestDonationId === 'number' ? first.largestDonationId : undefined,
        donationCount: typeof first.donationCount === 'number' ? first.donationCount : undefined,
        rowsOf,
      } as LedgerPages,
      ...(isObject(first.besideTrail) && typeof first.besideTrail.entries === 'number' && { besideTrail: { entries: first.besideTrail.entries, last: typeof first.besideTrail.last === 'string' ? first.besideTrail.last : null } }),
    };
  }
  const text = (() => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw unreadable(err);
    }
  })();
  const lines = text.toString('utf8').split('\n').filter((l) => l.trim() !== '');
  // A replaced database with an empty audit trail left an empty trail file.
  if (lines.length === 0) return { file, trail: [] };
  const parsed = lines.map((l) => {
    try {
      return JSON.parse(l) as unknown;
    } catch {
      throw notOurs;
    }
  });
  const entry = (v: unknown): v is AuditRecord =>
    isObject(v) && typeof v.id === 'number' && typeof v.at === 'string' && typeof v.action === 'string' && typeof v.target === 'string' && isObject(v.summary);
  if (parsed.length > 0 && parsed.every(entry)) return { file, trail: parsed };
  throw notOurs;
}

/** Whether two paths name one file: through a symbolic link or a hard link too (a review found the hard link restored onto itself). */
function sameFile(a: string, b: string): boolean {
  const [x, y] = [statSync(a), statSync(b)];
  return x.dev === y.dev && x.ino === y.ino;
}

/** A backup that is not there, or is a folder (SQLite said "disk I/O error": an operator's review), is refused (exit 2). */
function refuseNoBackup(file: string): void {
  if (!existsSync(file)) throw new UsageError(`there is no backup at ${file}`);
  if (statSync(file).isDirectory()) throw new UsageError(`${file} is a folder, not a backup: give the backup's file`);
}

/** pg_restore, as the README once had the operator run it, and in one transaction: the database is the backup's, or as it was. */
const PG_RESTORE = ['--clean', '--if-exists', '--no-owner', '--single-transaction', '--exit-on-error'];

/**
 * Restores a pg_dump archive into the PostgreSQL database, as `restore` does a SQLite backup. What
 * pg_restore alone does not: it refuses while anything else has the database open; keeps the
 * replaced database's audit trail in a file beside the backup (pg_restore --clean drops the table);
 * and erases again every donor the replaced database erased after the backup, and applies its last
 * retention run again, each audited (restored by hand with pg_restore, they came back without a
 * word, and the trail that recorded their erasure was gone: until 2026-11-28 the README said to).
 */
async function restorePostgres(location: Extract<DatabaseLocation, { dialect: 'postgres' }>, file: string, replace: boolean, discardReplaced: boolean): Promise<void> {
  refuseNoBackup(file);
  const env = libpqEnvironment(location.url);
  const toc = await contentsOf(file, env);
  const made = await schemasOf(file, env);
  if (made.almonerIn.length === 0) throw new UsageError(`${file} holds no Almoner schema (no migrations table): is it a pg_dump --format=custom of Almoner's database?`);
  // One session for the whole restore, holding the restore's lock (restoring.ts): a keep-replaced
  // does not take its mark away while it runs.
  await withPostgres(location.url, async (client) => {
    // A database the server would refuse, before anything is marked or replaced: until 2026-12-02 (an operator's walkthrough
    // of the README) a restore into one in LATIN1 made Almoner's tables there, and serve then refused it.
    refuseEncoding((await client.query<ServerEncoding>(SERVER_ENCODING_QUERY)).rows[0]!);
    await lockRestore(client);
    const here = await almonerSchema(client, made, file);
    // The backup's schema first, read from the file: pg_restore --clean drops and makes again only
    // what the backup holds, so a table a later migration made would be left as it is, and the
    // migrations run after the restore would fail on it, with the restore already committed.
    const backupSchema = await migrationsIn(file, env, here);
    const newer = newerThanThis('postgres', backupSchema); // a withdrawn one is undone as the restored database is opened
    if (newer.length) throw new UsageError(`${file} was made by a newer Almoner (its schema has ${newer.join(', ')}): restore it with that version`);
    const place = pgPlace(client);
    const began = new Date();
    const [keptAs, ledgerAs, wholeAs] = [besideFile(file, began, 'trail', 'jsonl'), besideFile(file, began, 'claims', 'json'), besideFile(file, began, undefined, 'dump')];
    let kept: string | undefined;
    // Servers running on it, before it is marked (a refusal then leaves no mark for a server's refresh to answer 503 for), and again after.
    await refuseRunning(client);
    await refuseNotOwner(client, here);
    // The database as it is, read without migrating it (an empty one stays empty, for the backup's own
    // schema), after it is marked: a server starting from now on refuses, and one started before has
    // its row (instances.ts) and is among the sessions counted.
    await markOrRefuse(place, thisRestore(file, [], true, began));
    const written: string[] = [];
    let now: Awaited<ReturnType<typeof beforeRestore>>;
    try {
      now = await beforeRestore(client);
      // Empty: no table at all. One without Almoner's schema may hold another application's tables, which pg_restore --clean would drop.
      const empty = now.tables === 0;
      if (!replace && !empty) throw new UsageError(`a restore replaces everything ${describeDatabase(location)} holds: add --replace (its audit trail is kept in a file beside the backup)`);
      // What it replaces is kept beside the backup, before anything is replaced (a raw EACCES, exit 1, until 2026-11-29); an empty database leaves nothing to keep.
      if (!empty && !writable(dirname(file))) {
        throw new UsageError(
          `this user (${osUser()}) may not write in the folder ${dirname(file)}, where a restore keeps the replaced database's audit trail and claim ledger beside the backup: ` +
            "copy the backup to a folder this user may write (the service's own), and restore it from there",
        );
      }
      // After the mark: a server that wrote its row since is seen here, and one that writes it after reads the mark (instances.ts).
      await refuseRunning(client);
      if (now.otherSessions > 0) {
        const n = now.otherSessions;
        throw new UsageError(`${n} other session${n === 1 ? ' has' : 's have'} the database open (a server, another command, psql): stop ${n === 1 ? 'it' : 'them'}, then restore`);
      }
      // A backup older than the database's schema: pg_restore --clean drops and makes again what the
      // backup holds, so a later migration's column goes with its table and is added again after; but
      // a table, function or type the backup lacks would stay, and its migration, run again, fail
      // (and a foreign key of another name would stop the drop of what it depends on).
      const ahead = now.schema.filter((name) => !backupSchema.includes(name));
      const missing = ahead.length ? (await objectsOf(client, here)).filter((o) => !holds(toc.entries, o)) : [];
      const left = missing.filter((o) => !missing.some((table) => table.entry === o.of)); // a table's foreign keys go with it
      if (left.length) {
        throw new UsageError(
          `the database's schema is newer than the backup's (it has ${ahead.join(', ')}, the backup does not), and the database holds what the backup does not ` +
            `(${[...new Set(left.map((o) => o.shown))].join(', ')}), which pg_restore --clean would leave in place for those migrations, run again after it, to fail on: ` +
            'restore into an empty database instead (createdb a new one, set DATABASE_URL to it, restore there: the backup is then brought up to date), then point the servers at it',
        );
      }
      // Until pg_restore is about to run nothing is replaced: the mark names what is written meanwhile, before it is, so a
      // restore stopped then is finished by keep-replaced deleting it (scratch); then the mark names what keep-replaced reads.
      const dumping = now.schema.length > 0 && !discardReplaced;
      await mark(place, { ...thisRestore(file, [], true, began), scratch: [keptAs, ledgerAs, ...(dumping ? [wholeAs] : [])] });
      // Donors' data is not in the trail (they are named by reference), but who did what is: readable by this user only. An empty database has none.
      if (!empty) written.push(writeOwn(keptAs, now.trail.map((e) => `${JSON.stringify(e)}\n`).join('')));
      // The claim ledger too, until its claims are kept: pg_restore drops it, and a restore killed before keepClaims lost it.
      // With no claims, for its largest donation id and its charities' rows, which a restore killed after pg_restore must still take in.
      // Its rows a page at a time, as they are read (writeLedgerFile): JSON lines since 2026-12-01, where the ledger was read and written whole.
      if (worthKeeping(now.ledger)) written.push(await writeLedgerFile(ledgerAs, now.ledger, trailStamp(now.trail)));
      // The whole of what is replaced, donations and all.
      if (dumping) {
        await pgDumpReplaced(wholeAs, env, here);
        kept = wholeAs;
      }
      await mark(place, { ...thisRestore(file, written, !empty, began), ...(kept && { whole: kept }) });
      if (now.schema.length > 0) await client.query(markNotReplacedYet(began));
      await pgRestore(file, env, toc.list, made.schemas, now.schemas);
    } catch (err) {
      for (const f of [...written, ...(kept ? [kept] : [])]) rmSync(f, { force: true }); // nothing was replaced
      await unmarkFrom(place, location.url, true).catch((unmarkErr: unknown) => {
        throw new Error(
          `the restore stopped before it replaced anything (${messageOf(err)}), but its mark could not be removed (${messageOf(unmarkErr)}): ` +
            'servers and commands refuse the database until it is; once the database answers, remove it with bin/almoner keep-replaced',
        );
      });
      if (err instanceof StoppedBySignal) {
        process.stderr.write(`almoner: the restore was ${err.message}: nothing was replaced, its mark and the files it wrote are removed\n`);
        endBySignal(err.signal); // as the signal would have ended it, now that what it started is undone
      }
      throw err;
    }
    const empty = now.tables === 0;
    const again = await withStoreAt(
      location,
      async (store) => {
        // The restored trail is the backup's; what the replaced one recorded after it is lost with it, but for the file.
        const backupTrail = await store.auditTrail();
        const restored = heldBy(backupTrail);
        const donations = await store.count('donations');
        // A claim is refused until they are taken in, or the operator has checked (giftaid.ts): so too over a database whose own were unsettled.
        const continues = now.schema.length > 0 && continuesFrom(now.trail, backupTrail);
        const claims_since_backup = continues && !claimsUnsettledBy(now.trail) ? 'kept' : 'unknown';
        await store.audit({ action: 'restore', target: describeDatabase(location), summary: { from: file, replaced_trail_kept_as: empty ? null : keptAs, replaced_kept_as: kept ?? null, charities: await store.count('charities'), donations, claims_since_backup } });
        // Its claims' rows read from the file they were written to before pg_restore dropped them (none without a file: it has no claims).
        const ledger = written.includes(ledgerAs) ? ledgerFromFile(ledgerAs, now.ledger) : { ...now.ledger, rowsOf: noRows };
        const taken = await takeIn(store, { trail: now.trail, ledger }, restored, written.includes(ledgerAs) ? { saved: ledgerAs, remove: true } : undefined, continues ? new Map() : undefined);
        return { donations, ...taken, charities: charitiesSaid(continues, taken.charities) };
      },
      { duringRestore: true },
    ).catch((err: unknown) => {
      // pg_restore has run: as on SQLite, the database is the backup, marked (a review of 2026-11-30's changes found it said only the error here).
      throw notFinished(err, describeDatabase(location), kept);
    });
    if (again.finished) await unmarkFrom(place, location.url).catch((err: unknown) => Promise.reject(notFinished(err, describeDatabase(location), kept)));
    print(`restored ${file} to ${describeDatabase(location)}` + (empty ? '' : `; the audit trail of what it replaced is kept as ${keptAs}`));
    if (kept) print(`the database that was there is kept as ${kept} (a pg_dump archive of its schema ${here})`);
    const lost = notInBackup(now.ledger.donationCount, again.donations, kept);
    if (lost) print(lost);
    for (const line of again.said) if (line) print(line);
    // Into a database that was not Almoner's: what the database the backup came from did since is wherever that database is.
    if (now.schema.length === 0) {
      print(NO_ERASURES);
      print(NO_LEDGER);
    }
    print(again.charities);
  });
}

/**
 * Refuses (exit 2), before anything is marked, a restore run as a database user that does not own (nor has the privileges of
 * a role that owns) the tables, sequences and views in Almoner's schema `here`: pg_restore --clean drops them to make the
 * backup's, which only their owner may do, so it could never succeed. Until 2026-12-02 such a restore failed on its own comment
 * (`must be owner of table kysely_migration`), and its unmark failed the same way, leaving the database marked (a review).
 */
async function refuseNotOwner(client: pg.Client, here: string): Promise<void> {
  const { rows } = await client.query<{ name: string; owner: string; me: string }>(
    `select c.relname as name, pg_get_userbyid(c.relowner) as owner, current_user as me from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and c.relkind in ('r', 'p', 'S', 'v', 'm', 'f') and c.relname <> $2 and not pg_has_role(current_user, c.relowner, 'USAGE')
      order by c.relname`,
    [here, RESTORING_TABLE],
  );
  if (rows.length === 0) return;
  const owners = [...new Set(rows.map((r) => r.owner))];
  const shown = rows.slice(0, 3).map((r) => `${r.name}, owned by ${r.owner}`).join('; ') + (rows.length > 3 ? `; and ${rows.length - 3} more` : '');
  throw new UsageError(
    `the database user this restore runs as (${rows[0]!.me}) does not own ${rows.length === 1 ? 'a table' : `${rows.length} tables`} of the schema ${here} (${shown}): ` +
      `pg_restore --clean drops them to put the backup's in place, which only their owner may do. Nothing was changed: run the restore as their owner (DATABASE_URL's user ${owners.join(' or ')}), or as a member of that role`,
  );
}

/** What a restore needs to know of the database before it: read through `client`, a plain connection, which migrates nothing. */
async function beforeRestore(client: pg.Client): Promise<{ otherSessions: number; tables: number; schema: string[]; schemas: string[]; trail: AuditRecord[]; ledger: DatabaseLedger }> {
  // Clients only: an autovacuum worker busy in the database is listed too, and is no one to stop.
  const sessions = await client.query<{ n: string }>("select count(*) as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'");
  const { has, all } = pgQueries(client);
  const schema = (await has('kysely_migration')) ? (await client.query<{ name: string }>('select name from kysely_migration order by name')).rows.map((r) => r.name) : [];
  const trail = (await has('audit_log')) ? ((await all('select * from audit_log order by id')) as Parameters<typeof toAuditRecord>[0][]).map(toAuditRecord) : [];
  const ledger = await readLedger(has, all);
  // The restore's own mark is not a table the database had.
  const tables = await client.query<{ n: string }>("select count(*) as n from pg_tables where schemaname not in ('pg_catalog', 'information_schema') and tablename <> $1", [RESTORING_TABLE]);
  const schemas = (await client.query<{ name: string }>('select nspname as name from pg_namespace')).rows.map((r) => r.name);
  return { otherSessions: Number(sessions.rows[0]?.n ?? 0), tables: Number(tables.rows[0]?.n ?? 0), schema, schemas, trail, ledger };
}

/** readLedger's questions, asked through `client`. */
function pgQueries(client: pg.Client): LedgerQueries {
  return {
    // In Almoner's schema, the search_path's first: another application's table of that name, later on the path, is not Almoner's.
    has: async (table: string) => (await client.query<{ t: string | null }>('select to_regclass(quote_ident(current_schema()) || $1) as t', [`.${table}`])).rows[0]?.t != null,
    all: async (query: string) => (await client.query<Record<string, unknown>>(query)).rows,
  };
}

/** A claim's rows in the PostgreSQL database at `url` (LedgerPages), on a connection of their own, ended once they are read. */
async function* claimRowsAt(url: string, claimId: number): AsyncIterable<LedgerRow[]> {
  const { default: pgModule } = await import('pg');
  const client = new (closingClient(pgModule))({ connectionString: url });
  client.on('error', () => {}); // as withPostgres's: a connection ended between queries fails the next, which says why
  await client.connect();
  try {
    const { has, all } = pgQueries(client);
    yield* readLedgerRows(has, all).rowsOf(claimId);
  } finally {
    await client.end();
  }
}

/** A claim has no rows: the ledger of a database with no claims. */
async function* noRows(): AsyncIterable<LedgerRow[]> {}

/** A restore's claims file, read back (readLedgerFile) with the ledger it was written from but for its rows, which are read from the file. */
function ledgerFromFile(file: string, head: DatabaseLedger): LedgerPages {
  const read = readLedgerFile(file);
  if (!read) throw new Error(`${file}, the claims file this restore wrote, cannot be read back as one`);
  const { every: _, rowsOf: __, ...rest } = head;
  return { ...rest, rowsOf: read.rowsOf };
}

const isPostgresUrl = (text: string): boolean => /^postgres(?:ql)?:\/\//i.test(text);

/** A database given to keep-replaced by its URL, its scheme in any case (POSTGRES:// as postgres://). */
const givenDatabase = (url: string): DatabaseLocation => parseDatabaseUrl(url.replace(/^[a-z]+:/i, (scheme) => scheme.toLowerCase()));

/** What keep-replaced took in, as it may be shown and recorded: a file's path, or a database's URL without its password. */
function shownSource(source: string): string {
  if (!isPostgresUrl(source)) return source;
  try {
    return describeDatabase(givenDatabase(source));
  } catch {
    return 'a postgres:// URL';
  }
}

/**
 * The audit trail and claim ledger of the PostgreSQL database at `url`, the one a backup came from, as
 * a restore over it would have kept them in files: for a restore made into another database (an
 * empty one), whose replaced database is still at hand. Until 2026-11-29 keep-replaced took files
 * only, and the restore's advice could not be followed on PostgreSQL (an operator's review).
 */
async function readOtherPostgres(url: string, location: DatabaseLocation): Promise<{ file: string; trail: AuditRecord[]; ledger?: LedgerPages }> {
  let other: DatabaseLocation;
  try {
    other = givenDatabase(url);
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/^DATABASE_URL/, 'the database given'));
  }
  const shown = describeDatabase(other);
  if (location.dialect === 'postgres' && shown === describeDatabase(location)) throw new UsageError(`${shown} is the database being finished: give the one the backup came from`);
  const at = other.dialect === 'postgres' ? other.url : url;
  const [now, itsMark] = await withPostgres(at, async (client) => [await beforeRestore(client), await readMark(pgPlace(client))] as const).catch((err: unknown) => {
    throw new UsageError(`${shown} cannot be read: ${(err as Error).message}`);
  });
  // The database being finished, named otherwise (localhost for 127.0.0.1): its mark told (a review).
  if (itsMark) throw new UsageError(`${shown} bears a restore's mark itself: it is a database being restored, not the one a backup came from`);
  if (now.schema.length === 0) throw new UsageError(`${shown} holds no Almoner database`);
  // Its claims' rows read from it again as they are asked for, a claim's at a time, on a connection of their own.
  const { every: _, ...ledger } = now.ledger;
  return { file: shown, trail: now.trail, ...(worthKeeping(now.ledger) && { ledger: { ...ledger, rowsOf: (claimId: number) => claimRowsAt(at, claimId) } }) };
}

/** Which trail a restore's claims file was written beside: how many entries it had, and its last (entryKey). */
interface TrailStamp {
  entries: number;
  last: string | null;
}

/** The time a restore began, as the name of a file it left ends in (besideFile): undefined for a name not of that form (a file renamed). */
function restoreTimeIn(file: string, what: 'trail' | 'claims'): string | undefined {
  return new RegExp(`\\.replaced-${what}-(\\d{4}-\\d\\d-\\d\\dT\\d\\d-\\d\\d-\\d\\d-\\d{3}Z)\\.${what === 'trail' ? 'jsonl' : 'json'}$`).exec(file)?.[1];
}

/** When the entry a trail stamp names was recorded, if the stamp (read from a claims file, which may have been edited) says. */
function recordedAt(key: string): string | undefined {
  try {
    const at = (JSON.parse(key) as unknown[])[1];
    return typeof at === 'string' ? at : undefined;
  } catch {
    return undefined;
  }
}

const trailStamp = (trail: AuditRecord[]): TrailStamp => ({ entries: trail.length, last: trail.length ? entryKey(trail[trail.length - 1]!) : null });
const sameStamp = (a: TrailStamp, b: TrailStamp): boolean => a.entries === b.entries && a.last === b.last;

/** Whether a replaced database's ledger holds anything a restore must take in: claims, donation ids it gave out, or charities (whose credentials it carries over). */
const worthKeeping = (ledger: LedgerCopy | LedgerPages): boolean => ledger.claims.length > 0 || (ledger.largestDonationId ?? 0) > 0 || (ledger.charities?.length ?? 0) > 0;

/** One plain connection to the PostgreSQL database at `url` (which migrates nothing), for `work`. */
async function withPostgres<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const { default: pgModule } = await import('pg');
  const client = new (closingClient(pgModule))({ connectionString: url });
  // A connection the server ends while it is idle (a restart, pg_terminate_backend, a timeout) fails the next query on it,
  // which says why; without a listener its 'error' event ended the command with a stack trace, whatever it was doing.
  client.on('error', () => {});
  // A database or user PostgreSQL does not know: a setting's mistake (exit 2), as openStore says it.
  await client.connect().catch((err: unknown) => {
    throw connectionRefused(err) ?? err;
  });
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * Removes a restore's mark through its own session, or, if that session has gone (terminated, the
 * server restarted), through a new one: until 2026-12-02 a restore whose session was terminated
 * said only node-postgres's `Client has encountered a connection error and is not queryable` and
 * left the database marked, whether pg_restore had rolled back or committed (a review).
 */
async function unmarkFrom(place: ReturnType<typeof pgPlace>, url: string, notReplaced = false): Promise<void> {
  const unmarkThrough = async (at: ReturnType<typeof pgPlace>) => {
    // pg_restore rolled back: its comment (notReplacedYet) stayed. One that cannot be removed (`must be owner`: the comment was
    // never written) does not keep the mark: until 2026-12-02 it did, and the database stayed refused (a review). A comment
    // left names a restore begun at another time than any later one's, so none takes it for its own.
    if (notReplaced) await at.query(NOT_REPLACED_YET_GONE).catch(() => {});
    await unmark(at);
  };
  try {
    await unmarkThrough(place);
  } catch {
    await withPostgres(url, (client) => unmarkThrough(pgPlace(client)));
  }
}

/**
 * How keep-replaced tells, on PostgreSQL, whether a restore stopped while pg_restore ran had replaced
 * the database: just before pg_restore, the restore writes this comment on the migrations' table,
 * which a backup always holds, so pg_restore --clean drops it with the table as it puts the backup's
 * in place, and keeps it if it rolls back. Until 2026-12-02 keep-replaced took every restore stopped
 * then as done: over a database pg_restore had left as it was, it said the restore was finished and
 * recorded one in the trail (a review: 10 of 10 restores stopped by Ctrl-C during pg_restore).
 */
const notReplacedYet = (began: string): string => `almoner: a restore begun at ${began} has not replaced this database`;
/** The comment written: `began` is this restore's own ISO time (digits, `-`, `:`, `.`, `T`, `Z`), nothing to escape. */
const markNotReplacedYet = (began: Date): string => `comment on table kysely_migration is '${notReplacedYet(began.toISOString())}'`;
const NOT_REPLACED_YET_QUERY = "select obj_description(to_regclass('kysely_migration'), 'pg_class') as said";
const NOT_REPLACED_YET_GONE = "do $$ begin if to_regclass('kysely_migration') is not null then comment on table kysely_migration is null; end if; end $$";

/**
 * What is still at work on the database at `place`, as keep-replaced names it, or undefined: a pg_restore's session (its
 * application_name, unless DATABASE_URL set another), or any other client's transaction holding or awaiting a lock on a table
 * of the database (pg_restore --single-transaction holds those it has dropped or made until it commits). Asked outside any
 * transaction: PostgreSQL keeps pg_stat_activity as it was when a transaction first read it.
 */
async function stillRestoring(place: Extract<MarkPlace, { query: unknown }>): Promise<{ said: string; pids: number[] } | undefined> {
  const rows = await place.query(
    `select a.pid, a.application_name as app, coalesce(host(a.client_addr), 'a local socket') as addr, a.state from pg_stat_activity a
      where a.datname = current_database() and a.pid <> pg_backend_pid() and a.backend_type = 'client backend'
        and (a.application_name = 'pg_restore' or exists (select 1 from pg_locks l where l.pid = a.pid and l.locktype = 'relation'
          and l.database = (select oid from pg_database where datname = current_database())))
      order by (a.application_name = 'pg_restore') desc, a.pid`,
  );
  if (rows.length === 0) return undefined;
  const one = (r: Record<string, unknown>) => `${r.app === 'pg_restore' ? 'pg_restore' : 'a session'} (process ${String(r.pid)}${r.app && r.app !== 'pg_restore' ? `, application_name ${String(r.app)}` : ''}, from ${String(r.addr)}, ${String(r.state)})`;
  return { said: rows.map(one).join(', and '), pids: rows.map((r) => Number(r.pid)) };
}

/** Whether the database at `place` has Almoner's migrations' table, where its search_path finds it (as the restore's comment is looked for). */
async function holdsMigrations(place: Extract<MarkPlace, { query: unknown }>): Promise<boolean> {
  const [row] = await place.query("select to_regclass('kysely_migration') is not null as there");
  return row?.there === true;
}

/** Whether the restore that `marked` the database at `place` stopped before pg_restore replaced it: its comment (notReplacedYet) is still there. */
async function replacedNothing(place: Extract<MarkPlace, { query: unknown }>, marked: Restoring): Promise<boolean> {
  const [row] = await place.query(NOT_REPLACED_YET_QUERY);
  return row?.said === notReplacedYet(marked.began);
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A restore's mark (restoring.ts), asked through `client`. */
const pgPlace = (client: pg.Client): { query: (text: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>> } => ({ query: async (text, params) => (await client.query<Record<string, unknown>>(text, params)).rows });

/**
 * Refuses (exit 2) a restore of a database that servers run on, as their rows say (instances.ts):
 * through a pooler too, where the database's sessions show none of them while they are idle (a
 * restore went ahead under running servers behind PgBouncer and lost 92 of 240 creates answered 200:
 * a review, 2026-11-30).
 */
async function refuseRunning(client: pg.Client): Promise<void> {
  const running = await runningInstances(pgPlace(client).query);
  if (running.length > 0) throw new UsageError(runningSaid(running));
}

/** `text` in a new file readable by this user only (it holds donors' names and addresses, or who did what); its name. */
function writeOwn(file: string, text: string): string {
  writeFileSync(file, text, { flag: 'wx', mode: PRIVATE_FILE });
  return file;
}

/**
 * The connection string as libpq's environment (PGHOST, PGPASSWORD, ...), for pg_restore: the
 * password then is not on its command line, where `ps` shows it, and nothing is re-encoded (a URL
 * written out again turned `%20` into `+`, which libpq does not read as a space).
 */
function libpqEnvironment(url: string): NodeJS.ProcessEnv {
  const read = readPostgresUrl(url);
  if (!read) throw new UsageError(`DATABASE_URL (${describeDatabase({ dialect: 'postgres', url, poolMax: 1 })}) is not a URL pg_restore can be given: write it as postgres://user:password@host:port/database`);
  const { parsed, noHost } = read;
  const decode = (v: string) => {
    try {
      return decodeURIComponent(v);
    } catch {
      throw new UsageError('DATABASE_URL has a % that is not a percent-escape (write % as %25): pg_restore cannot read it');
    }
  };
  const q = parsed.searchParams;
  const env: NodeJS.ProcessEnv = { ...process.env };
  const set = (name: string, value: string | null | undefined) => {
    if (value !== null && value !== undefined && value !== '') env[name] = value;
  };
  // A Unix socket's form names no host but its folder, as a parameter: libpq's default socket otherwise.
  set('PGHOST', q.get('host') ?? (noHost ? '' : decode(parsed.hostname.replace(/^\[|\]$/g, ''))));
  set('PGPORT', q.get('port') ?? parsed.port);
  set('PGUSER', q.get('user') ?? decode(parsed.username));
  set('PGPASSWORD', q.get('password') ?? decode(parsed.password));
  set('PGDATABASE', q.get('dbname') ?? decode(parsed.pathname.slice(1)));
  set('PGOPTIONS', q.get('options'));
  set('PGAPPNAME', q.get('application_name'));
  set('PGCONNECT_TIMEOUT', q.get('connect_timeout'));
  set('PGSSLROOTCERT', q.get('sslrootcert'));
  set('PGSSLCERT', q.get('sslcert'));
  set('PGSSLKEY', q.get('sslkey'));
  // node-postgres's own spellings, in libpq's words.
  const sslmode = q.get('sslmode');
  set('PGSSLMODE', sslmode === 'no-verify' ? 'require' : sslmode ?? (q.get('ssl') === 'true' || q.get('ssl') === '1' ? 'require' : undefined));
  return env;
}

/**
 * The migrations a pg_dump archive's Almoner schema has, read from the file: the kysely_migration rows
 * of the schema Almoner's tables are in (another application's Kysely keeps a table of that name
 * too, in a schema of its own, whose rows were read as Almoner's and refused as "a newer Almoner"
 * until 2026-11-29: a review).
 */
async function migrationsIn(file: string, env: NodeJS.ProcessEnv, schema: string): Promise<string[]> {
  const lines = (await readArchive(file, env, ['--data-only', `--schema=${schema}`, '--table=kysely_migration', '--file=-'])).split('\n');
  // A schema's name as pg_dump writes it, quoted if it holds a space ("My App"): read by words, such a backup held "no Almoner schema" (a review).
  const copy = new RegExp(`^COPY ${IDENTIFIER}\\.kysely_migration `);
  const start = lines.findIndex((l) => copy.test(l));
  if (start < 0) return [];
  const end = lines.indexOf('\\.', start);
  return lines.slice(start + 1, end < 0 ? undefined : end).map((l) => l.split('\t')[0]!).filter(Boolean).sort();
}

/**
 * pg_restore into the database `env` names, in one transaction: the database is the backup's, or as
 * it was. Everything but a restore's mark (restoring.ts): a dump taken while the database was marked
 * holds that mark, which would have taken the place of this restore's and named another's files.
 * Nor a schema of the backup's (`made`) the database has already (`existing`), such as the one Almoner's tables are in when
 * its search_path is not `public`: --clean would drop it and make it again, and the drop fails on
 * what it holds beside the backup's, this restore's mark first (every such restore failed, exit 1,
 * until 2026-11-29); what the backup holds in it is dropped and made again one by one all the same.
 */
async function pgRestore(file: string, env: NodeJS.ProcessEnv, list: string, made: readonly string[], existing: readonly string[]): Promise<void> {
  // A schema's entry is `SCHEMA - name owner`, and a name may hold spaces: the longest of the backup's own names it begins with is its name.
  const schemaOf = (line: string) => {
    const e = tocEntry(line) ?? '';
    return e.startsWith('SCHEMA - ') ? made.filter((name) => e.startsWith(`SCHEMA - ${name} `)).sort((a, b) => b.length - a.length)[0] : undefined;
  };
  const kept = list.split('\n').filter((line) => {
    const schema = schemaOf(line);
    const words = line.split(/\s+/);
    // The servers' rows the backup holds (instances.ts) are of servers then, not now: its table is made again empty.
    const instances = words.includes(INSTANCES_TABLE) && tocEntry(line)?.startsWith('TABLE DATA ') === true;
    return !words.includes(RESTORING_TABLE) && !instances && !(schema !== undefined && existing.includes(schema));
  });
  // On its standard input: pg_restore reads the whole list before it connects (SortTocFromFile, before RestoreArchive).
  const useList = unnamedFile(kept.join('\n'));
  try {
    const { code, ended, stderr } = await runPgTool('pg_restore', [...PG_RESTORE, '--use-list=/dev/stdin', `--dbname=${libpqDbname(env)}`, file], env, { stdin: useList });
    if (code !== 0) {
      const said = stderr.trim().split('\n').slice(-5).join('\n');
      throw new Error(`pg_restore failed (${ended}); nothing was changed, as it runs in one transaction:\n${said}`);
    }
  } finally {
    closeSync(useList);
  }
}

/**
 * A file holding `text` that no name leads to, open for reading: its descriptor, to be closed by the caller. Written whole in
 * the temporary folder, opened, and its name removed at once, so a command killed while a tool reads it (SIGKILL, the OOM
 * killer) leaves nothing behind: a restore's list for pg_restore (pgRestore) was written in a folder of its own there,
 * removed once pg_restore had ended, and a restore killed meanwhile left `/tmp/almoner-restore-…` for ever (until
 * 2026-12-02; a review). Written whole before the tool starts, so one left running alone still reads all of it.
 */
function unnamedFile(text: string): number {
  const path = join(tmpdir(), `almoner-${process.pid}-${randomUUID()}`);
  writeFileSync(path, text, { flag: 'wx', mode: PRIVATE_FILE });
  try {
    return openSync(path, 'r');
  } finally {
    rmSync(path, { force: true });
  }
}

/** pg_restore and pg_dump want a --dbname: the database's name alone, as a libpq keyword, and the rest from the environment (libpqEnvironment). */
const libpqDbname = (env: NodeJS.ProcessEnv): string => `dbname='${(env.PGDATABASE ?? '').replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/**
 * The database a restore is about to replace, kept whole as a pg_dump archive of Almoner's schema
 * (`schema`, without the restore's mark) at `to`, readable by its owner only, as a SQLite restore
 * keeps the file it replaces: until 2026-11-30 a PostgreSQL restore kept only its audit trail and
 * claims, and the donations recorded after the backup were gone with it, unsaid (a review).
 */
async function pgDumpReplaced(to: string, env: NodeJS.ProcessEnv, schema: string): Promise<void> {
  writeOwn(to, ''); // made first, its owner's alone: pg_dump writes into it
  const quoted = `"${schema.replace(/"/g, '""')}"`; // a pattern: quoted, its name is taken as it is
  const { code, ended, stderr } = await runPgTool('pg_dump', ['--format=custom', `--schema=${quoted}`, `--exclude-table=${quoted}.${RESTORING_TABLE}`, `--file=${to}`, `--dbname=${libpqDbname(env)}`], env);
  if (code !== 0) {
    rmSync(to, { force: true });
    throw new Error(
      `pg_dump could not keep the database that is there (${ended}), so nothing was replaced:\n${stderr.trim().split('\n').slice(-5).join('\n')}\n` +
        'Fix that, or restore with --discard-replaced (the replaced database is then not kept: its donations recorded after the backup are lost), or restore into a new, empty database and point the servers at it.',
    );
  }
}

/**
 * A pg_dump archive's table of contents (`pg_restore --list`), as pg_restore is given it, and its
 * entries without their numbers, each `KIND schema name owner` (`FUNCTION public f(integer) postgres`,
 * `SCHEMA - name owner`): not split into words, as a name or an owner may hold spaces.
 */
async function contentsOf(file: string, env: NodeJS.ProcessEnv): Promise<{ list: string; entries: string[] }> {
  const list = await readArchive(file, env, ['--list']);
  return { list, entries: list.split('\n').flatMap((line) => tocEntry(line) ?? []) };
}

/** A line of an archive's table of contents without its numbers (`228; 1255 16526 FUNCTION public f() postgres`); undefined for a comment. */
const tocEntry = (line: string): string | undefined => /^\d+; \d+ \d+ (.*)$/.exec(line)?.[1];

/** What pg_restore prints of `file` given `args`; a file it cannot read is the operator's to fix (exit 2). */
async function readArchive(file: string, env: NodeJS.ProcessEnv, args: string[]): Promise<string> {
  const { code, stdout, stderr } = await runPgTool('pg_restore', [...args, file], env);
  if (code !== 0) throw new UsageError(`${file} cannot be read by pg_restore (is it a pg_dump --format=custom archive?): ${stderr.trim().split('\n').slice(-2).join(' ')}`);
  return stdout;
}

/** An identifier as pg_dump writes it: bare, or in double quotes with a quote doubled. */
const IDENTIFIER = '("(?:[^"]|"")+"|[^\\s".;(]+)';
const unquoted = (id: string) => (id.startsWith('"') ? id.slice(1, -1).replace(/""/g, '"') : id);

/**
 * The schemas a pg_dump archive makes, and those with a kysely_migration table (Almoner's, or another
 * application's Kysely), as its SQL names them (`pg_restore --schema-only`): exactly, where the table
 * of contents' words could not tell a name with a space from its owner.
 */
async function schemasOf(file: string, env: NodeJS.ProcessEnv): Promise<{ schemas: string[]; almonerIn: string[] }> {
  const stdout = await readArchive(file, env, ['--schema-only', '--file=-']);
  const schemas = [...stdout.matchAll(new RegExp(`^CREATE SCHEMA ${IDENTIFIER};$`, 'gm'))].map((m) => unquoted(m[1]!));
  const almonerIn = [...stdout.matchAll(new RegExp(`^CREATE TABLE ${IDENTIFIER}\\.kysely_migration \\(`, 'gm'))].map((m) => unquoted(m[1]!));
  return { schemas, almonerIn };
}

/**
 * The schema Almoner's tables are in here (current_schema(), where its unqualified tables are made), which must be the backup's. A restore into a database whose search_path puts Almoner in another schema than the backup's is
 * refused: pg_restore writes every table into the schema the archive names, so it would have put the
 * backup beside the tables Almoner reads, said "restored", and changed nothing Almoner sees (into an
 * empty database, it failed half-way after pg_restore). So is one whose search_path names no schema
 * the database has: there is nowhere for Almoner's tables (a review, 2026-11-29).
 */
async function almonerSchema(client: pg.Client, made: { almonerIn: string[] }, file: string): Promise<string> {
  const { rows } = await client.query<{ here: string | null; path: string }>('select current_schema() as here, current_setting($1) as path', ['search_path']);
  const { here, path } = rows[0]!;
  if (here === null) throw new UsageError(`no schema this database's search_path names (${path}) exists: create it (create schema NAME), or set DATABASE_URL's search_path to one that exists`);
  if (!made.almonerIn.includes(here)) {
    const there = made.almonerIn.join(', ');
    const one = made.almonerIn[0]!;
    throw new UsageError(
      `${file} holds Almoner's tables in the schema ${there}, and this database's search_path puts them in ${here}: pg_restore would write the backup into ${there}, ` +
        `beside the tables Almoner reads. Restore it into an empty database with DATABASE_URL's search_path set to ${one} (…?options=-c%20search_path%3D${encodeURIComponent(one)}), and point the servers at that; ` +
        `restored here with that search_path, what this database holds in ${here} would stay beside it, its donors' details out of reach of erasures and retention`,
    );
  }
  return here;
}

/** An object of the database, as its entry in an archive's table of contents would begin (`entry`), and as a message names it. */
interface DatabaseObject {
  entry: string;
  shown: string;
  /** A foreign key's table, as its entry begins. */
  of?: string;
}

/** Whether an archive's table of contents holds `o`: an entry that begins as its would, the name whole (a function's arguments after it). */
const holds = (entries: readonly string[], o: DatabaseObject) => entries.some((e) => e.startsWith(`${o.entry} `) || (o.entry.startsWith('FUNCTION ') && e.startsWith(`${o.entry}(`)));

/**
 * The objects of Almoner's schema (`here`) that a restore's pg_restore --clean would leave in place,
 * or fail on, were the archive not to hold them: tables, views, sequences no table owns, functions,
 * types, and foreign keys on or into its tables (--clean drops a table's index by the archive's name,
 * and a foreign key by another name that depends on it stops the drop); not extensions' objects, nor
 * those PostgreSQL makes with another (a table's row type, a range's constructors). A restore's own
 * mark is not one, nor the servers' rows' table (instances.ts): a backup from before it lacks it, and its
 * migration, run again, leaves it as it is. Another schema's objects are another application's, which the migrations, run
 * in Almoner's, never meet (they were refused until a review, 2026-11-29).
 */
async function objectsOf(client: pg.Client, here: string): Promise<DatabaseObject[]> {
  const free = (catalog: string, oid: string) => `not exists (select 1 from pg_depend d where d.classid = '${catalog}'::regclass and d.objid = ${oid} and d.deptype in ('a', 'i', 'e'))`;
  const { rows } = await client.query<{ kind: string; schema: string; name: string; within: string | null }>(
    `select case c.relkind when 'S' then 'SEQUENCE' when 'v' then 'VIEW' when 'm' then 'MATERIALIZED VIEW' when 'f' then 'FOREIGN TABLE' else 'TABLE' end as kind,
            n.nspname as schema, c.relname as name, null as within
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p', 'v', 'm', 'S', 'f') and n.nspname = $2 and c.relname <> all($1::text[]) and ${free('pg_class', 'c.oid')}
     union all
     select case p.prokind when 'p' then 'PROCEDURE' when 'a' then 'AGGREGATE' else 'FUNCTION' end, n.nspname, p.proname, null
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = $2 and ${free('pg_proc', 'p.oid')}
     union all
     select case t.typtype when 'd' then 'DOMAIN' else 'TYPE' end, n.nspname, t.typname, null
       from pg_type t join pg_namespace n on n.oid = t.typnamespace
      where t.typtype in ('c', 'e', 'd', 'r') and n.nspname = $2 and ${free('pg_type', 't.oid')}
     union all
     select 'FK CONSTRAINT', n.nspname, k.conname, c.relname
       from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
                            join pg_class r on r.oid = k.confrelid join pg_namespace rn on rn.oid = r.relnamespace
      where k.contype = 'f' and (n.nspname = $2 or rn.nspname = $2) and ${free('pg_class', 'c.oid')}
      order by 2, 3`,
    [[RESTORING_TABLE, INSTANCES_TABLE], here],
  );
  return rows.map(({ kind, schema, name, within }) => ({
    entry: within === null ? `${kind} ${schema} ${name}` : `${kind} ${schema} ${within} ${name}`,
    shown: `${kind === 'FK CONSTRAINT' ? 'foreign key' : kind.toLowerCase()} ${within === null ? `${schema}.${name}` : `${schema}.${within}.${name}`}`,
    ...(within !== null && { of: `TABLE ${schema} ${within}` }),
  }));
}

/** A pg_restore or pg_dump this process stopped, passing on the `signal` it was sent (runPgTool): the command ends as that signal would have ended it (endBySignal), once it has undone what it can. */
class StoppedBySignal extends Error {
  constructor(
    tool: string,
    readonly signal: NodeJS.Signals,
    ended: string,
  ) {
    super(`stopped by ${signal}, which was passed on to ${tool} (it ended: ${ended})`);
  }
}

/**
 * How `tool` is run with `args` so that it ends with this process (SIGKILL, the OOM killer): through util-linux's `setpriv
 * --pdeathsig TERM`, where the PATH has one that takes it, then a shell that goes on only if its parent is still this process
 * (the kernel sends the signal when the parent dies after `setpriv` asked for it; one that died before was not seen: the shell's
 * $PPID, read after, is then another). A restore killed in the moment after it started `pg_restore` and before `pg_restore`
 * connected left it running unseen: a keep-replaced run then took the restore as one that replaced nothing, deleted the
 * replaced database's trail, claims and dump and removed the mark, and `pg_restore` then put the backup in place, the data
 * recorded after it gone for good (until 2026-12-02; a review). SIGTERM, not SIGKILL: pg_restore and pg_dump, so ended, first
 * ask the server to cancel what their session is doing (a statement waiting for a lock), so that session ends at once and a
 * `pg_restore --single-transaction` rolls back; killed, the session stayed until the server next wrote to it, and a backup
 * stopped by SIGTERM, which ends its own process as soon as it has passed the signal on, left `pg_dump`'s session waiting for a
 * lock. Where there is no such `setpriv` (not Linux, util-linux before 2.33), the tool is run plainly, as
 * before, and keep-replaced sees it only once it has connected (README). `setpriv` and the shell exec, so the tool keeps the
 * pid the child was given, and signals passed on to it reach it.
 */
function dyingWithThis(tool: string, args: string[], env: NodeJS.ProcessEnv): [string, string[]] {
  const setpriv = pdeathsigSetter(env);
  if (!setpriv) return [tool, args];
  return [setpriv, ['--pdeathsig', 'TERM', '--', '/bin/sh', '-c', 'test "$PPID" = "$0" || exit 125; exec "$@"', String(process.pid), tool, ...args]];
}

/** The `setpriv` on the PATH `env` gives, if there is one that takes --pdeathsig (asked once a command); undefined if not. */
function pdeathsigSetter(env: NodeJS.ProcessEnv): string | undefined {
  const setpriv = onPath('setpriv', env);
  if (setpriv === undefined) return undefined;
  let works = SETPRIV_WORKS.get(setpriv);
  if (works === undefined) {
    works = spawnSync(setpriv, ['--pdeathsig', 'TERM', '--', '/bin/sh', '-c', ':'], { env, stdio: 'ignore' }).status === 0;
    SETPRIV_WORKS.set(setpriv, works);
  }
  return works ? setpriv : undefined;
}
const SETPRIV_WORKS = new Map<string, boolean>();

/** The program `name` in a folder of the PATH `env` gives, as spawn would find it; undefined if none. */
function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const folder of (env.PATH ?? '').split(':')) {
    if (folder === '') continue;
    const file = join(folder, name);
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

const notInstalled = (tool: string) =>
  new UsageError(`${tool} is not installed here: install PostgreSQL's client tools, the server's version or later (on Debian: apt-get install postgresql-client)`);

/** `tool` run with `args`, its standard input `stdin` (a descriptor) if given; `ended`, how it ended, as a message says it (`exit 1`, or `killed by SIGKILL`, where it said `exit null`). */
async function runPgTool(
  tool: 'pg_restore' | 'pg_dump',
  args: string[],
  env: NodeJS.ProcessEnv,
  { stopped, stdin }: { stopped?: AbortSignal; stdin?: number } = {},
): Promise<{ code: number | null; ended: string; stdout: string; stderr: string }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  // Without a `stopped` of its caller's, a SIGTERM or SIGINT to this process (not to its group, as Ctrl-C is) goes to the tool, and
  // this process waits for it to end: until 2026-12-02 it ended at once, and a restore's pg_restore went on alone and committed, after
  // a keep-replaced run meanwhile had taken the restore as one that replaced nothing (a review). pg_restore, so stopped, rolls back.
  let stoppedBy: NodeJS.Signals | undefined;
  let forward: ((s: NodeJS.Signals) => void) | undefined;
  if (onPath(tool, env) === undefined) throw notInstalled(tool); // through setpriv's shell, it would only have said `not found`, exit 127
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolvePromise, reject) => {
    // Stopped (a backup's SIGTERM or SIGINT: writeNewBackup), the tool is stopped too, not left writing an archive no one keeps.
    const [command, argv] = dyingWithThis(tool, args, env);
    const child = spawn(command, argv, { env, stdio: [stdin ?? 'ignore', 'pipe', 'pipe'], signal: stopped, killSignal: 'SIGTERM' });
    if (!stopped) {
      forward = (s: NodeJS.Signals) => {
        stoppedBy ??= s;
        child.kill(s);
      };
      for (const s of STOP_SIGNALS) process.on(s, forward);
    }
    child.stdout!.on('data', (b: Buffer) => out.push(b)); // piped, as asked (stdio's first, a descriptor, widens the type)
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    child.once('error', (e: NodeJS.ErrnoException) => reject(e.code === 'ENOENT' ? notInstalled(tool) : e));
    child.once('close', (exited, killedBy) => resolvePromise([exited, killedBy]));
  }).finally(() => {
    if (forward) for (const s of STOP_SIGNALS) process.removeListener(s, forward);
  });
  const ended = code === null ? `killed by ${signal}` : `exit ${code}`;
  if (stoppedBy) throw new StoppedBySignal(tool, stoppedBy, ended);
  return { code, ended, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

/**
 * What a restore says of the donations the replaced database held that the backup does not: every
 * one was answered 200 to a charity, so where they are is said (an operator's review, 2026-11-30).
 * Donations are never deleted (an erasure keeps the row), so a backup of this database holds fewer
 * by those recorded after it; both counts are given, whatever the backup was.
 */
function notInBackup(held: number | undefined, restored: number, keptIn: string | undefined): string | undefined {
  if (held === undefined || held <= restored) return undefined;
  const after = held - restored;
  return (
    `the database that was there held ${held} donation${held === 1 ? '' : 's'} and the backup holds ${restored}: ${after === 1 ? 'the one' : `the ${after}`} recorded after the backup ` +
    `${after === 1 ? 'is' : 'are'} not in the restored database${keptIn ? `, only in ${keptIn}` : ''} (${after === 1 ? 'it was' : 'each was'} answered 200: a charity may send ${after === 1 ? 'it' : 'them'} again)`
  );
}

/**
 * Said by every restore of the charities: over a database of the backup's history (`sameHistory`), what
 * it carried over of theirs (`carried`, carryCharities), or that its trail records no change to any
 * since the backup; else what comes back as it was at the backup, for the operator to do again.
 */
function charitiesSaid(sameHistory: boolean, carried: string | undefined): string {
  if (!sameHistory) return AS_AT_BACKUP;
  return carried ?? "Charities' passwords and their disabled or enabled state are as they were at the backup, and the replaced database's audit trail records no sign-up, rotation, end of grace, disable or enable since: nothing of theirs to carry over.";
}

/**
 * Said by a restore that could not read the replaced database's trail, found it of another history, or replaced none: what
 * comes back as it was at the backup and is the operator's to do again, a charity signed up since included (it is not in
 * the backup, and its integration is answered 401: unsaid until 2026-11-30, a review), or keep-replaced's to carry over.
 */
const AS_AT_BACKUP =
  "Charities' passwords and their disabled or enabled state are as they were at the backup: rotate or disable again " +
  'whatever was rotated or disabled since (a leaked password rotated after the backup works again until then), end-grace again an old password whose grace was ended since, ' +
  'and sign up again a charity signed up since, which is not in it (bin/almoner charity create); or, with the database the backup came from at hand, ' +
  'bin/almoner keep-replaced --not-running THAT-DATABASE carries them over, sign-ups included.';

/** Said when a restore had no replaced database to read the erasures since the backup from. */
const NO_ERASURES =
  "Donors' erasures made since the backup are not in it: erase those donors again before the server takes requests. " +
  'With the database the backup came from still at hand, bin/almoner keep-replaced --not-running THAT-DATABASE (its SQLite file, or its postgres:// URL) ' +
  "does it, keeps its Gift Aid claims and carries over its charities' credentials; else bin/almoner donor erase --email each donor, whom that database's trail names only by a hash of the address.";

/** Said when a restore had no replaced database to read the claim ledger from. */
const NO_LEDGER =
  'Gift Aid claims prepared or marked since the backup are not in it: the next giftaid claim would take their donations again. ' +
  'Before the next claim, keep them with bin/almoner keep-replaced --not-running THAT-DATABASE (its SQLite file, or its postgres:// URL) if the database the backup came from is at hand, ' +
  'or compare bin/almoner giftaid claims with what was sent to HMRC since the backup, then claim with --checked-since-backup: until one of these, giftaid claim refuses.';

/**
 * A file beside `beside` for what a restore replaced, named for now: the SQLite database itself
 * (`almoner.db.replaced-<time>`), or what the PostgreSQL one held (`….replaced-trail-<time>.jsonl`).
 */
function besideFile(beside: string, at: Date, what?: 'trail' | 'claims', extension?: string): string {
  return `${beside}.replaced-${what ? `${what}-` : ''}${at.toISOString().replace(/[:.]/g, '-')}${extension ? `.${extension}` : ''}`;
}

/** Marks the database as being restored (restoring.ts), or refuses if a restore before this one did not finish. */
async function markOrRefuse(place: MarkPlace, what: Restoring): Promise<void> {
  const before = await readMark(place);
  if (before) throw new UsageError(unfinished(before, 'before restoring again'));
  await mark(place, what);
}

/**
 * The file that holds the replaced claim ledger, should keeping its claims fail (none when it has
 * no claims): removed once they are kept if `remove` (a PostgreSQL restore's own copy), never if it
 * is the replaced SQLite database or a file the operator named.
 */
type LedgerFile = { saved: string; remove: boolean } | undefined;

/**
 * Takes into the restored database what the replaced one recorded after the backup and the
 * restored trail (`restored`, heldBy) does not hold: its charities' credentials carried over (only
 * where its trail is of the backup's history: `changedHere` then names the charities this database
 * changed since the restore, with those changes, which stand), its claims kept, its erasures made again. Each
 * is a no-op when done already, so a restore that stopped half-way is finished by doing it again
 * (keep-replaced). What was done, said; what was carried over, apart (`charities`).
 */
async function takeIn(
  store: Store,
  { trail, ledger }: Replaced,
  restored: ReadonlySet<string>,
  file: LedgerFile,
  changedHere: ReadonlyMap<string, string[]> | undefined,
): Promise<{ said: Array<string | undefined>; finished: boolean; charities: string | undefined }> {
  // First: a claim of a charity signed up since is kept only once that charity is here.
  const charities = changedHere && (await carryCharities(store, charityChangesAfter(trail, restored), ledger.charities, changedHere));
  // Charities keep the ids they were answered with: none is given to another donation.
  const largest = ledger.largestDonationId ?? 0;
  const ids = (await store.donationIdsAfter(largest)) ? `donation ids go on after ${largest}, the largest the replaced database gave out` : undefined;
  const claims = await keepClaims(store, ledger, file);
  await carryBackups(store, trail, restored);
  return { said: [ids, claims.said, await eraseAgain(store, erasuresAfter(trail, restored))], finished: claims.kept, charities };
}

/**
 * On PostgreSQL, the replaced database's `backup` entries the restored trail does not hold, recorded again (again_of
 * the first): a pg_dump archive is known as backup's, to --prune-older-than, only by its entry, and a
 * backup's trail never holds its own (written once the archive is), nor any after it. Until
 * 2026-12-01 the archive restored from and every one written after it were kept for ever, erased
 * donors' details and all (a review).
 */
async function carryBackups(store: Store, trail: Replaced['trail'], restored: ReadonlySet<string>): Promise<void> {
  if (store.dialect !== 'postgres') return; // a SQLite backup is known by its header's mark
  for (const e of trail) {
    if (e.action !== 'backup') continue;
    const original = typeof e.summary.again_of === 'string' ? e.summary.again_of : entryKey(e);
    if (restored.has(entryKey(e)) || restored.has(original)) continue;
    await store.audit({ action: 'backup', target: e.target, summary: { ...e.summary, again_of: original } });
  }
}

/**
 * Carries over into the restored database the credentials of each charity whose sign-up, rotation,
 * end of grace, disable or enable the replaced database's trail records after the backup (`changes`,
 * charityChangesAfter), as the replaced database holds them (its `rows`): what those changes set
 * (Store.carryCharities: a rotation its password, old password and that one's end; an end of grace
 * the old password; a disable or enable whether it is enabled); a charity signed up since, whole,
 * with its id and username. A password rotated since (say, because it leaked) does not work again, a charity
 * disabled since is not enabled again, and one signed up since keeps the credentials it was given.
 * Each change is recorded again with the row, naming the entry it repeats (again_of), so that a
 * later restore does not carry it twice. Left out, and said, to do again: what this database
 * changed since the restore (`changedHere`: a change there of a charity's password, old password or
 * state that this database's changes of it set too; its own stand, and what they did not set is
 * carried), a charity whose row is not at hand (a claims file from before 2026-11-30, or none
 * given), and one whose id or username is another charity's here. What it did, said; nothing when
 * there was no change. Until 2026-11-30 every change was only named, for the operator to do again
 * (an operator's review); and a charity changed here was left out whole, so that a disable there
 * was lost to a rotation here (a review).
 */
async function carryCharities(
  store: Store,
  changes: CharityChange[],
  rows: LedgerCopy['charities'],
  changedHere: ReadonlyMap<string, string[]>,
): Promise<string | undefined> {
  if (changes.length === 0) return undefined;
  const byCharity = new Map<string, CharityChange[]>();
  for (const c of changes) byCharity.set(c.target, [...(byCharity.get(c.target) ?? []), c]);
  const named = (its: CharityChange[]) => its.map((c) => c.action.replace(/^charity /, '')).join(', ');
  const left: string[] = [];
  const toCarry: Array<{ row: CharityRow; entries: AuditEntry[]; keep: Set<CredentialColumn> }> = [];
  /** The changes of each charity carried (or tried), by username. */
  const carrying = new Map<string, CharityChange[]>();
  for (const [username, its] of byCharity) {
    const keep = new Set((changedHere.get(username) ?? []).flatMap(columnsSetBy));
    const stand = its.filter((c) => columnsSetBy(c.action).every((column) => keep.has(column)));
    const rest = its.filter((c) => !stand.includes(c));
    if (stand.length) left.push(`${username} (${named(stand)}): this database changed it since the restore, and that stands`);
    if (rest.length === 0) continue;
    const row = carriable(rows?.find((r) => r.username === username));
    if (!row) left.push(`${username} (${named(rest)}): its row is not in what the replaced database left (a claims file written before 2026-11-30, or none)`);
    else {
      carrying.set(username, rest);
      toCarry.push({ row, keep, entries: rest.map((c) => ({ action: c.action as AuditAction, target: c.target, summary: { ...(c.summary as AuditEntry['summary']), again_of: c.original } })) });
    }
  }
  const actions = (username: string) => named(carrying.get(username)!);
  /** Who made a charity's changes carried (`user@host`), as the replaced database's trail says. */
  const makers = (username: string) => [...new Set(carrying.get(username)!.map((c) => c.madeBy))];
  const carried: Array<{ username: string; notes: string[] }> = [];
  for (const outcome of await store.carryCharities(toCarry)) {
    const { username } = outcome;
    if (outcome.outcome === 'clash') {
      const { other } = outcome;
      const taken = other.username === username ? `its username is charity ${other.id}'s here` : `its id is charity ${other.username}'s here`;
      const signedUp = carrying.get(username)!.some((c) => c.action === 'charity create');
      left.push(`${username} (${actions(username)}): ${taken}${signedUp ? '; sign it up again (bin/almoner charity create) and give it its new credentials' : ''}`);
    } else {
      const note = outcome.outcome === 'added' ? `signed up since: added, id ${outcome.id}` : outcome.oldPasswordLeft ? `its old password is ${OLD_PASSWORD_LEFT}` : undefined;
      carried.push({ username, notes: note ? [note] : [] });
    }
  }
  const lines: string[] = [];
  if (carried.length) {
    // Who made them, as the replaced database's trail says: a copy restored from a backup (a staging database) shares its
    // history, and its changes would be carried too (README, Backups), so a machine that is not this service's stands out.
    // Made by more than one, each charity's line names its own, so the operator can tell which charity to see to
    // (until 2026-11-30 the last line alone named them all: a review).
    const madeBy = [...new Set(carried.flatMap(({ username }) => makers(username)))];
    const several = madeBy.length > 1;
    lines.push(
      "carried over the charities' credentials the replaced database changed after the backup, as it holds them (password, old password and its end, disabled or enabled):",
      ...carried.map(({ username, notes }) => {
        const all = several ? [...notes, `made by ${makers(username).join(', ')}`] : notes;
        return `  ${username}: ${actions(username)}${all.length ? ` (${all.join('; ')})` : ''}`;
      }),
      `  (made by ${madeBy.join(', ')}${several ? ", each charity's as its line says" : ''}, as that database's audit trail records; ` +
        "one made on another machine, such as a staging copy of this database, is not this service's: rotate or disable that charity again)",
    );
  }
  if (left.length) {
    lines.push(
      'not carried over, each to do again by hand where it still applies (a password rotated since, say because it leaked, works here until it is rotated again; a charity signed up since is not here):',
      ...left.map((l) => `  ${l}`),
    );
  }
  return lines.join('\n');
}

/** A charity's row as the replaced database left it, whole enough to carry over: one from before 2026-11-30's copies names only its id and username. */
function carriable(row: NonNullable<LedgerCopy['charities']>[number] | undefined): CharityRow | undefined {
  if (!row) return undefined;
  const { id, name, email, username, password_hash, active, old_password_hash = null, old_password_until = null, created_at, updated_at } = row;
  const texts = [name, email, password_hash, created_at, updated_at];
  if (!texts.every((t) => typeof t === 'string') || (active !== 0 && active !== 1)) return undefined;
  return { id, name: name!, email: email!, username, password_hash: password_hash!, active, old_password_hash, old_password_until, created_at: created_at!, updated_at: updated_at! };
}

/**
 * Keeps the replaced database's claims (ClaimLedger.keepFrom) and says what it kept. If keeping
 * fails, the restore itself stands and the erasures are still made again: the ledger stays in its
 * file, the command says so and ends with exit status 1, and the restore is not finished.
 */
async function keepClaims(store: Store, ledger: LedgerCopy | LedgerPages, file: LedgerFile): Promise<{ said?: string; kept: boolean }> {
  if (ledger.claims.length === 0 || !file) {
    if (file?.remove) rmSync(file.saved, { force: true }); // a ledger of no claims, kept for its largest donation id (taken in by now)
    return { kept: true };
  }
  try {
    const said = describeKept(await store.claims.keepFrom(ledger));
    if (file.remove) rmSync(file.saved, { force: true });
    return { said, kept: true };
  } catch (err) {
    // The numbers at least: a new claim must not bear one the replaced database's claims were sent to HMRC under.
    await store.claims.numberAfter(Math.max(0, ...ledger.claims.map((c) => c.id))).catch(() => {});
    process.exitCode = 1;
    process.stderr.write(
      `almoner: the Gift Aid claims of the replaced database could not be kept (${err instanceof Error ? err.message : String(err)}); its claim ledger is in ${file.saved} ` +
        "(with donors' names and addresses: keep it safe). Once the cause is fixed, keep them with bin/almoner keep-replaced: " +
        'until then the restore has not finished, and servers and commands refuse the database, as the next giftaid claim could take donations those claims sent to HMRC.\n',
    );
    return { kept: false };
  }
}

/** Why a claim of the replaced database was left out (RefusedWhy), in words. */
const REFUSED_WHY: Record<RefusedWhy, string> = {
  'another claim': 'this database has another claim under its number (another charity or time)',
  status: "the two databases moved it apart (paid in one, rejected in the other, or the like), and this database's stands",
  charity:
    'its charity is not in the backup (it signed up after it) and was not carried over, so is not in this database, nor are its donations (a charity here under the same id ' +
    "is another). If the charity signs up again and sends those donations again, claim none that this claim holds: the replaced database's " +
    'giftaid files for it say what it holds, and whether it was sent to HMRC',
  taken: 'a donation of it is in another live claim here',
  reopened: 'the replaced database reopened it (giftaid reopen), but a donation of it is in another live claim here, so it stays rejected',
};

/** What a restore kept of the replaced database's claim ledger (ClaimLedger.keepFrom), said; nothing when it had nothing to keep. */
function describeKept({ added, marked, refused }: KeptClaims): string | undefined {
  if (added.length + marked.length + refused.length === 0) return undefined;
  const lines = ['kept the Gift Aid claims the replaced database recorded after the backup:'];
  for (const { id, status, withoutDonation: n } of added) {
    lines.push(
      `  claim ${id} (${status}) added` +
        (n === 0
          ? ''
          : `; ${n} of its donations ${n === 1 ? 'is' : 'are'} not in the backup (recorded after it): ${n === 1 ? 'its row is' : 'their rows are'} kept as sent to HMRC, ` +
            'so its files can be written again, and a donation sent again that matches one goes to needs-attention, not into a claim'),
    );
  }
  for (const { id, status, reopened } of marked) {
    lines.push(
      reopened
        ? `  claim ${id} reopened: ${status} again, its donations its own again`
        : `  claim ${id} marked ${status}${status === 'rejected' ? ' (its donations are free to claim again, but for any that another live claim holds)' : ''}`,
    );
  }
  for (const { id, why } of refused) lines.push(`  claim ${id} ${why === 'reopened' ? 'not reopened' : 'left out'}: ${REFUSED_WHY[why]}; check it by hand against what was sent to HMRC`);
  return lines.join('\n');
}

/**
 * Erases again what the replaced database erased after the backup (erasuresAfter): each donor's
 * erasure, by the e-mail addresses whose reference it names, and its retention runs, each period's
 * last as of the day it ran. Each is audited as it was the first time. Says what it did, or nothing
 * when there was nothing to do.
 */
async function eraseAgain(store: Store, { donors, retention }: ErasuresSince): Promise<string | undefined> {
  if (donors.length === 0 && retention.length === 0) return undefined;
  const today = ukDay(new Date());
  let donations = 0;
  const emails = await store.donors.emailsOf(new Set(donors.map((d) => d.reference)));
  // Each audited as made again of its first entry (again_of), so that a later restore of a backup holding that one leaves it be.
  for (const { reference, charity, original } of donors) {
    const email = emails.get(reference);
    if (email !== undefined) {
      const found = await store.donors.erase({ email, charity: charity ?? undefined, today, dryRun: false, againOf: original });
      if (found.tracesLeft?.erasedNow) throw new Error(found.tracesLeft.message);
      donations += found.donations.length;
    }
    // None of theirs here: recorded all the same, or the next restore (of a backup holding their donations) would bring them back.
    else await store.donors.recordErasureAgain({ reference, charity: charity ?? undefined, againOf: original });
  }
  const runs: string[] = [];
  for (const { years, day = today, original } of retention) {
    const run = await store.donors.applyRetention({ today: day, retentionYears: years, dryRun: false, againOf: original });
    if (run.tracesLeft?.erasedNow) throw new Error(run.tracesLeft.message);
    const n = run.erased.length;
    runs.push(`retention with ${years} years as of ${day} (${n} donation${n === 1 ? '' : 's'})`);
  }
  return (
    `erased again what the replaced database erased after the backup: ${donors.length} donor erasure${donors.length === 1 ? '' : 's'} ` +
    `(${donations} donation${donations === 1 ? '' : 's'})` +
    runs.map((run) => `, and ${run}`).join('')
  );
}
