// Charities' credentials are not data to roll back: a restore over the database the backup came from
// carries over each charity's password, old password and its end, and disabled or enabled state, as
// that database holds them, for every charity its trail changed after the backup, and the charities
// signed up since, with their ids. Until 2026-11-30 everything came back as it was at the backup: a
// password rotated since (because it leaked) worked again, a charity disabled since was enabled, and
// one signed up since was gone, its integration answered 401; the restore only named what to do again.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { authenticatedCharity, whichPassword } from '../../src/charities/credentials.js';
import { entryKey, osUser } from '../../src/store/audit.js';
import { openStore, SERVER_SQLITE_BUSY_TIMEOUT_MS } from '../../src/store/open.js';
import { basic, HONOURED_WITHIN_MS, NO_FAILURE_DELAY } from '../support/app.js';
import { BACKENDS, rawSql, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, killedBySignal, killing, operator, type Run } from '../support/cli.js';
import { TestClock } from '../support/clock.js';
import { ServerProcess } from '../support/server.js';

interface Charity {
  id: number;
  name: string;
  username: string;
  password: string;
}

interface Entry {
  id: number;
  at: string;
  action: string;
  target: string;
  summary: Record<string, unknown>;
}

/** The operator's commands on `database` (operator's), with a charity's rotation, the trail and the charities. */
function operatorOf(database: TestDatabase, backend: string) {
  const { cli, charity, backup } = operator(database, backend);
  return {
    cli,
    backup,
    create: charity,
    /** The new password. */
    rotate: async (c: Charity, ...options: string[]) => (JSON.parse((await cli(['charity', 'rotate', c.username, '--json', ...options])).stdout) as { password: string }).password,
    trail: async () => (await cli(['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Entry),
    list: async () => JSON.parse((await cli(['charity', 'list', '--json'])).stdout) as Array<{ id: number; name: string; username: string; active: boolean; old_password_until: string | null }>,
  };
}

const CHARITY_CHANGES = new Set(['charity create', 'charity rotate', 'charity end-grace', 'charity disable', 'charity enable']);

for (const backend of BACKENDS) {
  describe(`a restore carries charities' credentials over [${backend.name}]`, () => {
    test('over the database the backup came from: passwords rotated since (twice, with a grace running, ended or lapsed), charities disabled or enabled since, and one signed up since are as that database held them; audited once, and the same backup restored again carries them again', async () => {
      assertBuilt();
      const database = await backend.createDatabase();
      try {
        const { cli, create, rotate, trail, list, backup } = operatorOf(database, backend.name);
        const made: Charity[] = [];
        for (const name of ['Twice', 'Grace', 'Ended', 'Lapsed', 'Disabled', 'Back', 'Flicker', 'Still']) made.push(await create(name));
        const [twice, grace, ended, lapsed, disabled, back, flicker, still] = made as [Charity, Charity, Charity, Charity, Charity, Charity, Charity, Charity];
        await cli(['charity', 'disable', back.username]);
        const before = await backup('before');
        const atBackup = (await trail()).length;

        // After the backup.
        const twice1 = await rotate(twice);
        const twice2 = await rotate(twice);
        const grace1 = await rotate(grace, '--grace', '7d'); // its grace runs on
        const ended1 = await rotate(ended, '--grace', '7d');
        await cli(['charity', 'end-grace', ended.username]);
        const lapsed1 = await rotate(lapsed, '--grace', '30m');
        await rawSql(database.url, `update charities set old_password_until = '2026-01-01T00:00:00.000000Z' where username = '${lapsed.username}'`); // its 30 minutes gone by
        await cli(['charity', 'disable', disabled.username]);
        await cli(['charity', 'enable', back.username]);
        await cli(['charity', 'disable', flicker.username]);
        await cli(['charity', 'enable', flicker.username]);
        const since = await create('Since');
        const originals = (await trail()).slice(atBackup).filter((e) => CHARITY_CHANGES.has(e.action));
        assert.equal(originals.length, 11);
        const listed = await list();

        const restored = await cli(['restore', before, '--replace']);
        assert.match(restored.stdout, /carried over the charities' credentials the replaced database changed after the backup, as it holds them \(password, old password and its end, disabled or enabled\):\n/);
        for (const [c, did] of [
          [twice, 'rotate, rotate'],
          [grace, 'rotate'],
          [ended, 'rotate, end-grace'],
          [lapsed, 'rotate'],
          [disabled, 'disable'],
          [back, 'enable'],
          [flicker, 'disable, enable'],
        ] as const) {
          assert.match(restored.stdout, new RegExp(`\\n  ${c.username}: ${did}\\n`), restored.stdout);
        }
        assert.match(restored.stdout, new RegExp(`\\n  ${since.username}: create \\(signed up since: added, id ${since.id}\\)`));
        // Who made them, as the replaced trail says: a staging copy's changes would name its machine (README, Backups).
        const author = `${osUser()}@${hostname()}`.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        assert.match(restored.stdout, new RegExp(`\\n  \\(made by ${author}, as that database's audit trail records; one made on another machine, such as a staging copy of this database, is not this service's: rotate or disable that charity again\\)\\n`));
        assert.doesNotMatch(restored.stdout, new RegExp(`${still.username}|not carried over|Do each again|rotate or disable again`));
        // The charities as the replaced database held them: the one signed up since with its id, username and name.
        assert.deepEqual(await list(), listed);

        const server = await new ServerProcess(database.url).listening();
        try {
          const me = async (c: Charity, password = c.password) =>
            (await fetch(`${server.url}/api/v1/me`, { method: 'POST', headers: { authorization: basic(c.username, password) } })).status;
          const answers = {
            twice: [await me(twice), await me(twice, twice1), await me(twice, twice2)],
            grace: [await me(grace), await me(grace, grace1)],
            ended: [await me(ended), await me(ended, ended1)],
            lapsed: [await me(lapsed), await me(lapsed, lapsed1)],
            disabled: await me(disabled),
            back: await me(back),
            flicker: await me(flicker),
            since: await me(since),
            still: await me(still),
          };
          assert.deepEqual(answers, {
            twice: [401, 401, 200], // the backup's password and the first rotation's do not work again
            grace: [200, 200], // the old password in its grace, and the new
            ended: [401, 200],
            lapsed: [401, 200],
            disabled: 401,
            back: 200,
            flicker: 200,
            since: 200, // its integration keeps the credentials it was given
            still: 200, // unchanged since the backup: the backup's row
          });
        } finally {
          await server.stop('SIGTERM', 10_000);
        }

        // Each change carried over recorded again, naming the entry it repeats; none of the unchanged charity's.
        const carriedEntries = (await trail()).filter((e) => typeof e.summary.again_of === 'string');
        assert.deepEqual(carriedEntries.map((e) => [e.action, e.target, e.summary.again_of]), originals.map((e) => [e.action, e.target, entryKey(e)]));
        assert.equal(carriedEntries.find((e) => e.action === 'charity create')?.summary.id, since.id);

        // The same backup restored again, over the database the first restore made: carried over again, from the repeats, each naming the first entry.
        const again = await cli(['restore', before, '--replace']);
        assert.match(again.stdout, new RegExp(`\\n  ${twice.username}: rotate, rotate\\n`));
        assert.match(again.stdout, new RegExp(`\\n  ${since.username}: create \\(signed up since: added, id ${since.id}\\)`));
        assert.deepEqual(await list(), listed);
        assert.deepEqual(
          (await trail()).filter((e) => typeof e.summary.again_of === 'string').map((e) => e.summary.again_of),
          originals.map(entryKey),
          'once each in the restored trail, naming the first entries',
        );
        // Finished: keep-replaced given the database the restore replaced finds nothing left to carry.
        if (backend.name === 'sqlite') {
          const path = database.location.dialect === 'sqlite' ? database.location.path : '';
          const replaced = readdirSync(dirname(path)).filter((f) => /\.replaced-[^.]+$/.test(f)).sort().at(-1)!;
          const nothing = await cli(['keep-replaced', '--not-running', join(dirname(path), replaced)]);
          assert.match(nothing.stdout, /^nothing to do: /);
        }

        // A sign-up takes an id after the one carried over.
        assert.ok((await create('Next')).id > since.id);

        // Over a database of another history: nothing is carried over, and the restore says what to do again, as before.
        const other = await backend.createDatabase();
        try {
          await almoner(other.url, ['charity', 'create', '--name', 'Other', '--email', 'o@example.org']);
          const over = await almoner(other.url, ['restore', before, '--replace']);
          assert.equal(over.code, 0, over.stderr);
          assert.match(over.stdout, /as they were at the backup: rotate or disable again whatever was rotated or disabled since/);
          assert.doesNotMatch(over.stdout, /carried over/);
        } finally {
          await other.drop();
        }
      } finally {
        await database.drop();
      }
    });

    test('restored into another database, the one it came from at hand: keep-replaced carries the credentials over into the running server, but for a charity changed here since (that stands) and one whose id a sign-up here took (said, to do again)', async () => {
      assertBuilt();
      const [old, fresh] = [await backend.createDatabase(), await backend.createDatabase()];
      try {
        const { cli, create, rotate, backup } = operatorOf(old, backend.name);
        const here = operatorOf(fresh, backend.name);
        const [leaked, stopped, both] = [await create('Leaked'), await create('Stopped'), await create('Both')];
        const b = await backup('before');
        const leaked1 = await rotate(leaked);
        await cli(['charity', 'disable', stopped.username]);
        const bothThere = await rotate(both);
        const [taken, added] = [await create('Taken'), await create('Added')];

        const restored = await here.cli(['restore', b]);
        assert.match(restored.stdout, /as they were at the backup: rotate or disable again/, 'no database replaced: what to do, as before');
        // Added, signed up since, is not in the restored database: said, with the command that brings it back (until 2026-11-30 it went unmentioned).
        assert.match(restored.stdout, /and sign up again a charity signed up since, which is not in it \(bin\/almoner charity create\); or, with the database the backup came from at hand, bin\/almoner keep-replaced --not-running THAT-DATABASE carries them over, sign-ups included\.\n/);
        // The server on the restored database, with its own clock: credentials it has used are remembered.
        const served = await openStore(fresh.location, { sqliteBusyTimeoutMs: SERVER_SQLITE_BUSY_TIMEOUT_MS });
        const clock = new TestClock();
        const app = await buildApp({ store: served, clock: clock.now, failureDelay: NO_FAILURE_DELAY });
        try {
          await app.ready();
          const me = async (c: Charity, password = c.password) => (await app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: basic(c.username, password) } })).statusCode;
          assert.deepEqual([await me(leaked), await me(stopped)], [200, 200], 'as at the backup, and now remembered');
          // Here, since the restore: Both rotated again, and a sign-up that takes the id Taken had.
          const bothHere = await here.rotate(both);
          const newcomer = await here.create('Newcomer');
          assert.equal(newcomer.id, taken.id);

          const kept = await here.cli(['keep-replaced', '--not-running', old.location.dialect === 'sqlite' ? old.location.path : old.url]);
          assert.match(kept.stdout, new RegExp(`carried over the charities' credentials .*:\\n  ${leaked.username}: rotate\\n  ${stopped.username}: disable\\n  ${added.username}: create \\(signed up since: added, id ${added.id}\\)\\n`));
          assert.match(kept.stdout, new RegExp(`not carried over, .*\\n  ${both.username} \\(rotate\\): this database changed it since the restore, and that stands`));
          assert.match(kept.stdout, new RegExp(`\\n  ${taken.username} \\(create\\): its id is charity ${newcomer.username}'s here; sign it up again \\(bin/almoner charity create\\) and give it its new credentials`));

          // What works now works at once; what stops, within the time a remembered credential is kept, as after a disable.
          assert.deepEqual([await me(leaked, leaked1), await me(added), await me(both, bothHere), await me(newcomer)], [200, 200, 200, 200]);
          clock.advance(HONOURED_WITHIN_MS);
          assert.deepEqual([await me(leaked), await me(stopped), await me(both, bothThere), await me(taken)], [401, 401, 401, 401]);

          // Run again: nothing more carried over; what was left out is said again.
          const again = await here.cli(['keep-replaced', '--not-running', old.location.dialect === 'sqlite' ? old.location.path : old.url]);
          assert.doesNotMatch(again.stdout, /carried over the charities'/);
          assert.match(again.stdout, new RegExp(`not carried over, .*\\n  ${both.username} \\(rotate\\)`));
          assert.equal((await here.trail()).filter((e) => typeof e.summary.again_of === 'string').length, 3, 'rotate, disable, create: recorded once');
          assert.ok((await here.create('Later')).id > added.id, 'ids go on after the one carried over');
        } finally {
          await app.close();
          await served.close();
        }
      } finally {
        await old.drop();
        await fresh.drop();
      }
    });
  });
}

test('a PostgreSQL restore killed once pg_restore had committed: keep-replaced carries the credentials over from the file the restore left [postgres]', { skip: BACKENDS.length < 2 && 'no TEST_DATABASE_URL' }, async () => {
  assertBuilt();
  const backend = BACKENDS[1]!;
  const database = await backend.createDatabase();
  try {
    const { cli, create, rotate, list, backup } = operatorOf(database, backend.name);
    const first = await create('First');
    const before = await backup('before');
    const rotated = await rotate(first);
    const since = await create('Since');
    const killed = await killedBySignal(almoner(database.url, ['restore', before, '--replace'], { PATH: killing('pg_restore', 'after') }));
    assert.equal(killed.signal, 'SIGKILL');
    const finished = await cli(['keep-replaced']);
    assert.match(finished.stdout, new RegExp(`carried over the charities' credentials .*:\\n  ${first.username}: rotate\\n  ${since.username}: create \\(signed up since: added, id ${since.id}\\)\\n`));
    assert.match(finished.stdout, /the restore begun at \S+ is finished/);
    const charities = await list();
    assert.deepEqual(charities.map((c) => [c.id, c.username]), [[first.id, first.username], [since.id, since.username]]);
    const store = await openStore(database.location);
    try {
      const works = async (c: Charity, password = c.password) => authenticatedCharity(await store.findCredential(c.username), password) !== undefined;
      assert.deepEqual([await works(first), await works(first, rotated), await works(since)], [false, true, true]);
    } finally {
      await store.close();
    }
  } finally {
    await database.drop();
  }
});

/** Whether this process may run a command under another host name (a UTS namespace of its own: root, as here and in CI). */
const canRename = spawnSync('unshare', ['--uts', 'hostname', 'staging-1']).status === 0;

/** bin/almoner on `database`, run as on another machine: `host` as its host name, in a UTS namespace of its own (as root). */
function almonerOn(host: string, database: TestDatabase, args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile('unshare', ['--uts', 'sh', '-c', 'hostname "$0" && exec "$@"', host, BIN, ...args], { env: childEnv(database.url), timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/** `work` on two databases of `backend`: `old`, whose backups are restored, and `fresh`, restored into; both dropped after. */
async function withTwo(backend: (typeof BACKENDS)[number], work: (old: TestDatabase, fresh: TestDatabase) => Promise<void>): Promise<void> {
  const [old, fresh] = [await backend.createDatabase(), await backend.createDatabase()];
  try {
    await work(old, fresh);
  } finally {
    await old.drop();
    await fresh.drop();
  }
}

/** On `database` now, for each check: whether the charity is enabled, and whether the password given is one of its own (or its old one, in its grace). */
async function credentialsOn(database: TestDatabase, checks: Record<string, [Charity, string]>): Promise<Record<string, { active: boolean; matches: boolean }>> {
  const store = await openStore(database.location);
  try {
    const found: Record<string, { active: boolean; matches: boolean }> = {};
    for (const [name, [c, password]] of Object.entries(checks)) {
      const row = (await store.findCredential(c.username))!;
      found[name] = { active: row.active, matches: whichPassword(row, password) !== undefined };
    }
    return found;
  } finally {
    await store.close();
  }
}

for (const backend of BACKENDS) {
  describe(`a restore carries of each charity what the changes there set [${backend.name}]`, () => {
    test("over a database whose history parted from the backup's at an earlier restore: a charity the backup holds disabled is not enabled by a rotation there, and a password the backup rotated away does not come back with a disable there", async () => {
      assertBuilt();
      await withTwo(backend, async (old, fresh) => {
        const { cli, create, rotate, backup } = operatorOf(old, backend.name);
        const here = operatorOf(fresh, backend.name);
        const [stopped, leaked] = [await create('Stopped'), await create('Leaked')];
        const first = await backup('first');
        // After the first backup: Stopped disabled, Leaked's password rotated (it leaked); then the backup that holds both.
        await cli(['charity', 'disable', stopped.username]);
        const leaked1 = await rotate(leaked);
        const second = await backup('second');

        // The wrong (older) backup restored first, into a new database, which then goes on: a rotation of Stopped, a disable of Leaked.
        await here.cli(['restore', first]);
        const stopped2 = await here.rotate(stopped);
        await here.cli(['charity', 'disable', leaked.username]);
        // Then the right one over it.
        const restored = await here.cli(['restore', second, '--replace']);
        assert.match(restored.stdout, new RegExp(`\\n  ${stopped.username}: rotate\\n  ${leaked.username}: disable\\n`), restored.stdout);

        assert.deepEqual(
          await credentialsOn(fresh, { stopped: [stopped, stopped2], leaked: [leaked, leaked.password], leaked1: [leaked, leaked1] }),
          { stopped: { active: false, matches: true }, leaked: { active: false, matches: false }, leaked1: { active: false, matches: true } },
          'Stopped stays disabled (with the password rotated there); Leaked disabled as there, and the password it had before its rotation is not its own again',
        );
      });
    });

    test("over a database whose history parted from the backup's: a rotation there with a grace does not carry over as its old password one the backup had rotated away", async () => {
      assertBuilt();
      await withTwo(backend, async (old, fresh) => {
        const { create, rotate, backup } = operatorOf(old, backend.name);
        const here = operatorOf(fresh, backend.name);
        const [leaked, graced] = [await create('Leaked'), await create('Graced')];
        const graced0 = await rotate(graced, '--grace', '7d'); // the backup holds a grace running: its old password is the backup's too
        const first = await backup('first');
        const leaked1 = await rotate(leaked); // it leaked
        const second = await backup('second');

        // The older backup restored first, into a new database, where Leaked is rotated with a grace (its old password the leaked one), and Graced too.
        await here.cli(['restore', first]);
        const leakedHere = await here.rotate(leaked, '--grace', '7d');
        const gracedHere = await here.rotate(graced, '--grace', '7d');
        // Then the right one over it.
        const restored = await here.cli(['restore', second, '--replace']);
        assert.match(restored.stdout, new RegExp(`\\n  ${leaked.username}: rotate \\(its old password is not carried over: the backup's history had rotated it away\\)\\n  ${graced.username}: rotate\\n`), restored.stdout);

        const yes = { active: true, matches: true };
        const no = { active: true, matches: false };
        assert.deepEqual(
          await credentialsOn(fresh, { leaked: [leaked, leaked.password], leaked1: [leaked, leaked1], leakedHere: [leaked, leakedHere], graced0: [graced, graced0], gracedHere: [graced, gracedHere] }),
          { leaked: no, leaked1: no, leakedHere: yes, graced0: yes, gracedHere: yes },
          "the leaked password rotated away in the backup's history does not work again; the new one does, and so does an old one in its grace that the backup's history had not rotated away",
        );
        // The carried rotations as recorded: Leaked's grace went with its old password (until 2026-11-30 its entry still named the grace's end), Graced's did not.
        const carried = (await here.trail()).filter((e) => e.action === 'charity rotate' && typeof e.summary.again_of === 'string');
        const of = (c: Charity) => carried.find((e) => e.target === c.username)?.summary;
        assert.deepEqual([of(leaked)?.old_password_until, of(leaked)?.old_password], [null, "not carried over: the backup's history had rotated it away"]);
        assert.equal(typeof of(graced)?.old_password_until, 'string');
        assert.equal(of(graced)?.old_password, undefined);
      });
    });

    test("a staging copy restored over production by mistake, then the right backup: each charity's line names who made its changes, the staging machine's apart", { skip: !canRename && 'cannot set a host name here (not root)' }, async () => {
      assertBuilt();
      await withTwo(backend, async (production, staging) => {
        const { cli, create, rotate, backup } = operatorOf(production, backend.name);
        const [here, there] = [await create('Here'), await create('There')];
        const right = await backup('right');
        const here1 = await rotate(here); // on production, after the backup
        // Staging: the backup restored into a database of its own on another machine, a charity's password rotated there.
        const onStaging = async (args: string[]) => {
          const run = await almonerOn('staging-1', staging, args);
          assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
          return run;
        };
        await onStaging(['restore', right]);
        const there1 = (JSON.parse((await onStaging(['charity', 'rotate', there.username, '--json'])).stdout) as { password: string }).password;
        const wrong = await operatorOf(staging, backend.name).backup('staging');

        await cli(['restore', wrong, '--replace']); // by mistake
        const restored = await cli(['restore', right, '--replace']);
        const us = `${osUser()}@${hostname()}`;
        const them = `${osUser()}@staging-1`;
        assert.ok(
          restored.stdout.includes(`\n  ${there.username}: rotate (made by ${them})\n  ${here.username}: rotate (made by ${us})\n  (made by ${them}, ${us}, each charity's as its line says, as that database's audit trail records; `),
          restored.stdout,
        );
        assert.deepEqual(await credentialsOn(production, { here: [here, here1], there: [there, there1] }), { here: { active: true, matches: true }, there: { active: true, matches: true } });
      });
    });

    test('keep-replaced, of a charity changed here since the restore, carries what that change did not set: a disable there over a rotation here, and a rotation there over a disable here', async () => {
      assertBuilt();
      await withTwo(backend, async (old, fresh) => {
        const { cli, create, rotate, backup } = operatorOf(old, backend.name);
        const here = operatorOf(fresh, backend.name);
        const [stopped, moved] = [await create('Stopped'), await create('Moved')];
        const b = await backup('before');
        await cli(['charity', 'disable', stopped.username]);
        const stoppedThere = await rotate(stopped);
        const moved1 = await rotate(moved);

        await here.cli(['restore', b]);
        // Here, since the restore, by hand: Stopped's password rotated (it was said to be rotated again), Moved disabled.
        const stoppedHere = await here.rotate(stopped);
        await here.cli(['charity', 'disable', moved.username]);
        const keep = () => here.cli(['keep-replaced', '--not-running', old.location.dialect === 'sqlite' ? old.location.path : old.url]);
        const kept = await keep();
        assert.match(kept.stdout, new RegExp(`:\\n  ${stopped.username}: disable\\n  ${moved.username}: rotate\\n`), kept.stdout);
        assert.match(kept.stdout, new RegExp(`not carried over, .*\\n  ${stopped.username} \\(rotate\\): this database changed it since the restore, and that stands\\n`));

        assert.deepEqual(
          await credentialsOn(fresh, { stoppedHere: [stopped, stoppedHere], stoppedThere: [stopped, stoppedThere], moved: [moved, moved.password], moved1: [moved, moved1] }),
          { stoppedHere: { active: false, matches: true }, stoppedThere: { active: false, matches: false }, moved: { active: false, matches: false }, moved1: { active: false, matches: true } },
          'Stopped disabled as there, with the password rotated here; Moved disabled as here, with the password rotated there',
        );
        // Run again: the rotation of Stopped there is said again, and nothing more is carried.
        const again = await keep();
        assert.doesNotMatch(again.stdout, /carried over the charities'/);
        assert.match(again.stdout, new RegExp(`\\n  ${stopped.username} \\(rotate\\): this database changed it since the restore`));
      });
    });
  });
}
