// A `giftaid claim` that waits for a folder another claim holds, and finds it let go: the other
// removes its .almoner-giftaid.lock as it ends (src/cli/giftaid.ts holdFolder), and SQLite answers
// the lock taken on that removed file SQLITE_IOERR_FSTAT. Until this fix that was said as "--out …
// cannot be held for this command's files (.almoner-giftaid.lock in it: disk I/O error)", exit 2:
// the second of two claims begun at once into one folder said so in 5 rounds of 6 (a README review
// of 2026-11-30), where the README promises the other's message. A file its holder removed is
// looked at again, as holdFolder already did for one it found gone after taking it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { recordGiftAided } from '../support/app.js';
import { SQLITE, tempDir } from '../support/backends.js';
import { assertBuilt, operator } from '../support/cli.js';

/** Whether process `pid` has `file` open. */
function hasOpen(pid: number, file: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === file;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

test('a giftaid claim that waited for a folder whose holder ended (and removed its lock file) goes on', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const { id, username } = await operator(database, SQLITE.name).charity('Released');
    await recordGiftAided(database.url, id, [{ donor_email: 'jane@example.org', donor_postcode: 'SW1A 1AA' }], 30);
    const out = join(tempDir(), 'claims');
    mkdirSync(out, { mode: 0o700 });
    const lock = join(out, '.almoner-giftaid.lock');
    // The other claim, running: its folder held as holdFolder holds it.
    const other = new Database(lock);
    other.exec('BEGIN EXCLUSIVE');
    const child = spawn(resolve('bin/almoner'), ['giftaid', 'claim', '--charity', username, '--out', out, '--json'], {
      env: { ...process.env, DATABASE_URL: database.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    let open = false;
    let ended = false;
    void exited.then(() => (ended = true));
    // As soon as this claim has the lock file open (and waits for it), the other ends as a claim does: its file removed, then let go.
    while (!ended && !(open = hasOpen(child.pid!, lock))) await new Promise((r) => setImmediate(r));
    rmSync(lock, { force: true });
    rmSync(`${lock}-journal`, { force: true });
    other.close();
    const code = await exited;
    assert.ok(open, `the claim never opened the lock file: ${stderr}`);
    assert.doesNotMatch(stderr, /disk I\/O error/);
    assert.equal(code, 0, stderr);
    const { claim } = JSON.parse(stdout) as { claim: number };
    assert.deepEqual(readdirSync(out), [`claim-${claim}-1.ods`]);
  } finally {
    await database.drop();
  }
});
