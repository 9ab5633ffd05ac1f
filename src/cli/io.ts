// What every subcommand shares: the store DATABASE_URL names, said out loud, and plain output.
import { existsSync, statSync } from 'node:fs';
import { PassThrough, Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { databaseFromEnv, describeDatabase, IN_MEMORY, parseInstanceRefreshMs, type DatabaseLocation } from '../config.js';
import { osUser } from '../store/audit.js';
import { forgetRows } from '../store/instances.js';
import { openStore, refuseFolder } from '../store/open.js';
import type { Store } from '../store/store.js';
import { unknownCharity, UsageError } from './usage.js';

/**
 * The database DATABASE_URL names, said on standard error; a SQLite file that is not there is a
 * mistake (exit 2) unless the command may create it.
 */
export function theDatabase({ mayCreate = false } = {}): DatabaseLocation {
  const location = databaseFromEnv();
  process.stderr.write(`almoner: database ${describeDatabase(location)}\n`);
  // One process's own database, gone when it ends: `charity create` said "Created charity" and its
  // password for a charity no server could ever see, and `charity list` suggested doing so (a review).
  if (location.dialect === 'sqlite' && location.path === ':memory:') throw new UsageError(IN_MEMORY);
  if (location.dialect === 'sqlite') {
    // A folder this user may not enter hides the file: not "there is no database" (said before 2026-11-28).
    try {
      statSync(location.path, { throwIfNoEntry: false });
    } catch (err) {
      throw new UsageError(`this user (${osUser()}) cannot reach the database at ${describeDatabase(location)}: ${(err as Error).message}. Run the command as the user the server runs as`);
    }
  }
  refuseFolder(location); // every command, a restore's and a backup's too
  if (location.dialect === 'sqlite' && !mayCreate && !existsSync(location.path)) {
    throw new UsageError(
      `there is no database at ${describeDatabase(location)}. Set DATABASE_URL to the server's database ` +
        '(a relative sqlite: path is taken from the current folder), or create the first charity with `bin/almoner charity create`.',
    );
  }
  return location;
}

/** The command being run, as a restore names it among the processes on a database (`giftaid claim`): main.ts says which, before its action. */
let runningCommand = 'a command';
export function runningAs(name: string): void {
  runningCommand = name;
}

/**
 * Opens the database, saying on standard error which one it is. Only a command that makes the
 * first record (`charity create`) may create a new SQLite file: any other, run from the wrong
 * folder or with the wrong DATABASE_URL, would otherwise find an empty database and say so as if
 * it were the real one.
 */
export async function withStore<T>(work: (store: Store) => Promise<T>, { mayCreate = false } = {}): Promise<T> {
  return withStoreAt(theDatabase({ mayCreate }), work, { mustExist: !mayCreate });
}

/**
 * Opens the store at `location`, runs `work`, closes it. `duringRestore`: a restore's own
 * (restoring.ts); `mustExist`: a database without Almoner's tables is refused (openStore).
 */
export async function withStoreAt<T>(location: DatabaseLocation, work: (store: Store) => Promise<T>, { duringRestore = false, mustExist = false } = {}): Promise<T> {
  try {
    // On PostgreSQL a command keeps a row while it runs, as a server does, so that a restore sees it through a pooler too
    // (store/instances.ts); not a restore's own steps, which run on the database it has marked. Without one where the
    // database refuses it (a user that may only read: an export for a reporting tool).
    const instance = location.dialect === 'postgres' && !duringRestore ? { everyMs: parseInstanceRefreshMs(process.env.INSTANCE_REFRESH_MS), what: runningCommand, optional: true } : undefined;
    const store = await openStore(location, { duringRestore, mustExist, instance });
    // Ended by Ctrl-C or SIGTERM, its row goes first, then the signal ends it as it would have (a restore run next was refused for 10 s).
    const ended = (signal: NodeJS.Signals) => void endingEarly().finally(() => process.kill(process.pid, signal));
    const signals = instance ? (['SIGINT', 'SIGTERM'] as const) : [];
    for (const signal of signals) process.once(signal, ended);
    try {
      return await work(store);
    } finally {
      await store.close();
      for (const signal of signals) process.removeListener(signal, ended);
    }
  } catch (err) {
    // SQLite's own words ("attempt to write a readonly database", "unable to open database file") named neither file nor user.
    const code = String((err as { code?: unknown } | null)?.code ?? '');
    if (location.dialect === 'sqlite' && (code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN'))) {
      throw new UsageError(
        `this user (${osUser()}) may not write the database ${describeDatabase(location)} or its folder (where SQLite makes its -wal and -shm files): ` +
          `${(err as Error).message}. Run the command as the user the server runs as`,
      );
    }
    throw err;
  }
}

/**
 * What a command ended early (its reader gone: main.ts; Ctrl-C, SIGTERM: withStoreAt) does first: its row in
 * almoner_instances removed, a second at most, so that a restore run next is not refused for a process that has gone.
 */
export const endingEarly = (): Promise<void> => forgetRows(1000);

/** A usage error (exit 2) when a charity is named and none has that username. */
export async function checkCharity(store: Store, username: string | undefined): Promise<void> {
  if (username !== undefined && !(await store.findCredential(username))) throw unknownCharity(username);
}

/**
 * What a terminal would obey rather than show, in text a donor sent: C0 controls but tab, a line
 * feed and a carriage return before one (CSV's line ends), DEL and C1 controls. A donor's name
 * holding `ESC ]0;…BEL` set the operator's terminal's title, `ESC [2K` wiped a line of the export
 * (until 2026-11-30: a security review); other sequences write to the clipboard or answer back.
 */
const OBEYED = /\r(?!\n)|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

/** `text` as a terminal shows it without obeying it: each control OBEYED as its escape, `\u001b`. */
export const forTerminal = (text: string): string => text.replace(OBEYED, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** `text` for this command's output: as it is into a file or a pipe, forTerminal on a terminal. */
export const forStdout = (text: string): string => (process.stdout.isTTY ? forTerminal(text) : text);

/**
 * What an export writes, forTerminal on a terminal (a stream of text or bytes, cut anywhere: a
 * character split between two chunks is joined first); into a file or a pipe, exactly as it is.
 */
export function toStdoutStream(): Transform {
  if (!process.stdout.isTTY) return new PassThrough();
  const decoder = new StringDecoder('utf8');
  return new Transform({
    transform: (chunk: Buffer | string, _enc, done) => done(null, forTerminal(typeof chunk === 'string' ? chunk : decoder.write(chunk))),
    flush: (done) => done(null, forTerminal(decoder.end())),
  });
}

/**
 * Standard output's failure (its reader gone: EPIPE), once it has failed: main.ts ends most commands
 * then, but not one whose work must go to its end (finishWhateverTheOutput), which writes nothing more there.
 */
let outputFailure: NodeJS.ErrnoException | undefined;
let mustFinish = false;
export const outputFailed = (): NodeJS.ErrnoException | undefined => outputFailure;
/** main.ts, standard output having failed: true when the command goes on (finishWhateverTheOutput), to end as it would have. */
export function outputGone(err: NodeJS.ErrnoException): boolean {
  outputFailure ??= err;
  return mustFinish;
}
/**
 * For work that must go to its end whoever reads what it prints: a retention run's erasure. Ended by
 * its reader going away (`| head -1`), it stopped after its first batch, exit 0, its other batches
 * not erased and SQLite's WAL not checkpointed (until 2026-12-02, a review). It now goes on, its
 * lines no longer written; retention.ts says on standard error that they were not.
 */
export function finishWhateverTheOutput(): void {
  mustFinish = true;
}
const writable = () => outputFailure === undefined && !process.stdout.destroyed;

export function print(text: string): void {
  if (writable()) process.stdout.write(`${forStdout(text)}\n`);
}
/** Writes `lines`, then waits until standard output has taken them, if it had more than it could hold: a command printing many keeps no more than that in memory. */
export async function printDrained(lines: string[]): Promise<void> {
  if (!writable() || process.stdout.write(`${forStdout(lines.join('\n'))}\n`)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      process.stdout.off('drain', done);
      process.stdout.off('close', done);
      process.stdout.off('error', done);
      resolve();
    };
    process.stdout.on('drain', done).on('close', done).on('error', done);
  });
}
export function printJson(value: unknown): void {
  print(JSON.stringify(value));
}

/**
 * Writes `lines` in one write, so a reader gets all of them or none; `lost` is called if they
 * could not be written, at once, before the command ends for want of a reader (main.ts).
 */
export function printAtOnce(lines: string[], lost: (err: NodeJS.ErrnoException) => void): void {
  process.stdout.write(`${forStdout(lines.join('\n'))}\n`, (err) => err && lost(err));
}

/** `n` things, in words as a person writes them: `1 donation`, `2 donations`, `1,250 donations` (`plural` where an s is not it: `charities`). */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n.toLocaleString('en-GB')} ${n === 1 ? noun : plural}`;
}
