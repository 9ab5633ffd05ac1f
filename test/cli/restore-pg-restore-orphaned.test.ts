// A PostgreSQL restore whose own process (node, not its process group) is ended while pg_restore runs.
// SIGKILL (the OOM killer), where pg_restore is run plainly (no setpriv that takes --pdeathsig): pg_restore
// goes on alone, and keep-replaced, run at once, saw the restore's comment still there (pg_restore had not
// committed) and took it as one that replaced nothing: it deleted the replaced database's trail, claims and
// dump and unmarked, and pg_restore then committed, the data recorded after the backup gone for good (a
// review, 2026-12-02). keep-replaced now refuses (exit 2) while pg_restore is seen at work, and finishes
// the restore once it has committed. Through setpriv --pdeathsig TERM (util-linux), pg_restore ends with
// the restore, cancelling its statement as it goes: its transaction rolls back at once, and keep-replaced
// finds nothing replaced. And killed before pg_restore connected (it cannot be seen then), the
// pg_restore left alone connected after keep-replaced had taken the restore as one that replaced nothing,
// and put the backup over the newer data (a review, 2026-12-02): now it is dead before it connects.
// SIGTERM: the restore passes it on to pg_restore and waits for it (it rolls back), then removes its
// mark and files and ends as SIGTERM would: before, it ended at once and pg_restore committed alone.
// Here pg_restore is held at its first statement by a lock the test takes. Without the fixes in
// src/cli/backup.ts (stillRestoring, runPgTool, dyingWithThis), these tests fail.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import pg from 'pg';
import { BACKENDS, queryPostgres, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, ended, killedBySignal, type operator, orphanedAsPgRestoreBegins, SETPRIV, startAlmoner, until, withBackupBetween, withoutSetpriv } from '../support/cli.js';

const postgres = BACKENDS.find((b) => b.name === 'postgres');

/** A pg_restore in front of the real one whose restore (--single-transaction) says it is there (`reached`), waits for `go`, then is the real one (exec: the same process). */
function heldPgRestore(folder: string): string {
  const shim = tempDir();
  const real = execFileSync('sh', ['-c', 'command -v pg_restore'], { encoding: 'utf8' }).trim();
  writeFileSync(
    join(shim, 'pg_restore'),
    `#!/bin/sh\ncase " $* " in *" --single-transaction "*) touch "${folder}/reached"; while [ ! -e "${folder}/go" ]; do sleep 0.05; done;; esac\nexec "${real}" "$@"\n`,
    { mode: 0o755 },
  );
  return `${shim}:${process.env.PATH}`;
}

const pgRestoreSessions = async (database: TestDatabase) =>
  (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'pg_restore'"))[0]!.n;
const marked = async (database: TestDatabase) => (await queryPostgres<{ t: string | null }>(database.url, "select to_regclass('almoner_restoring')::text as t"))[0]!.t !== null;

/**
 * Starts the restore with pg_restore held at its first statement by a lock on every Almoner table; the lock's client, to release it.
 * `setpriv`: false, run as where there is no setpriv that takes --pdeathsig.
 */
async function restoreHeld(database: TestDatabase, file: string, setpriv: boolean): Promise<{ pid: number; done: Promise<unknown>; holder: pg.Client }> {
  const folder = tempDir();
  const path = setpriv ? heldPgRestore(folder) : withoutSetpriv(heldPgRestore(folder));
  const run = startAlmoner(database.url, ['restore', file, '--replace'], { PATH: path }, { timeoutMs: 60_000 });
  const done = run.done.then(
    (r) => r,
    (err: unknown) => err,
  );
  await until('pg_restore reached', 20_000, () => existsSync(join(folder, 'reached')));
  const holder = new pg.Client({ connectionString: database.url });
  await holder.connect();
  const tables = await holder.query<{ t: string }>("select quote_ident(tablename) as t from pg_tables where schemaname = current_schema() and tablename <> 'almoner_restoring'");
  await holder.query('begin');
  await holder.query(`lock table ${tables.rows.map((r) => r.t).join(', ')} in access share mode`);
  writeFileSync(join(folder, 'go'), '');
  await until('pg_restore waits for the lock', 20_000, async () => (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'pg_restore' and wait_event_type = 'Lock'"))[0]!.n > 0);
  return { pid: run.pid, done, holder };
}

/**
 * A database with a charity signed up before its backup and one after, a restore of that backup over it held with its
 * pg_restore waiting for a lock (restoreHeld, `setpriv` or not), for `run`; the lock's session ended and the database dropped after it.
 */
async function withRestoreHeld(
  run: (t: { database: TestDatabase; cli: ReturnType<typeof operator>['cli']; file: string; held: Awaited<ReturnType<typeof restoreHeld>> }) => Promise<void>,
  setpriv = SETPRIV,
): Promise<void> {
  await withBackupBetween(postgres!, async ({ database, cli, file }) => {
    const held = await restoreHeld(database, file, setpriv);
    try {
      await run({ database, cli, file, held });
    } finally {
      await held.holder.end().catch(() => {});
    }
  });
}

describe('a PostgreSQL restore whose process is ended while pg_restore runs', { skip: postgres ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  test('SIGKILL, pg_restore run plainly: keep-replaced refuses (exit 2) while pg_restore is at work, keeping the files; once pg_restore has committed, it finishes the restore', async () => {
    await withRestoreHeld(async ({ database, cli, file, held }) => {
      const holder = held.holder;
      process.kill(held.pid, 'SIGKILL');
      await held.done;
      const left = readdirSync(dirname(file)).filter((f) => f !== basename(file));
      assert.ok(left.some((f) => f.includes('.replaced-trail-')), `the restore wrote the replaced trail: ${left.join(', ')}`);
      assert.equal(await pgRestoreSessions(database), 1, 'pg_restore goes on');

      const refused = await almoner(database.url, ['keep-replaced']);
      assert.equal(refused.code, 2, `keep-replaced refused: ${refused.stderr}${refused.stdout}`);
      assert.match(refused.stderr, /pg_restore \(process \d+.*still at work.*run bin\/almoner keep-replaced again/s);
      assert.deepEqual(readdirSync(dirname(file)).filter((f) => f !== basename(file)), left, 'the files the restore wrote are kept');
      assert.ok(await marked(database), 'still marked');

      await holder.query('commit');
      await until('pg_restore ended', 30_000, async () => (await pgRestoreSessions(database)) === 0);
      const finished = await cli(['keep-replaced']);
      assert.doesNotMatch(finished.stdout, /replaced anything/);
      assert.match(finished.stdout, /is finished/);
      // The charity signed up after the backup is carried over from the replaced database's trail, as a restore that finished does.
      assert.match(finished.stdout, /signed up since: added/);
      assert.ok(!(await marked(database)), 'unmarked');
      const actions = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((line) => (JSON.parse(line) as { action: string }).action);
      assert.ok(actions.includes('restore'), `the restore is recorded: ${actions.join(', ')}`);
    }, false);
  });

  test('SIGKILL, pg_restore run through setpriv --pdeathsig TERM: it ends with the restore, its statement cancelled, so its session goes at once though the lock it waits for is still held, nothing committed; keep-replaced then finds nothing replaced', { skip: !SETPRIV && 'needs util-linux setpriv with --pdeathsig' }, async () => {
    await withRestoreHeld(async ({ database, cli, file, held }) => {
      process.kill(held.pid, 'SIGKILL');
      await held.done;
      // The lock still held: a session that went is one its pg_restore cancelled, not one that got its lock and finished.
      await until("pg_restore's session ended", 30_000, async () => (await pgRestoreSessions(database)) === 0);
      await held.holder.query('commit'); // keep-replaced waits for a session holding a lock on the database's tables, as this one is
      const finished = await cli(['keep-replaced']);
      assert.match(finished.stdout, /stopped before it replaced anything: the database is as it was/);
      assert.deepEqual(readdirSync(dirname(file)), [basename(file)], 'what the restore wrote beside the backup is removed');
      assert.match((await cli(['charity', 'list'])).stdout, /Afterwards/, 'the database is as it was');
      assert.ok(!(await marked(database)), 'unmarked');
    });
  });

  test('SIGKILL before pg_restore connected: keep-replaced run before it would have connected loses nothing, as it is dead (it went on alone, and put the backup over the newer data)', { skip: !SETPRIV && 'needs util-linux setpriv with --pdeathsig' }, async () => {
    await withBackupBetween(postgres!, async ({ database, cli, file }) => {
      const folder = tempDir();
      const killed = await killedBySignal(almoner(database.url, ['restore', file, '--replace'], { PATH: orphanedAsPgRestoreBegins(folder) }));
      assert.equal(killed.signal, 'SIGKILL');
      const orphan = Number(readFileSync(join(folder, 'orphan'), 'utf8'));

      // In the moment before pg_restore connects: nothing of it to be seen in the database.
      const kept = await almoner(database.url, ['keep-replaced']);
      assert.equal(kept.code, 0, `${kept.stderr}${kept.stdout}`);
      assert.match(kept.stdout, /stopped before it replaced anything: the database is as it was/);

      writeFileSync(join(folder, 'go'), ''); // a pg_restore left running now connects and restores
      await until('pg_restore ended', 30_000, () => ended(orphan));
      assert.equal(await pgRestoreSessions(database), 0);
      assert.match((await cli(['charity', 'list'])).stdout, /Afterwards/, 'the charity signed up after the backup is there');
      assert.ok(!(await marked(database)), 'unmarked');
    });
  });

  test('SIGTERM: passed on to pg_restore, which rolls back; the restore removes its mark and files and ends by SIGTERM, the database as it was', async () => {
    await withRestoreHeld(async ({ database, cli, file, held }) => {
      const holder = held.holder;
      process.kill(held.pid, 'SIGTERM');
      const ended = (await held.done) as { signal?: string; code?: number };
      await holder.query('commit');
      await until('pg_restore ended', 30_000, async () => (await pgRestoreSessions(database)) === 0);
      assert.equal(ended.signal, 'SIGTERM', `ended by SIGTERM: ${JSON.stringify(ended)}`);
      assert.ok(!(await marked(database)), 'unmarked');
      assert.deepEqual(readdirSync(dirname(file)), [basename(file)], 'what the restore wrote beside the backup is removed');
      const list = await cli(['charity', 'list']);
      assert.match(list.stdout, /Afterwards/, 'the database is as it was');
      const actions = (await cli(['audit', '--json'])).stdout.trim().split('\n').map((line) => (JSON.parse(line) as { action: string }).action);
      assert.ok(!actions.includes('restore'), `no restore recorded: ${actions.join(', ')}`);
    });
  });
});
