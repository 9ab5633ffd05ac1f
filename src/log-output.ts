// Where the server's log lines go: stdout, through sonic-boom (pino's asynchronous writer), with the
// lines of one event-loop turn handed to it as one string.
//
// sonic-boom measures the UTF-8 length of all the text it is holding on every write it is given.
// While a write to stdout is under way lines wait in it, so under load each new line cost a pass
// over every line waiting before it. Given one string a turn, it makes that pass once a turn: under
// `/me` load at `info`, perf put the hook that writes the access line at 10.1% of the server's
// thread before, 6.6% after, plus 1.4% for handing each turn's lines over. sonic-boom still does
// the writing (partial writes, EAGAIN, the synchronous flush). Under WORKERS, where several
// processes share stdout, each turn's lines are written synchronously instead, in whole lines
// (sharedLogOutput below).
import { writeSync } from 'node:fs';
import { destination } from 'pino';

export interface LogOutput {
  write(line: string): void;
  /** Writes out every line given so far, synchronously: before process.exit(). */
  flushSync(): void;
}

/**
 * Where the server's log lines go; `shared` when other processes write to the same stdout (the
 * workers under WORKERS), so that no line is ever split by another process's.
 */
export function logOutput(fd = 1, { shared = false }: { shared?: boolean } = {}): LogOutput {
  if (shared) return sharedLogOutput(fd);
  const out = destination({ dest: fd, sync: false });
  const turn = eachTurn((lines) => out.write(lines.join('')));
  return {
    write: turn.write,
    flushSync() {
      turn.flush();
      out.flushSync();
    },
  };
}

/** Gathers the lines of one event-loop turn and hands them to `hand` together, at the turn's end or at flush(). */
function eachTurn(hand: (lines: string[]) => void): { write(line: string): void; flush(): void } {
  let lines: string[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (lines.length === 0) return;
    const turn = lines;
    lines = [];
    hand(turn);
  };
  return {
    write(line) {
      lines.push(line);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}

/**
 * Bytes one write may carry and still reach a pipe whole, whatever other processes write to it at
 * the same moment (POSIX's PIPE_BUF, 4096 on Linux). A regular file shared by several processes
 * (Linux keeps the offset's update atomic), a Unix socket (journald's) and a terminal also keep
 * such a write whole.
 */
export const ATOMIC_WRITE_BYTES = 4096;

/**
 * Several processes, one stdout: each turn's lines are written synchronously, in writes of whole
 * lines of at most ATOMIC_WRITE_BYTES (a longer line alone), so lines never interleave. An
 * asynchronous writer could not promise that: after a partial write it sends the rest later, when
 * another process may have written in between. A reader that falls behind slows this process down
 * rather than letting lines pile up in memory.
 */
function sharedLogOutput(fd: number): LogOutput {
  const writeAll = (text: string) => {
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; ) {
      try {
        at += writeSync(fd, bytes, at);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); // a non-blocking pipe that is full: wait a moment
      }
    }
  };
  const turn = eachTurn((lines) => {
    let chunk = '';
    let size = 0;
    for (const line of lines) {
      const length = Buffer.byteLength(line);
      if (size + length > ATOMIC_WRITE_BYTES && chunk) {
        writeAll(chunk);
        chunk = '';
        size = 0;
      }
      chunk += line;
      size += length;
    }
    if (chunk) writeAll(chunk);
  });
  return { write: turn.write, flushSync: turn.flush };
}
