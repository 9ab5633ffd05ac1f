// A command on PostgreSQL keeps a row in almoner_instances while it runs (src/store/instances.ts), by
// which a restore refuses while it runs. A command ended early, by a reader that went away (`| head`,
// main.ts's EPIPE handler, which exits at once) or by Ctrl-C or SIGTERM, left its row behind (a review
// of 69a2340): a restore run next was refused for 10 s, told to `stop it or let it finish` a process
// that had gone. Its row now goes before it exits.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { BACKENDS, queryPostgres, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, until } from '../support/cli.js';
import { donationsDueForErasure } from '../support/load.js';

const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');

const sessions = async (database: TestDatabase) =>
  (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'"))[0]!.n;

/** A database with donations due for erasure, enough that `retention apply --dry-run`'s lines fill a pipe no one reads; its pg_dump. */
async function dueDonations(database: TestDatabase): Promise<string> {
  await donationsDueForErasure(database, 1500);
  const dump = join(tempDir(), 'due.dump');
  execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, database.url]);
  return dump;
}

for (const how of ['its reader gone (EPIPE)', 'SIGINT', 'SIGTERM'] as const) {
  test(`PostgreSQL: a command ended early (${how}) takes its row in almoner_instances with it, and a restore run next is not refused for it`, { skip: !POSTGRES && 'needs TEST_DATABASE_URL', timeout: 90_000 }, async () => {
    assertBuilt();
    const database = await POSTGRES!.createDatabase();
    try {
      const dump = await dueDonations(database);
      const child = spawn(BIN, ['retention', 'apply', '--dry-run'], { env: childEnv(database.url), stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      child.stdout.pause();
      await until('the command waits for its reader', 20_000, async () => child.stdout.readableLength > 0, () => stderr);
      assert.equal((await queryPostgres(database.url, 'select what from almoner_instances')).length, 1, 'the command keeps its row while it runs');
      if (how === 'its reader gone (EPIPE)') child.stdout.destroy();
      else child.kill(how);
      const end = await exited;
      // Ended as before: quietly by a reader gone, by the signal itself otherwise.
      assert.deepEqual(end, how === 'its reader gone (EPIPE)' ? { code: 0, signal: null } : { code: null, signal: how }, stderr);
      assert.deepEqual(await queryPostgres(database.url, 'select what, pid from almoner_instances'), [], `its row outlived it (${stderr})`);
      await until('PostgreSQL ends its sessions', 10_000, async () => (await sessions(database)) === 0);
      const restored = await almoner(database.url, ['restore', dump, '--replace']);
      assert.equal(restored.code, 0, restored.stderr);
    } finally {
      await database.drop();
    }
  });
}

// 2a801bc let a command run without its row wherever the database refused it (permission denied), for a user that may only
// read; a user that may write Almoner's tables but was never granted almoner_instances (granted `on all tables` before 0020
// made it) ran `charity create`, `retention apply`, `donor erase` without a row too, unseen by a restore through a pooler.
test('PostgreSQL: a command whose database user may write Almoner\'s tables but not almoner_instances is refused (exit 2, naming the grant), not run unseen by a restore', { skip: !POSTGRES && 'needs TEST_DATABASE_URL', timeout: 60_000 }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const role = `almoner_test_writer_${process.pid}`;
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Owner', '--email', 'owner@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    await queryPostgres(database.url, `create role ${role} login`);
    await queryPostgres(database.url, `grant select, insert, update, delete on all tables in schema public to ${role}`);
    await queryPostgres(database.url, `grant usage on all sequences in schema public to ${role}`);
    await queryPostgres(database.url, `revoke all on almoner_instances from ${role}`);
    const url = new URL(database.url);
    url.username = role;
    const run = await almoner(url.toString(), ['charity', 'create', '--name', 'Unseen', '--email', 'u@example.org', '--json']);
    assert.equal(run.code, 2, `it ran without its row: ${run.stdout}${run.stderr}`);
    assert.match(run.stderr, new RegExp(`grant select, insert, update, delete on almoner_instances to ${role}`));
    assert.deepEqual(await queryPostgres(database.url, "select name from charities where name = 'Unseen'"), []);
  } finally {
    await database.drop();
    await queryPostgres(database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), `drop role if exists ${role}`).catch(() => {});
  }
});
