// The server's log output: every line written, in order, whether it goes out at its turn's end or is
// flushed before exit; and two processes sharing one stdout never split each other's lines.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { logOutput } from '../src/log-output.js';
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
    if (i % 97 === 0) await new Promise((resolve) => setImmediate(resolve)); // some turns with one line, some with many
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

test('lines of every size, past the 4 KiB of a write and the 64 KiB buffer, multi-byte or not, arrive whole and in order', () => {
  const dir = tempDir();
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'w');
  const out = logOutput(fd);
  // From a few bytes to 120 KB (40,000 snowmen, 3 bytes each), around every boundary the writer keeps.
  const sizes = [1, 4000, 4095, 4096, 4097, 9000, 21_000, 21_846, 40_000, 3, 65_536, 10];
  const sent = sizes.flatMap((size, i) => [`{"i":${i},"a":"${'a'.repeat(size)}"}\n`, `{"i":${i},"s":"${'\u2603'.repeat(size)}"}\n`]);
  for (const line of sent) out.write(line);
  out.flushSync();
  assert.equal(readFileSync(path, 'utf8'), sent.join(''));
  closeSync(fd);
  rmSync(dir, { recursive: true });
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
