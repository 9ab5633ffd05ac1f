// Backups and restores stopped before they finished (a review, 2026-12-02). A backup or restore writes
// its copy into a file beside its target (`FILE.partial-<pid>-<place>`) and renames it into place. One
// killed with SIGKILL, or by a power cut, cannot remove that file: it was left beside the backups for
// ever, every donor in it, and the next backup, prune and keep-replaced left it too. A SIGTERM or SIGINT
// ended the backup at once by default, leaving it as well (and on PostgreSQL a pg_dump still writing
// it). And on PostgreSQL a backup killed between putting its archive in place and writing its audit
// entry left an archive that --prune-older-than, which knows one only by that entry, never deleted.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { BACKENDS, holdExclusively, queryPostgres, SQLITE, tempDir, waitingFor } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, startAlmoner, until, type Run } from '../support/cli.js';

const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');
const STRACE = spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true']).status === 0;

/** A copy's file beside a backup or restore's target, as this version names it or as one before 2026-12-02 did. */
const COPY = /\.partial-[0-9]+(-[0-9a-f]{8})?$/;
const copiesIn = (folder: string) => readdirSync(folder).filter((name) => COPY.test(name));


/** The run's end: its exit status, or the signal that ended it. */
const ending = (done: Promise<Run>) =>
  done.then(
    (run) => ({ code: run.code, signal: null as string | null, stderr: run.stderr, stdout: run.stdout }),
    (err: { code?: number | null; signal?: string | null; stderr?: string; stdout?: string }) => ({ code: err.code ?? null, signal: err.signal ?? null, stderr: err.stderr ?? '', stdout: err.stdout ?? '' }),
  );

const daysAgo = (path: string, days: number) => {
  const at = Date.now() / 1000 - days * 24 * 60 * 60;
  utimesSync(path, at, at);
};

test('SQLite: a backup killed with SIGKILL as it copies leaves its copy, which the next backup into that folder removes and names; a copy another backup is still writing is left, as is a new one written elsewhere (another machine, another container); any not written to for a day goes', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  const other = await SQLITE.createDatabase();
  try {
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    for (const db of [database, other]) assert.equal((await almoner(db.url, ['charity', 'create', '--name', 'Killed', '--email', 'k@example.org', '--json'])).code, 0);
    const folder = tempDir();

    // Two backups at work, each copy waiting for the database (their files beside the backups made): one is killed.
    const held = holdExclusively(path);
    const running = startAlmoner(database.url, ['backup', '--out', join(folder, 'running.db')]);
    let left: string | undefined;
    let third: Run;
    const elsewhere = 'elsewhere.db.partial-4241-0badc0de';
    const oldElsewhere = 'old-elsewhere.db.partial-4242-0badc0de';
    const oldStyle = 'old-style.db.partial-4243';
    try {
      await until('the first backup makes its copy', 10_000, () => readdirSync(folder).some((n) => n.startsWith('running.db.partial-')));
      process.kill(running.pid, 'SIGSTOP'); // at work, as long as this takes (SQLite would give up waiting for the database after 5 s)
      const killed = startAlmoner(database.url, ['backup', '--out', join(folder, 'killed.db')]);
      await until('the second backup makes its copy', 10_000, () => readdirSync(folder).some((n) => n.startsWith('killed.db.partial-')));
      process.kill(killed.pid, 'SIGKILL');
      assert.equal((await ending(killed.done)).signal, 'SIGKILL');
      left = readdirSync(folder).find((n) => n.startsWith('killed.db.partial-'));
      assert.ok(left?.startsWith(`killed.db.partial-${killed.pid}`), `the killed backup's copy: ${left}`);
      // Copies of others: one of another place written just now (it may be at work there), one of another place and one an
      // Almoner before 2026-12-02 named (no place), neither written to for two days.
      for (const name of [elsewhere, oldElsewhere, oldStyle]) writeFileSync(join(folder, name), 'half a copy', { mode: 0o600 });
      daysAgo(join(folder, oldElsewhere), 2);
      daysAgo(join(folder, oldStyle), 2);
      // A backup of another database into that folder, while the first is still at work.
      third = await almoner(other.url, ['backup', '--out', join(folder, 'third.db')]);
      assert.ok(readdirSync(folder).some((n) => n.startsWith('running.db.partial-')), 'the copy of the backup at work is left');
    } finally {
      held.release();
      process.kill(running.pid, 'SIGCONT');
    }
    assert.equal(third.code, 0, third.stderr);
    assert.match(third.stdout, new RegExp(`^removed 3 unfinished copies that a backup or restore stopped before it finished left in \\S+: ${[left!, oldElsewhere, oldStyle].sort().join(', ').replace(/[.]/g, '\\.')}$`, 'm'));
    const first = await ending(running.done);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(readdirSync(folder).sort(), [elsewhere, 'running.db', 'third.db'].sort());
  } finally {
    await database.drop();
    await other.drop();
  }
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`SQLite: a backup stopped by ${signal} as it copies removes its copy and ends by that signal, no backup written (it ended at once, its copy left)`, async () => {
    assertBuilt();
    const database = await SQLITE.createDatabase();
    try {
      const path = database.location.dialect === 'sqlite' ? database.location.path : '';
      assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Stopped', '--email', 's@example.org', '--json'])).code, 0);
      const folder = tempDir();
      const held = holdExclusively(path);
      const run = startAlmoner(database.url, ['backup', '--out', join(folder, 'stopped.db')]);
      try {
        await until('the backup makes its copy', 10_000, () => copiesIn(folder).length === 1);
        process.kill(run.pid, signal);
      } finally {
        held.release(); // its copy goes on meanwhile (SQLite's step, synchronous), and the signal is acted on once it is done
      }
      const ended = await ending(run.done);
      assert.equal(ended.signal, signal, `ended by the signal: ${JSON.stringify(ended)}`);
      assert.deepEqual(readdirSync(folder), [], 'neither its copy nor a backup');
    } finally {
      await database.drop();
    }
  });
}

test('SQLite: a restore killed with SIGKILL once its copy is written, as it begins its swap, leaves the copy beside the database; keep-replaced removes it and says so, the database as it was', { skip: !STRACE && 'needs strace' }, async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    const folder = join(path, '..');
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Before', '--email', 'b@example.org', '--json'])).code, 0);
    const backup = join(tempDir(), 'b.db');
    assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'After', '--email', 'a@example.org', '--json'])).code, 0);
    // SIGKILL at the restore's first rename (its side files moved aside, the first step of its swap): the copy is whole, nothing moved.
    const inject = ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=rename,renameat,renameat2', '-e', 'inject=rename,renameat,renameat2:signal=KILL'];
    const killed = await new Promise<{ signal: string | null }>((resolve) =>
      execFile('strace', [...inject, BIN, 'restore', backup, '--replace'], { env: childEnv(database.url) }, (err) => resolve({ signal: (err as { signal?: string } | null)?.signal ?? null })),
    );
    assert.ok(existsSync(`${path}.restoring`), `the restore was killed marked (${JSON.stringify(killed)})`);
    const copies = copiesIn(folder);
    assert.equal(copies.length, 1, `the killed restore's copy: ${readdirSync(folder).join(', ')}`);

    const kept = await almoner(database.url, ['keep-replaced']);
    assert.equal(kept.code, 0, kept.stderr);
    assert.match(kept.stdout, new RegExp(`^removed the copy the restore was writing when it stopped: ${copies[0]!.replace(/[.]/g, '\\.')}$`, 'm'));
    assert.match(kept.stdout, /stopped before it replaced anything: the database is as it was/);
    assert.deepEqual(copiesIn(folder), [], 'no copy left');
    assert.match((await almoner(database.url, ['charity', 'list'])).stdout, /After/);
  } finally {
    await database.drop();
  }
});

test('PostgreSQL: a backup stopped by SIGTERM while pg_dump runs removes its file and stops pg_dump, ending by the signal (pg_dump went on, and wrote the file once it could)', { skip: !POSTGRES && 'no TEST_DATABASE_URL' }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const locker = new pg.Client({ connectionString: database.url });
  try {
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Dumped', '--email', 'd@example.org', '--json'])).code, 0);
    const folder = tempDir();
    await locker.connect();
    await locker.query('begin');
    await locker.query('lock table audit_log in access exclusive mode'); // pg_dump waits for it, its file made
    const run = startAlmoner(database.url, ['backup', '--out', join(folder, 'stopped.dump')]);
    await waitingFor(database.url, 'LOCK TABLE', 15_000);
    assert.equal(copiesIn(folder).length, 1, 'its file is made');
    process.kill(run.pid, 'SIGTERM');
    const ended = await ending(run.done);
    assert.equal(ended.signal, 'SIGTERM', JSON.stringify(ended));
    await until('pg_dump stops', 10_000, async () => (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'pg_dump'"))[0]!.n === 0);
    await locker.query('commit');
    await new Promise((r) => setTimeout(r, 500)); // a pg_dump left running would write its file now
    assert.deepEqual(readdirSync(folder), [], 'nothing left');
  } finally {
    await locker.end().catch(() => {});
    await database.drop();
  }
});

test('PostgreSQL: a backup killed with SIGKILL before its audit entry is written leaves no archive that --prune-older-than never deletes: the next backup removes what it left, and prunes the rest', { skip: !POSTGRES && 'no TEST_DATABASE_URL' }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const locker = new pg.Client({ connectionString: database.url });
  try {
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Unrecorded', '--email', 'u@example.org', '--json'])).code, 0);
    const folder = tempDir();
    // The store that records the backup waits for the table of running commands, which it writes as it opens; killed there.
    await locker.connect();
    await locker.query('begin');
    await locker.query('lock table almoner_instances in share mode');
    const run = startAlmoner(database.url, ['backup', '--out', join(folder, 'killed.dump')]);
    await waitingFor(database.url, 'almoner_instances', 20_000);
    process.kill(run.pid, 'SIGKILL');
    assert.equal((await ending(run.done)).signal, 'SIGKILL');
    await locker.query('commit');
    const recorded = await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from audit_log where action = 'backup'");
    assert.ok(!existsSync(join(folder, 'killed.dump')) || recorded[0]!.n === 1, 'an archive at its name is one the audit trail records');
    for (const name of readdirSync(folder)) if (!COPY.test(name)) daysAgo(join(folder, name), 2); // its copy, if any, goes as its process is gone
    const next = await almoner(database.url, ['backup', '--out', join(folder, 'next.dump'), '--prune-older-than', '1']);
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(readdirSync(folder), ['next.dump'], 'what the killed backup left is gone');
  } finally {
    await locker.end().catch(() => {});
    await database.drop();
  }
});
