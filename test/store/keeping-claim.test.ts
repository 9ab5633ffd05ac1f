// keep-replaced's claim (restoring.ts claimKeeping): of two begun at the same instant, exactly one
// goes on. Two processes (SQLite's locks are the operating system's, between processes), each told
// the moment to claim at, round after round, so that their lock requests meet.
import assert from 'node:assert/strict';
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROUNDS = 12; // until 2026-11-30, both were refused in 50 rounds of 100 here

// Told a file and a moment: it waits for the moment, claims, answers 'got' or the refusal's message, and lets go when told.
const CLAIMANT = `
const { claimKeeping } = await import(process.env.CLAIM_MODULE);
let release;
process.on('message', async (m) => {
  if (m === 'release') { release?.(); release = undefined; return process.send('released'); }
  while (Date.now() < m.at) {} // both at once
  try {
    release = await claimKeeping(m.path);
    process.send('got');
  } catch (err) {
    process.send(err.message);
  }
});
process.send('ready');
`;

function claimant(): { child: ChildProcess; next(): Promise<string> } {
  const child = fork('--input-type=module', [], {
    execArgv: ['--import', 'tsx', '--input-type=module', '--eval', CLAIMANT],
    env: { ...process.env, CLAIM_MODULE: new URL('../../src/store/restoring.ts', import.meta.url).href },
  });
  const said: string[] = [];
  const waiting: ((m: string) => void)[] = [];
  child.on('message', (m: string) => (waiting.length ? waiting.shift()!(m) : said.push(m)));
  return { child, next: () => new Promise<string>((resolve) => (said.length ? resolve(said.shift()!) : waiting.push(resolve))) };
}

test(`two keep-replaced claims begun at the same instant: exactly one goes on, the other is refused as "another keep-replaced is running" (${ROUNDS} rounds; both were refused in half such rounds until 2026-11-30)`, async () => {
  const folder = mkdtempSync(join(tmpdir(), 'almoner-keeping-'));
  const both = [claimant(), claimant()];
  try {
    assert.deepEqual(await Promise.all(both.map((c) => c.next())), ['ready', 'ready']);
    for (let round = 0; round < ROUNDS; round++) {
      const path = join(folder, `round-${round}.db`);
      const at = Date.now() + 20;
      for (const c of both) c.child.send({ path, at });
      const said = await Promise.all(both.map((c) => c.next()));
      for (const c of both) c.child.send('release');
      assert.deepEqual(await Promise.all(both.map((c) => c.next())), ['released', 'released']);
      assert.equal(said.filter((s) => s === 'got').length, 1, `round ${round}: ${said.join(' | ')}`);
      assert.match(said.find((s) => s !== 'got')!, /another keep-replaced of .* is running: wait for it/);
    }
  } finally {
    for (const c of both) c.child.kill();
    rmSync(folder, { recursive: true, force: true });
  }
});

// A claim file another user left (root's, say) that this user may not write: SQLite opened it read-only, without a word,
// and a read-only file's lock excluded nothing, so two ran at once (a review). Run as `nobody` beside a root-owned file.
const AS_NOBODY = process.getuid?.() === 0 && spawnSync('runuser', ['-u', 'nobody', '--', 'true']).status === 0;

test('a claim file this user may not write is refused, saying whose it may be and what to do (it was opened read-only, and excluded nothing)', { skip: !AS_NOBODY && 'needs root and runuser, to run as nobody' }, () => {
  const folder = mkdtempSync(join(tmpdir(), 'almoner-keeping-'));
  try {
    chmodSync(folder, 0o777);
    const path = join(folder, 'almoner.db');
    writeFileSync(`${path}.restoring.keeping`, ''); // root's, 0644
    const script = `import(${JSON.stringify(new URL('../../src/store/restoring.ts', import.meta.url).href)}).then(({ claimKeeping }) => claimKeeping(${JSON.stringify(path)})).then(() => console.log('got'), (err) => console.log(err.message))`;
    const run = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, '--import', 'tsx', '--input-type=module', '--eval', script], { cwd: fileURLToPath(new URL('../..', import.meta.url)), encoding: 'utf8' });
    assert.match(run.stdout, /almoner\.db\.restoring\.keeping \(keep-replaced's claim\) cannot be written by this user: once no keep-replaced is running, delete it, or run as its owner/, run.stderr);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});
