// Where the server's log lines go: stdout, the lines of one event-loop turn written together,
// synchronously, in writes of whole lines (as pino's own destination does by default).
//
// Synchronous, so that what flushSync() says is true: every line given is written when it returns,
// before process.exit(). An asynchronous writer (sonic-boom, used here until 2026-11-26) hands its
// writes to libuv's thread pool, and its flushSync() leaves a write already under way to the
// pool: a process.exit() right after could lose the last lines, and a test reading the file at
// once found it empty, one run in five. Written a turn at a time, a busy server makes one write
// call per turn, not per line; the two ways were level in alternating runs (docs/performance.md).
// In whole lines, so that several processes sharing stdout (the workers under WORKERS) never split
// each other's lines. A reader that falls behind slows this process down rather than letting lines
// pile up in memory. Each line is encoded once, straight into a buffer kept for the purpose: joining
// a turn's lines into one string and encoding that copied each line's characters three times
// (docs/performance.md). Encoded alone, a line ending in half a surrogate pair and the next line
// starting with the other half come out as two U+FFFD, not as the pair joined; pino's lines end in
// a newline, so that never happens.
//
// When stdout is a regular file, the kernel is asked to write the log out every FLUSH_AFTER_BYTES
// (an fdatasync on libuv's thread pool, one at a time in each process), much as PostgreSQL's
// *_flush_after settings have it start writeback of its files (with sync_file_range, which Node
// does not offer; fdatasync also waits for the data, on the pool, not here). Left alone, Linux
// keeps a file's written pages in memory for up to 30 s (vm.dirty_expire_centisecs) and then
// writes them out at once: a busy server's log at info was 250 MB by then, and the database's
// commits on the same disk waited behind it (a p99 of SQLite's creates of 34.6 to 77.8 ms in the
// loads that met it, 6.6 to 8.6 ms with this, docs/performance.md). A file written by another
// process (journald's, dockerd's) is beyond reach: deploy/60-almoner-writeback.conf is for those.
//
// A log that cannot be written (its disk full, its reader gone or stopped) loses lines, never the
// service: until 2026-11-30 a failed write threw out of the turn's end and killed the process, and
// a restart on the full disk died again, and a reader stopped (SIGSTOP) held every request forever
// (a faults review). A write that fails is dropped with the rest of its turn's lines, counted; a
// reader that takes nothing for STALLED_MS has its lines dropped until it takes some again (a slow
// one still slows the server down, as before). Once a write goes through again, `resumed` is told
// how many lines were lost, and why, for the server to log. A terminal is left blocking by Node, so
// one that takes nothing (Ctrl-S) still holds the server: opened again without blocking, its
// partial writes split the workers' lines, and a pty's master side cannot be opened again (a review
// of that attempt, taken back); a server's log goes to a pipe or a file, as under systemd.
import { fdatasync, fstatSync, writeSync } from 'node:fs';
import { monotonicClock, type Clock } from './time.js';
import { eachTurn } from './turn.js';

export interface LogOutput {
  write(line: string): void;
  /** Writes out every line given so far, synchronously: before process.exit(). */
  flushSync(): void;
}

/**
 * Bytes one write may carry and still reach a pipe whole, whatever other processes write to it at
 * the same moment (POSIX's PIPE_BUF, 4096 on Linux). A regular file shared by several processes
 * (Linux keeps the offset's update atomic), a Unix socket (journald's) and a terminal also keep
 * such a write whole.
 */
export const ATOMIC_WRITE_BYTES = 4096;

/** Bytes written to a log file before the kernel is asked to write them out (see the top). */
export const FLUSH_AFTER_BYTES = 1024 * 1024;

/** The buffer a turn's lines are encoded into, and written from in writes of at most ATOMIC_WRITE_BYTES. */
const BUFFER_BYTES = 64 * 1024;

/** The message of the line that says how many lines were lost, once the log takes them again. */
export const LOG_LINES_LOST = 'log lines were lost: the log could not be written';

/** How long a full pipe may take nothing before its lines are dropped rather than waited for (see the top). */
export const STALLED_MS = 1000;

export interface LogOutputOptions {
  /** How bytes are written (fs.writeSync): a test records each write. */
  write?: (fd: number, bytes: Uint8Array, offset: number) => number;
  /** How a log file is written out (fs.fdatasync): a test counts the calls. */
  flushBehind?: (fd: number, done: () => void) => void;
  /** Told, once a write goes through again, how many lines were lost and the error that lost the first of them ('stalled' for a reader that took nothing). */
  resumed?: (lost: number, why: string) => void;
  /** Milliseconds, for STALLED_MS: a test moves it. */
  clock?: Clock;
}

const NEWLINE = Buffer.from('\n');

/** Lines in `bytes` (each ends in a newline). */
function linesIn(bytes: Uint8Array): number {
  let n = 0;
  for (let at = bytes.indexOf(10); at !== -1; at = bytes.indexOf(10, at + 1)) n++;
  return n;
}

/**
 * The server's log output: each turn's lines written at the turn's end (or at flushSync()), in
 * writes of whole lines of at most ATOMIC_WRITE_BYTES (a longer line alone). An asynchronous writer
 * could not keep lines whole: after a partial write it sends the rest later, when another process
 * may have written in between. A regular file is written out behind the writes, every
 * FLUSH_AFTER_BYTES.
 */
export function logOutput(
  fd = 1,
  { write = writeSync, flushBehind = fdatasync, resumed = () => {}, clock = monotonicClock }: LogOutputOptions = {},
): LogOutput {
  const isFile = fstatSync(fd).isFile();
  let unflushed = 0; // bytes written to the file since the last fdatasync began
  let flushing = false;
  let lost = 0; // lines dropped since the last write that went through
  let why = '';
  let stalledSince: number | undefined; // when a full pipe last took nothing, while it still does
  let lineCut = false; // a line was dropped partway through: the next write ends it first, so the line after is whole
  /** Writes `bytes` whole, or drops from where a write failed (returning false): the rest of the turn is dropped too. */
  const writeAll = (given: Uint8Array): boolean => {
    // After a line of ours was cut short, or after a file refused writes (another process sharing it,
    // a worker, may have had its line cut), the first write begins with a newline, in the same
    // write: the line after is whole whoever writes first (a review found a worker's line joined to
    // another's cut one). At worst an empty line.
    const newline = lineCut || (isFile && lost > 0) ? 1 : 0;
    const bytes = newline ? Buffer.concat([NEWLINE, given]) : given;
    for (let at = 0; at < bytes.length; ) {
      let wrote: number;
      try {
        wrote = write(fd, bytes, at);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? String(err);
        if (code === 'EAGAIN') {
          // A non-blocking pipe that is full: wait a moment, unless it has taken nothing for STALLED_MS.
          stalledSince ??= clock();
          if (clock() - stalledSince < STALLED_MS) {
            Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
            continue;
          }
        }
        if (lost === 0) why = code === 'EAGAIN' ? 'stalled' : code;
        lost += linesIn(bytes.subarray(Math.max(at, newline)));
        if (at > newline && bytes[at - 1] !== 10) lineCut = true;
        return false;
      }
      at += wrote;
      lineCut = false;
      if (isFile) unflushed += wrote;
      stalledSince = undefined;
      if (lost > 0) {
        const [n, cause] = [lost, why];
        lost = 0;
        resumed(n, cause);
      }
    }
    return true;
  };
  /** A write that failed drops the rest of its turn's lines: counted, not tried. */
  let dropping = false;
  const writeOrDrop = (bytes: Uint8Array) => {
    if (dropping) lost += linesIn(bytes);
    else dropping = !writeAll(bytes);
  };
  const buffer = Buffer.allocUnsafe(BUFFER_BYTES);
  const turn = eachTurn<string>((lines) => {
    dropping = false;
    // A pipe still stalled is tried once a turn, not waited for: a turn's lines are not held STALLED_MS each.
    if (stalledSince !== undefined) stalledSince = clock() - STALLED_MS;
    let start = 0; // the first byte encoded and not yet written
    let end = 0; // the end of the bytes encoded so far
    for (const line of lines) {
      // A character takes at most 3 bytes in UTF-8 for each of its UTF-16 units.
      if (line.length * 3 > buffer.length - end) {
        if (end > start) writeOrDrop(buffer.subarray(start, end));
        start = end = 0;
        if (line.length * 3 > buffer.length) {
          writeOrDrop(Buffer.from(line)); // a line longer than the buffer: alone
          continue;
        }
      }
      const length = buffer.write(line, end);
      if (end + length - start > ATOMIC_WRITE_BYTES && end > start) {
        writeOrDrop(buffer.subarray(start, end)); // the lines before this one, which would not fit with it
        start = end;
      }
      end += length;
    }
    if (end > start) writeOrDrop(buffer.subarray(start, end));
    if (unflushed >= FLUSH_AFTER_BYTES && !flushing) {
      flushing = true;
      unflushed = 0;
      // An error (EIO) is let go: Linux tells a writeback error to one fsync only, and the log is not
      // the service's record (the database's own fsyncs report a failing disk, as a 503).
      flushBehind(fd, () => (flushing = false));
    }
  });
  return { write: turn.add, flushSync: turn.flush };
}
