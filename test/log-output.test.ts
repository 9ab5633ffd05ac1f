// The server's log output: every line written, in order, whether it goes out at its turn's end or is
// flushed before exit; and two processes sharing one stdout never split each other's lines.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, fdatasync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as turnEnd, setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ATOMIC_WRITE_BYTES, FLUSH_AFTER_BYTES, logOutput, STALLED_MS } from '../src/log-output.js';
import { tempDir } from './support/backends.js';

const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `{"n":${i},"tag":"${tag}","text":"caf\u00e9 \u2603"}\n`);

test('lines written over many turns all arrive, in order', async () => {
  const dir = tempDir();
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'w');
  const out = logOutput(fd);
  const sent = lines(5000, 'async');
  for (let i = 0; i < sent.length; i++) {
    out.write(sent[i]!);
    if (i % 97 === 0) await turnEnd(); // some turns with one line, some with many
  }
  for (let waited = 0; readFileSync(path, 'utf8').length < sent.join('').length && waited < 5000; waited += 10) await sleep(10);
  assert.equal(readFileSync(path, 'utf8'), sent.join(''));
  closeSync(fd);
  rmSync(dir, { recursive: true });
});

test('flushSync writes out the lines of the current turn before it returns', () => {
  const dir = tempDir();
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'w');
  const out = logOutput(fd);
  const sent = lines(300, 'sync');
  for (const line of sent) out.write(line);
  out.flushSync();
  assert.equal(readFileSync(path, 'utf8'), sent.join(''));
  closeSync(fd);
  rmSync(dir, { recursive: true });
});

test('lines of every size, past the 4 KiB of a write and the 64 KiB buffer, multi-byte or not, arrive whole, in order, in writes of whole lines of at most 4 KiB', () => {
  const dir = tempDir();
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'w');
  const writes: Buffer[] = [];
  const out = logOutput(fd, { write: (to, bytes, offset) => (writes.push(Buffer.from(bytes.subarray(offset))), writeSync(to, bytes, offset)) });
  /** A line of exactly `bytes` bytes of ASCII. */
  const ascii = (bytes: number, i: number) => {
    const line = `{"i":${i},"a":""}\n`;
    return line.replace('""', `"${'a'.repeat(bytes - line.length)}"`);
  };
  /** A line of exactly `units` UTF-16 units, nearly all snowmen (3 bytes each in UTF-8). */
  const snowmen = (units: number, i: number) => {
    const line = `{"i":${i},"s":""}\n`;
    return line.replace('""', `"${'\u2603'.repeat(units - line.length)}"`);
  };
  const sent = [
    ascii(20, 0), ascii(4096, 1), ascii(4097, 2), ascii(4095, 3), ascii(100, 4), ascii(2048, 5), ascii(2048, 6), ascii(2048, 7), ascii(2049, 8),
    snowmen(21_845, 9), snowmen(21_846, 10), snowmen(100, 11), ascii(65_536, 12), snowmen(40_000, 13), ascii(30, 14),
    ...Array.from({ length: 40 }, (_, i) => (i % 2 ? ascii(200 + i, 15 + i) : snowmen(300 + i, 15 + i))),
  ];
  for (const line of sent) out.write(line);
  out.flushSync();
  assert.equal(readFileSync(path, 'utf8'), sent.join(''));
  // Each write is whole lines (it ends where a line ends, and begins where one begins), and at most
  // 4 KiB unless it is one line alone.
  const ends = new Set<number>();
  let at = 0;
  for (const line of sent) ends.add((at += Buffer.byteLength(line)));
  const linesIn = (w: Buffer) => w.toString('utf8').split('\n').length - 1;
  let written = 0;
  for (const w of writes) {
    assert.ok(ends.has(written + w.length), `a write of ${w.length} bytes ends inside a line`);
    assert.ok(w.length <= ATOMIC_WRITE_BYTES || linesIn(w) === 1, `a write of ${w.length} bytes holds ${linesIn(w)} lines`);
    written += w.length;
  }
  assert.ok(writes.some((w) => w.length === ATOMIC_WRITE_BYTES && linesIn(w) > 1), 'two lines of 4 KiB together were written together');
  closeSync(fd);
  rmSync(dir, { recursive: true });
});

test('a log file is written out behind the writes, every FLUSH_AFTER_BYTES, one fdatasync at a time; what is not a file never', async () => {
  const dir = tempDir();
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'w');
  const flushes: (() => void)[] = [];
  const out = logOutput(fd, { flushBehind: (to, done) => (assert.equal(to, fd), flushes.push(done)) });
  const line = `${'x'.repeat(1023)}\n`; // 1 KiB
  let sentKib = 0;
  const turn = async (kib: number) => {
    sentKib += kib;
    for (let i = 0; i < kib; i++) out.write(line);
    await turnEnd();
  };
  await turn(FLUSH_AFTER_BYTES / 1024 - 1);
  assert.equal(flushes.length, 0, 'not before FLUSH_AFTER_BYTES');
  await turn(1);
  assert.equal(flushes.length, 1, 'at FLUSH_AFTER_BYTES');
  await turn(3 * FLUSH_AFTER_BYTES / 1024);
  assert.equal(flushes.length, 1, 'not while one is under way');
  flushes[0]!();
  await turn(1);
  assert.equal(flushes.length, 2, 'the bytes written while it was under way count towards the next');
  flushes[1]!();
  await turn(FLUSH_AFTER_BYTES / 1024 - 2);
  assert.equal(flushes.length, 2);
  closeSync(fd);
  assert.equal(readFileSync(path).length, sentKib * 1024, 'every line written');

  // The real fdatasync, on a file: called, and without an error; the lines past several FLUSH_AFTER_BYTES all arrive.
  const fd2 = openSync(path, 'w');
  const synced: (Error | null)[] = [];
  let firstSynced = () => {};
  const real = logOutput(fd2, {
    flushBehind: (to, done) =>
      fdatasync(to, (err) => {
        synced.push(err);
        done();
        if (synced.length === 1) firstSynced();
      }),
  });
  const oneSync = new Promise<void>((resolve) => (firstSynced = resolve));
  const sent = lines(3 * FLUSH_AFTER_BYTES / 40, 'flushed');
  for (let i = 0; i < sent.length; i++) {
    real.write(sent[i]!);
    if (i % 1000 === 0) await turnEnd();
  }
  real.flushSync();
  await oneSync; // begun at the end of the turn that passed FLUSH_AFTER_BYTES
  assert.equal(synced[0], null);
  closeSync(fd2);
  assert.equal(readFileSync(path, 'utf8'), sent.join(''));
  rmSync(dir, { recursive: true });

  // Not a regular file (/dev/null here; a pipe, journald's socket and a terminal are not files either): nothing to write out.
  const nul = openSync('/dev/null', 'w');
  let called = 0;
  const discarded = logOutput(nul, { flushBehind: () => called++ });
  for (let i = 0; i < 2 * FLUSH_AFTER_BYTES / 1024; i++) discarded.write(line);
  await turnEnd();
  assert.equal(called, 0);
  closeSync(nul);
});

test('two processes writing to one pipe at once, with a slow reader, never split a line', async () => {
  const LINES = 20_000;
  const writer = new URL('./support/log-writer.ts', import.meta.url).pathname;
  const run = (tag: string) => `"${process.execPath}" --import tsx "${writer}" ${tag} ${LINES}`;
  // One pipe for both: the shell's stdout, which both writers inherit.
  const both = spawn('sh', ['-c', `${run('a')} & ${run('b')} & wait`], { stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  both.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    both.stdout.pause(); // a slow reader: the pipe fills, and writes wait
    setTimeout(() => both.stdout.resume(), 1);
  });
  const code = await new Promise((resolve) => both.once('close', resolve));
  assert.equal(code, 0);
  const next = { a: 0, b: 0 };
  for (const line of text.split('\n').slice(0, -1)) {
    let entry: { tag: 'a' | 'b'; i: number };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      assert.fail(`a line was split: ${line.slice(0, 120)}...`);
    }
    assert.equal(entry.i, next[entry.tag]++, `${entry.tag}'s lines in order`);
  }
  assert.deepEqual(next, { a: LINES, b: LINES });
});

/** A write that fails with `code`, as fs.writeSync throws it. */
const failing = (code: string) => Object.assign(new Error(`${code}: write failed`), { code });

// Until 2026-11-30 a failed write threw out of the turn's end and killed the server: its log's disk
// full (and again at each restart), or its reader gone; a reader stopped held every request (a faults review).
test('a log that cannot be written loses lines, never the process: a full disk, a reader gone; once it takes lines again, how many were lost is told', async () => {
  const written: string[] = [];
  let fault: string | undefined = 'ENOSPC';
  const told: [number, string][] = [];
  const nul = openSync('/dev/null', 'w');
  const out = logOutput(nul, {
    write: (_fd, bytes, offset) => {
      if (fault) throw failing(fault);
      written.push(Buffer.from(bytes.subarray(offset)).toString());
      return bytes.length - offset;
    },
    resumed: (lost, why) => told.push([lost, why]),
  });
  const sent = lines(3000, 'full'); // several writes a turn: the first fails, the rest of the turn is dropped untried
  for (const line of sent.slice(0, 1000)) out.write(line);
  await turnEnd();
  for (const line of sent.slice(1000, 2000)) out.write(line);
  out.flushSync();
  assert.deepEqual(written, []);
  assert.deepEqual(told, [], 'nothing told while it fails');
  fault = undefined;
  for (const line of sent.slice(2000)) out.write(line);
  await turnEnd();
  assert.equal(written.join(''), sent.slice(2000).join(''));
  assert.deepEqual(told, [[2000, 'ENOSPC']], 'told once, with the first error');
  fault = 'EPIPE';
  out.write(sent[0]!);
  out.flushSync();
  fault = undefined;
  out.write(sent[1]!);
  out.flushSync();
  assert.deepEqual(told, [[2000, 'ENOSPC'], [1, 'EPIPE']]);
  closeSync(nul);
});

test('a reader that takes nothing for STALLED_MS has its lines dropped, a turn not held for it again while it still takes nothing; a slow one loses nothing', async () => {
  let now = 0;
  let full = true;
  const written: string[] = [];
  const told: [number, string][] = [];
  const nul = openSync('/dev/null', 'w');
  const out = logOutput(nul, {
    clock: () => now,
    write: (_fd, bytes, offset) => {
      now += 50; // each try, 50 ms on the clock
      if (full) throw failing('EAGAIN');
      written.push(Buffer.from(bytes.subarray(offset)).toString());
      return bytes.length - offset;
    },
    resumed: (lost, why) => told.push([lost, why]),
  });
  out.write('{"a":1}\n');
  out.flushSync();
  assert.ok(now >= STALLED_MS && now < STALLED_MS + 200, `waited ${now} ms, STALLED_MS then dropped`);
  const before = now;
  out.write('{"a":2}\n');
  out.flushSync();
  assert.equal(now - before, 50, 'a pipe still stalled is tried once, not waited for');
  full = false;
  out.write('{"a":3}\n');
  out.flushSync();
  assert.deepEqual(written, ['{"a":3}\n']);
  assert.deepEqual(told, [[2, 'stalled']]);

  // A slow reader: full for a moment, under STALLED_MS, at every write. Nothing is lost.
  let tries = 0;
  const slowWritten: string[] = [];
  const slow = logOutput(nul, {
    clock: () => now,
    write: (_fd, bytes, offset) => {
      now += 100;
      if (++tries % 5 !== 0) throw failing('EAGAIN'); // 400 ms of nothing, then it takes the write
      slowWritten.push(Buffer.from(bytes.subarray(offset)).toString());
      return bytes.length - offset;
    },
  });
  const sent = lines(20, 'slow');
  for (const line of sent) slow.write(line);
  slow.flushSync();
  assert.equal(slowWritten.join(''), sent.join(''));
  closeSync(nul);
});

test('a line cut short by a failed write is ended before the next write, so the lines after it stay whole', () => {
  const written: string[] = [];
  let calls = 0;
  const nul = openSync('/dev/null', 'w');
  const out = logOutput(nul, {
    write: (_fd, bytes, offset) => {
      calls++;
      if (calls === 1) {
        written.push(Buffer.from(bytes.subarray(offset, offset + 10)).toString());
        return 10; // a short write: the disk filled partway
      }
      if (calls === 2) throw failing('ENOSPC');
      written.push(Buffer.from(bytes.subarray(offset)).toString());
      return bytes.length - offset;
    },
  });
  const long = `{"long":"${'x'.repeat(70_000)}"}\n`; // past the buffer: written alone
  out.write(long);
  out.flushSync();
  out.write('{"next":1}\n');
  out.flushSync();
  assert.deepEqual(written, [long.slice(0, 10), '\n{"next":1}\n'], 'the newline in the same write as the next line');
  closeSync(nul);
});

test('a file that refused writes: the first write after begins with a newline, so a line another process sharing it had cut is ended', () => {
  const dir = tempDir();
  const fd = openSync(join(dir, 'shared.log'), 'w');
  const written: string[] = [];
  let full = true;
  const out = logOutput(fd, {
    write: (_fd, bytes, offset) => {
      if (full) throw failing('ENOSPC');
      written.push(Buffer.from(bytes.subarray(offset)).toString());
      return bytes.length - offset;
    },
  });
  out.write('{"lost":1}\n');
  out.flushSync();
  full = false;
  out.write('{"after":1}\n');
  out.write('{"after":2}\n');
  out.flushSync();
  out.write('{"after":3}\n');
  out.flushSync();
  assert.deepEqual(written, ['\n{"after":1}\n{"after":2}\n', '{"after":3}\n']);
  closeSync(fd);
  rmSync(dir, { recursive: true });
});
