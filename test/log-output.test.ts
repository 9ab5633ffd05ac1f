// The server's log output: every line written, in order, whether it goes out on its own turn or is
// flushed before exit.
import assert from 'node:assert/strict';
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
