// A restore's mark (src/store/restoring.ts), from a review of it (2026-11-28): keep-replaced must not
// take the mark of a restore still at work; a dump taken while a database was marked must not bring
// that mark back; a restore stopped before anything was in place, a mark that cannot be read, a claim
// ledger without its trail, and a backup of a marked database each have their answer.
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, readlinkSync, renameSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { basic, recordGiftAided } from '../support/app.js';
import { BACKENDS, holdExclusively, queryPostgres, SQLITE, tempDir } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, startAlmoner, until } from '../support/cli.js';
import { create, variedDonation } from '../support/load.js';
import { ServerProcess } from '../support/server.js';

const POSTGRES = BACKENDS.find((b) => b.name === 'postgres');


test('SQLite: keep-replaced refuses while the restore runs; a restore killed before its swap leaves the database as it was, and keep-replaced says so and lifts the mark', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Held', '--email', 'h@example.org'])).code, 0);
    const backup = join(tempDir(), 'b.db');
    assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    const held = holdExclusively(backup);
    const restore = startAlmoner(database.url, ['restore', backup, '--replace']);
    try {
      await until('the restore marks the database', 4000, () => existsSync(`${path}.restoring`));
      const early = await almoner(database.url, ['keep-replaced']);
      assert.equal(early.code, 2, early.stderr);
      assert.match(early.stderr, /the restore begun at \S+ may still be running \(process \d+ on .*\): wait for it/);
      // --not-running is for a restore this machine cannot see, not one it sees running (it took its mark, and said the database could be used).
      const forced = await almoner(database.url, ['keep-replaced', '--not-running']);
      assert.equal(forced.code, 2, forced.stderr);
      assert.match(forced.stderr, /may still be running \(process \d+ on .*\): wait for it$/m);
      // A backup of a database being restored is refused: it would copy whatever is there half-way.
      const copy = await almoner(database.url, ['backup', '--out', join(tempDir(), 'during.db')]);
      assert.equal(copy.code, 2, copy.stderr);
      assert.match(copy.stderr, /a restore of this database began at/);
      process.kill(restore.pid, 'SIGKILL');
      await restore.done.catch(() => {});
    } finally {
      held.release();
    }
    // Killed before its swap: marked, so refused, until keep-replaced finds nothing was replaced.
    assert.equal((await almoner(database.url, ['charity', 'list'])).code, 2);
    const finished = await almoner(database.url, ['keep-replaced']);
    assert.equal(finished.code, 0, finished.stderr);
    assert.match(finished.stdout, /stopped before it replaced anything: the database is as it was: .* may be used again/);
    assert.equal((await almoner(database.url, ['charity', 'list'])).code, 0);

    // Killed between moving the database aside and putting the backup in its place (its two renames): the
    // database goes back. (Left as it was, keep-replaced said there was none, and a restore of the backup lost what it held.)
    const heldMid = holdExclusively(backup);
    const mid = startAlmoner(database.url, ['restore', backup, '--replace']);
    try {
      await until('the restore marks the database', 4000, () => existsSync(`${path}.restoring`));
      process.kill(mid.pid, 'SIGKILL');
      await mid.done.catch(() => {});
    } finally {
      heldMid.release();
    }
    const { left } = JSON.parse(readFileSync(`${path}.restoring`, 'utf8')) as { left: string[] };
    renameSync(path, left[0]!);
    const back = await almoner(database.url, ['keep-replaced']);
    assert.equal(back.code, 0, back.stderr);
    assert.match(back.stdout, /stopped in the middle of putting its backup in place: the database that was there is back, as it was/);
    assert.match((await almoner(database.url, ['charity', 'list'])).stdout, /Held/);

    // Into a new file, killed before its swap: there is no database yet, and the mark goes.
    const fresh = `sqlite:${join(tempDir(), 'new.db')}`;
    const heldAgain = holdExclusively(backup);
    const into = startAlmoner(fresh, ['restore', backup]);
    try {
      await until('the restore marks the new database', 4000, () => existsSync(`${fresh.slice('sqlite:'.length)}.restoring`));
      process.kill(into.pid, 'SIGKILL');
      await into.done.catch(() => {});
    } finally {
      heldAgain.release();
    }
    const none = await almoner(fresh, ['keep-replaced']);
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /stopped before its backup was in place; there is no database yet \(restore it again\)/);
    assert.equal((await almoner(fresh, ['restore', backup])).code, 0, 'restored again');

    // A mark that cannot be read (cut short): refused, naming it, exit 2 (it was exit 1, "Unexpected end of JSON input").
    writeFileSync(`${path}.restoring`, '');
    const cut = await almoner(database.url, ['serve'], { PORT: '0' });
    assert.equal(cut.code, 2, cut.stderr);
    assert.match(cut.stderr, /a restore has marked this database \(.*almoner\.db\.restoring\), but the mark cannot be read/);
  } finally {
    await database.drop();
  }
});

test('keep-replaced refuses a claim ledger given without its trail: alone, nothing tells it is this database\'s', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Ledger', '--email', 'l@example.org'])).code, 0);
    const ledger = join(tempDir(), 'x.dump.replaced-claims-2026-11-28T00-00-00-000Z.json');
    writeFileSync(ledger, JSON.stringify({ claims: [], rows: [], withoutDonation: [] }));
    const run = await almoner(database.url, ['keep-replaced', ledger]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /is a claim ledger without its audit trail: give the trail the same restore left too/);
    // An empty trail (a replaced database whose trail was empty) is a trail.
    const trail = join(tempDir(), 'x.dump.replaced-trail-2026-11-28T00-00-00-000Z.jsonl');
    writeFileSync(trail, '');
    const both = await almoner(database.url, ['keep-replaced', trail, ledger]);
    assert.equal(both.code, 0, both.stderr);
    assert.match(both.stdout, /^nothing to do/);
  } finally {
    await database.drop();
  }
});

/**
 * A pg_restore in front of the real one (first on `PATH`): it waits for the file `go` before
 * restoring (saying so with `go`.waiting), then is killed with its restore if `go`.kill is there.
 */
function heldPgRestore(): { go: string; PATH: string } {
  const shim = tempDir();
  const go = join(shim, 'go');
  const real = execFileSync('sh', ['-c', 'command -v pg_restore'], { encoding: 'utf8' }).trim();
  writeFileSync(
    join(shim, 'pg_restore'),
    `#!/bin/sh\ncase " $* " in *" --single-transaction "*) touch "${go}.waiting"; while [ ! -e "${go}" ]; do sleep 0.05; done;; esac\n"${real}" "$@"; code=$?\n` +
      `case " $* " in *" --single-transaction "*) [ $code -eq 0 ] && [ -e "${go}.kill" ] && kill -9 $PPID;; esac\nexit $code\n`,
    { mode: 0o755 },
  );
  return { go, PATH: `${shim}:${process.env.PATH}` };
}

test('PostgreSQL: keep-replaced refuses while a restore runs; a dump taken while the database was marked does not bring the mark back; a restore into an empty database, killed, is finished with what it would have said', { skip: !POSTGRES && 'needs TEST_DATABASE_URL' }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  const empty = await POSTGRES!.createDatabase();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Marked', '--email', 'm@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const { id, username } = JSON.parse(made.stdout) as { id: number; username: string };
    await recordGiftAided(database.url, id, [{ donor_email: 'one@example.org' }]);
    const dump = join(tempDir(), 'first.dump');
    execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, database.url]);

    const { go, PATH } = heldPgRestore();
    const marked = async (url: string) => (await queryPostgres<{ t: string | null }>(url, "select to_regclass('almoner_restoring') as t"))[0]?.t != null;

    const restore = startAlmoner(database.url, ['restore', dump, '--replace'], { PATH });
    // Not by looking at the database: a session of the test's own, there as the restore counts them, made it refuse.
    await until('the restore reaches pg_restore', 20_000, () => existsSync(`${go}.waiting`));
    const early = await almoner(database.url, ['keep-replaced']);
    assert.equal(early.code, 2, early.stderr);
    assert.match(early.stderr, /a restore of this database, or a keep-replaced, is running: wait for it/);
    writeFileSync(go, '');
    const done = await restore.done;
    assert.equal(done.code, 0, done.stderr);
    assert.equal(await marked(database.url), false);

    // Killed after pg_restore, then dumped while marked: that dump holds the mark.
    writeFileSync(`${go}.kill`, '');
    await almoner(database.url, ['restore', dump, '--replace'], { PATH }).then(
      (run) => assert.fail(`not killed: ${run.stderr}`),
      () => {},
    );
    const markedDump = join(tempDir(), 'marked.dump');
    execFileSync('pg_dump', ['--format=custom', `--file=${markedDump}`, database.url]);
    assert.match(execFileSync('pg_restore', ['--list', markedDump], { encoding: 'utf8' }), /TABLE DATA public almoner_restoring/);
    assert.equal((await almoner(database.url, ['keep-replaced'])).code, 0);
    // That dump restored, and killed after pg_restore: the mark is this restore's, naming its files (the dump's
    // old mark had taken its place, and keep-replaced read the old files, never this restore's claims).
    await almoner(database.url, ['restore', markedDump, '--replace'], { PATH }).then(
      (run) => assert.fail(`not killed: ${run.stderr}`),
      () => {},
    );
    const [mark] = await queryPostgres<{ what: string }>(database.url, 'select what from almoner_restoring');
    const what = JSON.parse(mark!.what) as { from: string; left: string[] };
    assert.equal(what.from, markedDump);
    assert.ok(what.left.length > 0 && what.left.every((f) => f.startsWith(`${markedDump}.replaced-`)), JSON.stringify(what));
    const finishedMarked = await almoner(database.url, ['keep-replaced']);
    assert.equal(finishedMarked.code, 0, finishedMarked.stderr);
    assert.equal(await marked(database.url), false, 'no mark once finished');
    assert.equal((await almoner(database.url, ['giftaid', 'claims', '--json'])).code, 0);

    // Into an empty database, killed after pg_restore: keep-replaced says what the restore would have.
    await almoner(empty.url, ['restore', dump], { PATH }).then(
      (run) => assert.fail(`not killed: ${run.stderr}`),
      () => {},
    );
    assert.equal((await almoner(empty.url, ['giftaid', 'claims'])).code, 2, 'marked');
    const finished = await almoner(empty.url, ['keep-replaced']);
    assert.equal(finished.code, 0, finished.stderr);
    assert.match(finished.stdout, /erasures made since the backup are not in it/);
    assert.match(finished.stdout, /Gift Aid claims prepared or marked since the backup are not in it/);
    assert.match(finished.stdout, /the restore begun at \S+ \(from .*first\.dump\) is finished: .* may be used again/);
    // The claims since the backup are unknown here, as after the restore itself: a claim needs the operator's word (it went through: a review).
    const refused = await almoner(empty.url, ['giftaid', 'claim', '--charity', username, '--out', tempDir(), '--json']);
    assert.equal(refused.code, 2, refused.stdout);
    const claims = await almoner(empty.url, ['giftaid', 'claim', '--charity', username, '--out', tempDir(), '--checked-since-backup', '--json']);
    assert.equal(claims.code, 0, claims.stderr);
  } finally {
    await database.drop();
    await empty.drop();
  }
});

test('PostgreSQL: a running server whose connections were dropped (a restart, a failover) does not serve the database a restore is replacing: 503 until it has finished', { skip: !POSTGRES && 'needs TEST_DATABASE_URL' }, async () => {
  assertBuilt();
  const database = await POSTGRES!.createDatabase();
  // Its row refreshed once a minute: deleted below, it stays gone for the test.
  const server = await new ServerProcess(database.url, { INSTANCE_REFRESH_MS: '60000' }).listening();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Dropped', '--email', 'd@example.org', '--json']);
    assert.equal(made.code, 0, made.stderr);
    const charity = JSON.parse(made.stdout) as { username: string; password: string };
    const authorization = basic(charity.username, charity.password);
    const before = await create(server.url, authorization, variedDonation('before@example.org', 1));
    assert.equal(before.kind === 'answered' && before.status, 200);
    const dump = join(tempDir(), 'dropped.dump');
    execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, database.url]);

    // The server's sessions end (as at a restart of PostgreSQL): a restore sees none of them, but the server's row (instances.ts) says it runs.
    await queryPostgres(database.url, 'select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
    const refused = await almoner(database.url, ['restore', dump, '--replace']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /1 process is running on this database, through a pooler or not \(a server,/);
    // Without its row too (one that could not refresh it for five of its intervals, say), each connection it opens checks for the mark.
    await queryPostgres(database.url, 'delete from almoner_instances');
    const { go, PATH } = heldPgRestore();
    const restore = startAlmoner(database.url, ['restore', dump, '--replace'], { PATH });
    await until('the restore reaches pg_restore', 20_000, () => existsSync(`${go}.waiting`));
    // It had reconnected without a look, and stored this in the database about to be replaced: a 200 for a donation lost.
    const during = await create(server.url, authorization, variedDonation('during@example.org', 2));
    assert.equal(during.kind === 'answered' && during.status, 503, JSON.stringify(during));
    assert.equal((await fetch(`${server.url}/health/ready`)).status, 503);
    writeFileSync(go, '');
    const done = await restore.done;
    assert.equal(done.code, 0, done.stderr);
    const after = await create(server.url, authorization, variedDonation('after@example.org', 3));
    assert.equal(after.kind === 'answered' && after.status, 200, JSON.stringify(after));
    const emails = (await queryPostgres<{ donor_email: string }>(database.url, 'select donor_email from donations order by id')).map((r) => r.donor_email);
    assert.deepEqual(emails, ['before@example.org', 'after@example.org']);
  } finally {
    await server.stop('SIGTERM', 10_000);
    await database.drop();
  }
});

/**
 * keep-replaced on a SQLite database bearing the mark `made()` of a restore that cannot be seen
 * from here: it may still be running, so keep-replaced waits (exit 2, naming `who`) for
 * --not-running, then finds that nothing was replaced.
 */
async function waitsForNotRunning(name: string, made: () => Record<string, unknown>, who: string): Promise<void> {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', name, '--email', 'e@example.org'])).code, 0);
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    writeFileSync(`${path}.restoring`, JSON.stringify({ ...made(), began: '2026-11-29T00:00:00.000Z', from: '/backups/b.db', left: [], replacing: true }));
    const wait = await almoner(database.url, ['keep-replaced']);
    assert.equal(wait.code, 2, wait.stderr);
    assert.match(wait.stderr, new RegExp(`may still be running \\(${who}\\): wait for it, or, if it is not running, add --not-running`));
    const go = await almoner(database.url, ['keep-replaced', '--not-running']);
    assert.equal(go.code, 0, go.stderr);
    assert.match(go.stdout, /stopped before it replaced anything: the database is as it was/);
  } finally {
    await database.drop();
  }
}

test('a mark made on another machine (a database on shared storage) may still be running: keep-replaced waits for --not-running', () =>
  // As another machine's restore writes it: its boot id is always another.
  waitsForNotRunning('Elsewhere', () => ({ host: 'another-machine', pid: 4242, boot: '00000000-0000-0000-0000-000000000000', started: '1' }), 'process 4242 on another-machine'));

test('a mark made in another container on this machine (its host name and boot id, another PID namespace) may still be running: keep-replaced waits for --not-running', () =>
  // Its pid is its namespace's (the first process of a container is 1): here it is another process, or none.
  waitsForNotRunning(
    'Container',
    () => {
      const ours = readlinkSync('/proc/self/ns/pid');
      return { host: hostname(), pid: 1, boot: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), started: '1', pids: ours === 'pid:[1]' ? 'pid:[2]' : 'pid:[1]' };
    },
    'process 1 on .*',
  ));

// strace delays each unlink, as a busy machine may: the window between reading a claim as its process's gone and taking it over.
const STRACE = spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true']).status === 0;

test('two keep-replaced at once, where a killed one left its claim: one is refused (each took the claim over, the second removing the first\'s)', { skip: !STRACE && 'needs strace' }, async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Twice', '--email', 't@example.org'])).code, 0);
    const path = database.location.dialect === 'sqlite' ? database.location.path : '';
    const backup = join(tempDir(), 'b.db');
    assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
    // As a restore killed after its swap, and a keep-replaced of it killed, leave the database.
    const gone = spawnSync('true').pid!;
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const keptAs = `${path}.replaced-2026-11-29T00-00-00-000Z`;
    renameSync(path, keptAs);
    writeFileSync(path, readFileSync(backup));
    const copy = new Database(path); // as the restore's copy is, without the backup's mark (which every command refuses)
    copy.pragma('user_version = 0');
    copy.close();
    const owner = { host: hostname(), pid: gone, boot, started: '1', pids: readlinkSync('/proc/self/ns/pid') };
    writeFileSync(`${path}.restoring`, JSON.stringify({ ...owner, began: '2026-11-29T00:00:00.000Z', from: backup, left: [keptAs], replacing: true }));
    const killed = new Database(`${path}.restoring.keeping`); // an earlier keep-replaced's, killed: its lock went with it
    killed.close();
    // Both held at the database (locked) once past their claim, so that they are at it at once.
    const held = holdExclusively(path);
    const run = () =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const delayed = ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=unlink,unlinkat', '-e', 'inject=unlink,unlinkat:delay_enter=1000000'];
        execFile('strace', [...delayed, BIN, 'keep-replaced'], { env: childEnv(database.url) }, (err, _stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stderr }),
        );
      });
    const both = Promise.all([run(), run()]);
    await new Promise((r) => setTimeout(r, 5000));
    held.release();
    const [a, b] = await both;
    const refused = [a, b].filter((r) => r.code === 2 && /another keep-replaced of .* is running: wait for it/.test(r.stderr));
    assert.equal(refused.length, 1, `${a.code}: ${a.stderr}\n${b.code}: ${b.stderr}`);
  } finally {
    await database.drop();
  }
});

test('two keep-replaced begun together on what a killed restore left: one finishes it, the other is refused or finds nothing left to do (both finished it, recording it twice, in half such rounds until 2026-11-30)', async () => {
  assertBuilt();
  for (let round = 0; round < 4; round++) {
    const database = await SQLITE.createDatabase();
    try {
      assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Twice', '--email', 't@example.org'])).code, 0);
      const path = database.location.dialect === 'sqlite' ? database.location.path : '';
      const backup = join(tempDir(), `b${round}.db`);
      assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
      // As a restore killed after its swap leaves the database: the backup's copy in place (without the backup's mark), the database it replaced beside it, and its mark.
      const keptAs = `${path}.replaced-2026-11-29T00-00-00-000Z`;
      renameSync(path, keptAs);
      writeFileSync(path, readFileSync(backup));
      const copy = new Database(path);
      copy.pragma('user_version = 0');
      copy.close();
      const owner = { host: hostname(), pid: spawnSync('true').pid!, boot: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), started: '1', pids: readlinkSync('/proc/self/ns/pid') };
      writeFileSync(`${path}.restoring`, JSON.stringify({ ...owner, began: '2026-11-29T00:00:00.000Z', from: backup, left: [keptAs], replacing: true }));
      const [a, b] = await Promise.all([almoner(database.url, ['keep-replaced']), almoner(database.url, ['keep-replaced'])]);
      const said = [a, b].map((r) => (/another keep-replaced of .* is running/.test(r.stderr) ? 'refused' : /is finished|may be used again/.test(r.stdout) ? 'finished' : /nothing to do/.test(r.stdout) ? 'nothing' : `${r.code}: ${r.stdout}${r.stderr}`));
      assert.equal(said.filter((x) => x === 'finished').length, 1, `round ${round}: ${said.join(' | ')}`);
      assert.ok(said.every((x) => ['finished', 'refused', 'nothing'].includes(x)), said.join(' | '));
      const trail = (await almoner(database.url, ['audit', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string; summary: Record<string, unknown> });
      assert.equal(trail.filter((e) => e.action === 'restore' && e.summary.finished_by === 'keep-replaced').length, 1, 'the restore finished once');
    } finally {
      await database.drop();
    }
  }
});

test('SQLite: a restore into a new file killed once its backup was in place, finished by keep-replaced given the backup file itself: the claims since the backup stay unknown, and a claim is refused (it took claim 2 again: a review)', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Forked', '--email', 'f@example.org', '--json']);
    const { id, username } = JSON.parse(made.stdout) as { id: number; username: string };
    await recordGiftAided(database.url, id, [{ donor_email: 'one@example.org', donor_first_name: 'One' }]);
    const claim = async (url: string, ...more: string[]) => almoner(url, ['giftaid', 'claim', '--charity', username, '--out', tempDir(), ...more]);
    assert.equal((await claim(database.url)).code, 0);
    const backup = join(tempDir(), 'b0.db');
    assert.equal((await almoner(database.url, ['backup', '--out', backup])).code, 0);
    // Since the backup, in the database it came from: another donation, claimed (claim 2).
    await recordGiftAided(database.url, id, [{ donor_email: 'two@example.org', donor_first_name: 'Two' }]);
    assert.equal((await claim(database.url)).code, 0);

    // Restored into a new file and killed: its mark as it was, and the backup in place, as after its swap.
    const target = join(tempDir(), 'e.db');
    const held = holdExclusively(backup);
    const into = startAlmoner(`sqlite:${target}`, ['restore', backup]);
    let mark: string;
    try {
      await until('the restore marks the new database', 4000, () => existsSync(`${target}.restoring`));
      mark = readFileSync(`${target}.restoring`, 'utf8');
      process.kill(into.pid, 'SIGKILL');
      await into.done.catch(() => {});
    } finally {
      held.release();
    }
    writeFileSync(`${target}.restoring`, mark);
    copyFileSync(backup, target);
    const copy = new Database(target); // as the restore's copy is, without the backup's mark (which every command but a restore's refuses)
    copy.pragma('user_version = 0');
    copy.close();

    const finished = await almoner(`sqlite:${target}`, ['keep-replaced', '--not-running', backup]);
    assert.equal(finished.code, 0, finished.stderr);
    await recordGiftAided(`sqlite:${target}`, id, [{ donor_email: 'two@example.org', donor_first_name: 'Two' }]); // claim 2's donation, sent again
    const refused = await claim(`sqlite:${target}`);
    assert.equal(refused.code, 2, `the backup itself settled nothing: ${refused.stdout}`);
    assert.match(refused.stderr, /without the database it came from/);
  } finally {
    await database.drop();
  }
});

test('SQLite: a newer backup given to keep-replaced for the database the backup came from takes in what it holds, but settles nothing (claim 3, made after it, would have been claimed again: a review); a restored database bears no backup mark', async () => {
  assertBuilt();
  const database = await SQLITE.createDatabase();
  try {
    const made = await almoner(database.url, ['charity', 'create', '--name', 'Newer', '--email', 'n@example.org', '--json']);
    const { id, username } = JSON.parse(made.stdout) as { id: number; username: string };
    const claim = async (url: string, ...more: string[]) => almoner(url, ['giftaid', 'claim', '--charity', username, '--out', tempDir(), ...more]);
    const backups: string[] = [];
    for (const donor of ['one', 'two', 'three']) {
      await recordGiftAided(database.url, id, [{ donor_email: `${donor}@example.org`, donor_first_name: donor }]);
      assert.equal((await claim(database.url)).code, 0);
      const file = join(tempDir(), `${donor}.db`);
      assert.equal((await almoner(database.url, ['backup', '--out', file])).code, 0);
      backups.push(file);
      assert.equal(new Database(file, { readonly: true }).pragma('user_version', { simple: true }), 0x416c6d42, 'a backup bears the mark');
    }
    const target = `sqlite:${join(tempDir(), 'e.db')}`;
    assert.equal((await almoner(target, ['restore', backups[0]!])).code, 0);
    assert.equal(new Database(join(target.slice('sqlite:'.length)), { readonly: true }).pragma('user_version', { simple: true }), 0, 'a restored database bears none');
    assert.equal((await claim(target)).code, 2);
    const kept = await almoner(target, ['keep-replaced', '--not-running', backups[1]!]);
    assert.equal(kept.code, 0, kept.stderr);
    assert.match(kept.stdout, /claim 2 \(prepared\) added/);
    assert.match(kept.stdout, /is a copy bin\/almoner backup wrote, not the database it came from/);
    const refused = await claim(target);
    assert.equal(refused.code, 2, `claims after that backup are not known: ${refused.stdout}`);
    // The database itself settles them.
    const settled = await almoner(target, ['keep-replaced', '--not-running', database.location.dialect === 'sqlite' ? database.location.path : '']);
    assert.equal(settled.code, 0, settled.stderr);
    assert.equal((await claim(target, '--json')).code, 0);
  } finally {
    await database.drop();
  }
});
