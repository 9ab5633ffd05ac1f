// A SQLite restore whose disk fills once its backup is in place (the restored database opened as the
// server would, its audit entry written): the command says the restore stopped half way, that the
// database is refused until it is finished, and to run keep-replaced, which finishes it once there is
// room. SQLite only; skipped where a small tmpfs cannot be mounted.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { mountTmpfs, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';

describe('restore onto a disk that fills half way [sqlite]', () => {
  const dir = tempDir();
  const mountPoint = join(dir, 'small');
  const noMount = mountTmpfs(mountPoint, '4m');
  after(() => {
    if (!noMount) execFileSync('umount', ['-l', mountPoint]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('says the restore did not finish and to run keep-replaced, which finishes it once there is room', { skip: noMount }, async () => {
    assertBuilt();
    chmodSync(mountPoint, 0o700);
    const folder = join(mountPoint, 'db');
    mkdirSync(folder, { mode: 0o700 });
    const db = join(folder, 'almoner.db');
    const url = `sqlite:${db}`;
    assert.equal((await almoner(url, ['charity', 'create', '--name', 'Full', '--email', 'full@example.org', '--json'])).code, 0);
    const backup = join(dir, 'backup.db');
    assert.equal((await almoner(url, ['backup', '--out', backup])).code, 0);
    const saved = join(dir, 'saved.db');
    copyFileSync(db, saved);
    const filler = join(mountPoint, 'filler');
    const free = () => {
      const s = statfsSync(mountPoint);
      return s.bavail * s.bsize;
    };

    // Room for the backup's copy and a little more: the copy is put in place, and what comes after it
    // (the WAL and the index of the restored database, its audit entry) finds the disk full. How much
    // more that takes is SQLite's to say, so a few sizes are tried, each on the database as it was.
    let failed: { code: number | null; stderr: string } | undefined;
    for (let kb = 8; kb <= 96 && !failed; kb += 8) {
      rmSync(filler, { force: true });
      for (const name of readdirSync(folder)) rmSync(join(folder, name), { force: true });
      copyFileSync(saved, db);
      writeFileSync(filler, Buffer.alloc(Math.max(0, free() - statSync(backup).size - kb * 1024)));
      const run = await almoner(url, ['restore', backup, '--replace']);
      if (run.code !== 0 && existsSync(`${db}.restoring`)) failed = run;
    }
    assert.ok(failed, 'no size made the restore fail once its backup was in place');
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stderr, /database or disk is full/);
    assert.match(failed.stderr, /the backup is in place at .*almoner\.db, and the database that was there is kept as .*almoner\.db\.replaced-/, failed.stderr);
    assert.match(failed.stderr, /the restore did not finish: .*finish it with bin\/almoner keep-replaced/, failed.stderr);

    // Refused until it is finished; finished once there is room.
    assert.notEqual((await almoner(url, ['charity', 'list'])).code, 0);
    rmSync(filler);
    const kept = await almoner(url, ['keep-replaced']);
    assert.equal(kept.code, 0, kept.stderr);
    const list = await almoner(url, ['charity', 'list', '--json']);
    assert.equal(list.code, 0, list.stderr);
    assert.equal((JSON.parse(list.stdout) as unknown[]).length, 1);
  });
});
