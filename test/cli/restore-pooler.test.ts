// A restore on PostgreSQL must see running servers whatever sits between them and PostgreSQL. Until
// 2026-12-01 it counted the database's sessions, and a server checked the restore's mark only as each
// of its connections opened: behind PgBouncer (pool_mode = transaction) the restore saw none of an
// idle server's (the pooler had let its server connections go) and went ahead, and the server's
// connections to the pooler never opened again, so it went on answering 200 for creates the restore
// then lost (a review, PgBouncer 1.18: 92 of 240). Now each server keeps a row in almoner_instances
// (src/store/instances.ts): here a real PgBouncer, a real server through it, and the restore run
// against PostgreSQL itself, as the README says.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { basic } from '../support/app.js';
import { BACKENDS, queryPostgres, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, until } from '../support/cli.js';
import { create, donationsDueForErasure, variedDonation } from '../support/load.js';
import { freePort } from '../support/daemon.js';
import { noPgBouncer, PgBouncerProcess } from '../support/pgbouncer.js';
import { ServerProcess } from '../support/server.js';

const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');

/** Sessions other than the asker's in the database: a server's, or the pooler's server connections. */
const sessions = async (database: TestDatabase) =>
  (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'"))[0]!.n;

/** A database with a charity and a donation, its pg_dump, and the charity's Basic authorization. */
async function withBackup(database: TestDatabase): Promise<{ dump: string; authorization: string }> {
  const made = await almoner(database.url, ['charity', 'create', '--name', 'Pooled', '--email', 'p@example.org', '--json']);
  assert.equal(made.code, 0, made.stderr);
  const charity = JSON.parse(made.stdout) as { username: string; password: string };
  const dump = join(tempDir(), 'pooled.dump');
  execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, database.url]);
  return { dump, authorization: basic(charity.username, charity.password) };
}

const skip = !POSTGRES ? 'needs TEST_DATABASE_URL' : noPgBouncer;

test('PostgreSQL behind PgBouncer (pool_mode = transaction): a restore is refused while an idle server runs through the pooler, the server goes on answering 200, and once it is stopped the same restore goes ahead', { skip, timeout: 90_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  // The pooler lets an idle server connection go after a second: while the server is idle it holds none.
  const pooler = await new PgBouncerProcess(database.url, await freePort(), { serverIdleTimeout: 1 }).listening();
  let server: ServerProcess | undefined;
  try {
    const { dump, authorization } = await withBackup(database);
    server = await new ServerProcess(pooler.url(database.url), { PORT: String(await freePort()) }).listening();
    const before = await create(server.url, authorization, variedDonation('before@example.org', 1));
    assert.equal(before.kind === 'answered' && before.status, 200, JSON.stringify(before));
    // Idle: no session of the server's, or of the pooler's, is left for a restore to count.
    await until('the pooler lets its server connections go', 20_000, async () => (await sessions(database)) === 0, () => pooler.log().slice(-2000));

    const refused = await almoner(database.url, ['restore', dump, '--replace']);
    assert.equal(refused.code, 2, `the restore went ahead under a running server: ${refused.stdout}${refused.stderr}`);
    assert.match(refused.stderr, new RegExp(`1 process is running on this database, through a pooler or not \\(a server, process \\d+ on \\S+, last seen \\d+\\.\\d s ago\\): stop it, then restore`));
    assert.match(refused.stderr, /if none is running, restore again in \d+ s/);
    // Refused before it marked anything: the server was never told a restore had begun.
    const during = await create(server.url, authorization, variedDonation('during@example.org', 2));
    assert.equal(during.kind === 'answered' && during.status, 200, JSON.stringify(during));

    assert.equal((await server.stop('SIGTERM', 10_000)).code, 0, server.stderr);
    server = undefined;
    // Its row goes with a clean shutdown: nothing to wait out.
    assert.deepEqual(await queryPostgres(database.url, 'select pid from almoner_instances'), []);
    await until('the pooler lets its server connections go', 20_000, async () => (await sessions(database)) === 0, () => pooler.log().slice(-2000));
    const restored = await almoner(database.url, ['restore', dump, '--replace']);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stdout, /the database that was there held 2 donations and the backup holds 0/);
  } finally {
    await server?.stop('SIGTERM', 10_000);
    await pooler.stop();
    await database.drop();
  }
});

test('PostgreSQL behind PgBouncer: a server that was running when a restore marked the database answers 503 within one of its refreshes, and 200 again once the mark is gone', { skip, timeout: 90_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const pooler = await new PgBouncerProcess(database.url, await freePort()).listening();
  const server = await new ServerProcess(pooler.url(database.url), { PORT: String(await freePort()), INSTANCE_REFRESH_MS: '100' }).listening();
  try {
    const { authorization } = await withBackup(database);
    let ok = 0;
    const answer = async (i: number) => {
      const outcome = await create(server.url, authorization, variedDonation(`d${i}@example.org`, i));
      if (outcome.kind === 'answered' && outcome.status === 200) ok++;
      return outcome.kind === 'answered' ? outcome.status : -1;
    };
    assert.equal(await answer(1), 200);
    // The mark as a restore makes it (restoring.ts), the server's connections to the pooler all open already:
    // none opens again, so no connection's check ever saw it, and every create was answered 200 on a database being replaced.
    const mark = JSON.stringify({ host: 'elsewhere', pid: 1, began: new Date().toISOString(), from: '/srv/backups/b.dump', left: [], replacing: true });
    await queryPostgres(database.url, 'create table almoner_restoring (what text not null)');
    await queryPostgres(database.url, 'insert into almoner_restoring (what) values ($1)', [mark]);
    let i = 2;
    await until('the server answers 503 on the marked database', 10_000, async () => (await answer(i++)) === 503);
    assert.equal((await fetch(`${server.url}/health/ready`)).status, 503);
    await queryPostgres(database.url, 'drop table almoner_restoring');
    await until('the server answers 200 once the mark is gone', 10_000, async () => (await answer(i++)) === 200);
    // What was answered 503 was not stored; what was answered 200 was.
    const stored = await queryPostgres<{ n: number }>(database.url, 'select count(*)::int as n from donations');
    assert.equal(stored[0]!.n, ok);
    assert.ok(ok < i - 1);
  } finally {
    await server.stop('SIGTERM', 10_000);
    await pooler.stop();
    await database.drop();
  }
});

test('PostgreSQL: a server killed without a clean shutdown (SIGKILL) blocks a restore only until five of its refreshes have passed unseen', { skip: !POSTGRES && 'needs TEST_DATABASE_URL', timeout: 90_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  try {
    const { dump } = await withBackup(database);
    // Refreshed every second (2 s in production): forgotten 5 s after it was last seen.
    const server = await new ServerProcess(database.url, { PORT: String(await freePort()), INSTANCE_REFRESH_MS: '1000' }).listening();
    server.signal('SIGKILL');
    await server.exit(10_000);
    // PostgreSQL ends a killed client's sessions as it notices: then only its row says it ran.
    await until('PostgreSQL ends the killed server\'s sessions', 10_000, async () => (await sessions(database)) === 0);
    const refused = await almoner(database.url, ['restore', dump, '--replace']);
    assert.equal(refused.code, 2, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /1 process is running on this database, through a pooler or not \(a server.*stopped without a clean shutdown.*if none is running, restore again in [1-5] s/);
    // Restored as soon as it is forgotten; never refused for a reason other than that row.
    let restored = refused;
    await until('the killed server is forgotten', 20_000, async () => {
      restored = await almoner(database.url, ['restore', dump, '--replace']);
      if (restored.code === 2) assert.match(restored.stderr, /1 process is running on this database, through a pooler or not \(a server,/);
      return restored.code === 0;
    });
    assert.match(restored.stdout, /restored /);
  } finally {
    await database.drop();
  }
});

test('PostgreSQL: a server that cannot refresh its row answers 503 once a restore could take it for gone, and 200 again once it can', { skip: !POSTGRES && 'needs TEST_DATABASE_URL', timeout: 90_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const server = await new ServerProcess(database.url, { PORT: String(await freePort()), INSTANCE_REFRESH_MS: '100' }).listening();
  try {
    const { authorization } = await withBackup(database);
    let i = 0;
    const answer = async () => {
      const outcome = await create(server.url, authorization, variedDonation(`r${++i}@example.org`, i));
      return outcome.kind === 'answered' ? outcome.status : -1;
    };
    assert.equal(await answer(), 200);
    // Its refreshes fail (the table gone from under them, as a privilege revoked would make them) while its pool's queries work:
    // a restore finds no row, and would go ahead, so the server must not go on storing creates.
    await queryPostgres(database.url, 'alter table almoner_instances rename to almoner_instances_away');
    await until('the server answers 503 once its row could be taken for gone', 10_000, async () => (await answer()) === 503);
    assert.equal((await fetch(`${server.url}/health/ready`)).status, 503);
    await queryPostgres(database.url, 'alter table almoner_instances_away rename to almoner_instances');
    await until('the server answers 200 once it has refreshed its row again', 10_000, async () => (await answer()) === 200);
  } finally {
    await server.stop('SIGTERM', 10_000);
    await database.drop();
  }
});

test('PostgreSQL behind PgBouncer: a restore is refused while a command runs through the pooler between its transactions (retention apply, its reader slow), naming it; once it has finished the restore goes ahead', { skip, timeout: 90_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const pooler = await new PgBouncerProcess(database.url, await freePort(), { serverIdleTimeout: 1 }).listening();
  try {
    const { dump } = await withBackup(database);
    // Donations due for erasure, enough that their lines fill the pipe: the command then waits for its reader between its
    // batch's transaction and what follows it, holding no server connection of the pooler's.
    const DUE = 1500;
    await donationsDueForErasure(database, DUE);

    const child = spawn(BIN, ['retention', 'apply', '--dry-run'], { env: childEnv(pooler.url(database.url)), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.stdout.pause();
    await until('the command waits for its reader', 20_000, async () => child.stdout.readableLength > 0, () => stderr);
    await until('the pooler lets its server connections go', 20_000, async () => (await sessions(database)) === 0, () => pooler.log().slice(-2000));

    const refused = await almoner(database.url, ['restore', dump, '--replace']);
    assert.equal(refused.code, 2, `the restore went ahead under a running command: ${refused.stdout}${refused.stderr}`);
    assert.match(refused.stderr, /1 process is running on this database, through a pooler or not \(`retention apply`, process \d+ on \S+, last seen \d+\.\d s ago\): stop it or let it finish, then restore/);

    let lines = 0;
    child.stdout.setEncoding('utf8').on('data', (s: string) => (lines += s.split('\n').length - 1));
    child.stdout.resume();
    assert.equal(await exited, 0, stderr);
    assert.equal(lines, DUE + 1, 'a line a donation, and the summary');
    // Its row goes as it ends: nothing to wait out.
    assert.deepEqual(await queryPostgres(database.url, 'select pid from almoner_instances'), []);
    await until('the pooler lets its server connections go', 20_000, async () => (await sessions(database)) === 0, () => pooler.log().slice(-2000));
    const restored = await almoner(database.url, ['restore', dump, '--replace']);
    assert.equal(restored.code, 0, restored.stderr);
  } finally {
    await pooler.stop();
    await database.drop();
  }
});

test('PostgreSQL: a command that only reads, run as a database user that may only read (charity list, giftaid claims, audit), runs without its row, as before commands kept one', { skip: !POSTGRES && 'needs TEST_DATABASE_URL', timeout: 60_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const role = `almoner_test_reader_${process.pid}`;
  try {
    await withBackup(database); // a charity, Almoner's tables
    await queryPostgres(database.url, `create role ${role} login`);
    await queryPostgres(database.url, `grant select on all tables in schema public to ${role}`);
    const url = new URL(database.url);
    url.username = role;
    for (const args of [['charity', 'list'], ['giftaid', 'claims'], ['audit']]) {
      const run = await almoner(url.toString(), args);
      assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
    }
    assert.deepEqual(await queryPostgres(database.url, 'select pid from almoner_instances'), []);
  } finally {
    await database.drop();
    await queryPostgres(database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), `drop role if exists ${role}`).catch(() => {});
  }
});
