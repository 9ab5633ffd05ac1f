// deploy/almoner-backup.{service,timer} and deploy/almoner-retention.{service,timer}: systemd
// accepts them, each service runs as the server does (the same user, database and settings file as
// deploy/almoner.service), and each one's command, run as systemd would run it (its %% as %, $$ as $, the
// paths moved to this checkout and a scratch folder), does its job. Not installed: that would change
// the machine the tests run on.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BACKENDS, TEST_DATABASE_URL, tempDir } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { ROOT } from '../support/root.js';

const unit = (name: string) => readFileSync(join(ROOT, 'deploy', name), 'utf8');
/** A unit's settings (comments left out), each key with its values in order. */
function settings(text: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) found.set(m[1]!, [...(found.get(m[1]!) ?? []), m[2]!]);
  }
  return found;
}

const SERVICES = ['almoner-backup.service', 'almoner-retention.service'];

test("the backup and retention services run as the server does: its user, working folder, database and settings file", () => {
  const server = settings(unit('almoner.service'));
  for (const name of SERVICES) {
    const own = settings(unit(name));
    for (const key of ['User', 'Group', 'WorkingDirectory', 'Environment', 'EnvironmentFile', 'StateDirectory', 'UMask', 'ReadWritePaths']) {
      const wanted = key === 'Environment' ? server.get(key)!.filter((e) => e.startsWith('DATABASE_URL=')) : server.get(key);
      assert.deepEqual(own.get(key), wanted, `${name}: ${key}`);
    }
    assert.deepEqual(own.get('Type'), ['oneshot'], name);
  }
});

const noSystemd = spawnSync('systemd-analyze', ['--version']).status === 0 ? false : 'systemd-analyze is not installed here';

test('systemd-analyze verify accepts the four units', { skip: noSystemd }, () => {
  const files = [...SERVICES, 'almoner-backup.timer', 'almoner-retention.timer'].map((f) => join(ROOT, 'deploy', f));
  const run = spawnSync('systemd-analyze', ['verify', ...files], { encoding: 'utf8' });
  // It may say that /usr/bin/node or /opt/almoner is missing on this machine: that is where they are installed, not a fault.
  const faults = run.stderr.split('\n').filter((l) => l.trim() && !/\/usr\/bin\/node|\/opt\/almoner|almoner\.service/.test(l));
  assert.deepEqual(faults, []);
});

test("almoner.service starts once the network is online: a HOST not yet configured is exit 2, which it does not restart", { skip: noSystemd }, () => {
  const server = settings(unit('almoner.service'));
  assert.ok(server.get('RestartPreventExitStatus')?.includes('2'));
  for (const key of ['Wants', 'After']) assert.ok(server.get(key)?.includes('network-online.target'), `${key}=network-online.target`);
  const run = spawnSync('systemd-analyze', ['verify', join(ROOT, 'deploy', 'almoner.service')], { encoding: 'utf8' });
  const faults = run.stderr.split('\n').filter((l) => l.trim() && !/\/usr\/bin\/node|\/opt\/almoner/.test(l));
  assert.deepEqual(faults, []);
});

/** The unit's ExecStartPre and ExecStart lines, as the shell commands systemd would run, here, with `state` for /var/lib/almoner. */
const commands = (name: string, state: string) =>
  [...(settings(unit(name)).get('ExecStartPre') ?? []), ...settings(unit(name)).get('ExecStart')!].map((line) =>
    line.replaceAll('%%', '%').replaceAll('$$', '$').replaceAll('/usr/bin/node', process.execPath).replaceAll('/opt/almoner/', `${ROOT}/`).replaceAll('/var/lib/almoner', state),
  );

test("each service's command, run as systemd runs it, does its job: a checked backup under a new name; a retention run", async () => {
  assertBuilt();
  const state = tempDir();
  const databaseUrl = `sqlite:${join(state, 'almoner.db')}`;
  assert.equal((await almoner(databaseUrl, ['charity', 'create', '--name', 'Timers', '--email', 't@example.org'])).code, 0);
  const env = { ...process.env, DATABASE_URL: databaseUrl };
  for (const command of commands('almoner-backup.service', state)) execFileSync('/bin/sh', ['-c', command], { env, stdio: 'pipe' });
  const backups = readdirSync(join(state, 'backups'));
  assert.equal(backups.length, 1);
  assert.match(backups[0]!, /^almoner-\d{4}-\d\d-\d\dT\d{6}Z\.db$/);
  const [retention] = commands('almoner-retention.service', state);
  const out = execFileSync('/bin/sh', ['-c', retention!], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.match(out, /^0 donations\./);
  const trail = await almoner(databaseUrl, ['audit', '--json']);
  assert.deepEqual(trail.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { action: string }).action), ['charity create', 'backup', 'retention apply']);
});

test("the backup service's command on PostgreSQL names its pg_dump archive .dump, not .db as SQLite's copy", { skip: !TEST_DATABASE_URL && 'PostgreSQL only (TEST_DATABASE_URL)' }, async (t) => {
  assertBuilt();
  const database = await BACKENDS.find((b) => b.name === 'postgres')!.createDatabase();
  t.after(() => database.drop());
  assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Timers', '--email', 't@example.org'])).code, 0);
  const state = tempDir();
  // The URL as the service has it from its environment file (here, the test's own environment).
  const env = { ...process.env, DATABASE_URL: database.url };
  for (const command of commands('almoner-backup.service', state)) execFileSync('/bin/sh', ['-c', command], { env, stdio: 'pipe' });
  const backups = readdirSync(join(state, 'backups'));
  assert.equal(backups.length, 1);
  assert.match(backups[0]!, /^almoner-\d{4}-\d\d-\d\dT\d{6}Z\.dump$/);
  assert.equal(readFileSync(join(state, 'backups', backups[0]!)).toString('latin1', 0, 5), 'PGDMP');
});
