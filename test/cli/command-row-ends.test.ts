// A command on PostgreSQL keeps a row in almoner_instances while it runs (src/store/instances.ts), by
// which a restore refuses while it runs. A command ended early, by a reader that went away (`| head`,
// main.ts's EPIPE handler, which exits at once) or by Ctrl-C or SIGTERM, left its row behind (a review
// of 69a2340): a restore run next was refused for 10 s, told to `stop it or let it finish` a process
// that had gone. Its row now goes before it exits.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { signUpCharity } from '../../src/charities/signup.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import { exampleDonation } from '../support/app.js';
import { BACKENDS, queryPostgres, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, until } from '../support/cli.js';

const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');

const sessions = async (database: TestDatabase) =>
  (await queryPostgres<{ n: number }>(database.url, "select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'"))[0]!.n;

/** A database with donations due for erasure, enough that `retention apply --dry-run`'s lines fill a pipe no one reads; its pg_dump. */
async function dueDonations(database: TestDatabase): Promise<string> {
  const store = await openStore(database.location);
  try {
    const { charity } = await signUpCharity(store, { name: 'Old', email: 'o@example.org' });
    const valid = validateDonation(exampleDonation({ gift_aid: 'no', donation_date: '15-03-2015' }));
    assert.ok(valid.ok);
    for (let i = 0; i < 1500; i += 100) await Promise.all(Array.from({ length: 100 }, () => store.recordDonation(charity.id, valid.donation)));
  } finally {
    await store.close();
  }
  await queryPostgres(database.url, 'update donations set recorded_at = donation_date');
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
