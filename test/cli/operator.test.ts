// bin/almoner as an operator meets it from anywhere: it says which database it used, a command
// that only reads never creates an empty SQLite file in the wrong folder, a reader that goes away
// (`| head`) ends a command quietly, a new password is written whole or the operator is told how
// to get another, and --version answers.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { parseDatabaseUrl } from '../../src/config.js';
import { BACKENDS, queryPostgres, tempDir, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, until, type Run } from '../support/cli.js';
import { ServerProcess } from '../support/server.js';
import { ROOT as PROJECT } from '../support/root.js';

const sqlitePath = (url: string) => (parseDatabaseUrl(url) as { path: string }).path;
function rawSqlite(url: string, statement: string): void {
  const db = new BetterSqlite3(sqlitePath(url));
  db.exec(statement);
  db.close();
}
function rawSqliteTables(url: string): string {
  const db = new BetterSqlite3(sqlitePath(url), { readonly: true });
  const names = (db.prepare("select name from sqlite_master where type = 'table' order by name").all() as Array<{ name: string }>).map((r) => r.name).join(' ');
  db.close();
  return names;
}

/** Runs bin/almoner with its standard output closed before it writes anything, as `| true` does. */
function withClosedOutput(databaseUrl: string, args: string[], { toNowhere = false } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    // toNowhere: standard output is /dev/null from the start (as `>/dev/null` or `>&-`, which Node makes /dev/null); else a pipe closed at once.
    const child = spawn(BIN, args, { env: childEnv(databaseUrl), stdio: ['ignore', toNowhere ? 'ignore' : 'pipe', 'pipe'] });
    child.stdout?.destroy();
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: '', stderr }));
  });
}

describe('bin/almoner from anywhere', { concurrency: true }, () => {
  before(assertBuilt);

  test("a database a newer Almoner has migrated: every command and serve exit 2 saying so, and nothing is changed (Kysely's words were \"corrupted migrations\")", async () => {
    const database = await BACKENDS[0]!.createDatabase();
    try {
      assert.equal((await almoner(database.url, ['charity', 'create', '--name', 'Newer', '--email', 'n@example.org', '--json'])).code, 0);
      const path = database.url.replace(/^sqlite:/, '');
      const { default: Sqlite } = await import('better-sqlite3');
      const db = new Sqlite(path);
      db.prepare("insert into kysely_migration (name, timestamp) values ('0099_future', '2030-01-01T00:00:00.000Z')").run();
      db.close();
      for (const args of [['charity', 'list'], ['serve']]) {
        const r = await almoner(database.url, args, { PORT: '0' });
        assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code}\n${r.stderr}`);
        assert.match(r.stderr, /the database's schema is newer than this Almoner's \(it has 0099_future\): run the version of Almoner that made it/);
        assert.doesNotMatch(r.stderr, /corrupted|\n\s+at /);
      }
    } finally {
      await database.drop();
    }
  });

  test("as a user who may not write the database or its folder: exit 2 naming the database and the user (SQLite's words alone, exit 1, before)", { skip: process.getuid?.() !== 0 && 'needs root, to run the command as nobody' }, async () => {
    const base = tempDir();
    chmodSync(base, 0o755); // nobody may enter, not write
    const url = `sqlite:${join(base, 'almoner.db')}`;
    assert.equal((await almoner(url, ['charity', 'create', '--name', 'Root Made', '--email', 'r@example.org', '--json'])).code, 0);
    const nobody = { uid: 65534, gid: 65534 };
    for (const [dbUrl, args] of [
      [url, ['charity', 'list']],
      [`sqlite:${join(base, 'new.db')}`, ['charity', 'create', '--name', 'New', '--email', 'n@example.org', '--json']],
    ] as const) {
      const r = await almoner(dbUrl, [...args], {}, nobody);
      assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code}\n${r.stderr}`);
      assert.match(r.stderr, /this user \(nobody\) may not write the database sqlite:\S+ or its folder .*Run the command as the user the server runs as/);
    }
  });

  test('--version prints the version in package.json', async () => {
    const { version } = JSON.parse(readFileSync(join(PROJECT, 'package.json'), 'utf8')) as { version: string };
    const run = await almoner('sqlite::memory:', ['--version']);
    assert.deepEqual(run, { code: 0, stdout: `${version}\n`, stderr: '' });
  });

  test("a Node older than package.json's engines (Debian 12's own 18): exit 2 naming the versions needed, where the first import failed with a SyntaxError, exit 1, which systemd restarted every 2 s", async () => {
    for (const old of ['18.20.8', '20.18.3', '21.7.3', '22.11.0']) {
      const pretend = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${old}"})`;
      const run = await new Promise<Run>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', pretend, BIN, '--version'], { env: childEnv('sqlite::memory:'), stdio: ['ignore', 'pipe', 'pipe'] });
        let [stdout, stderr] = ['', ''];
        child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
        child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
      assert.equal(run.code, 2, `${old}: ${run.stderr}`);
      assert.equal(run.stdout, '');
      assert.match(run.stderr, new RegExp(`^almoner: this is Node\\.js ${old.replaceAll('.', '\\.')} .*needs 20\\.19 or later on Node 20, 22\\.12 or later on Node 22, or Node 24`));
    }
    for (const fine of ['20.19.0', '22.12.0', '24.0.0']) {
      const pretend = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${fine}"})`;
      const run = await new Promise<number | null>((resolve) => spawn(process.execPath, ['--import', pretend, BIN, '--version'], { stdio: 'ignore' }).on('close', resolve));
      assert.equal(run, 0, fine);
    }
  });

  test("a command that only reads refuses a SQLite file that is not there: exit 2 naming the path, and nothing created", async () => {
    const dir = tempDir();
    const path = join(dir, 'nowhere', 'almoner.db');
    for (const args of [['charity', 'list'], ['charity', 'rotate', 'someone'], ['charity', 'disable', 'someone'], ['donations', 'export'], ['giftaid', 'claims']]) {
      const run = await almoner(`sqlite:${path}`, args);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.ok(run.stderr.includes(`there is no database at sqlite:${path}`), run.stderr);
      assert.equal(run.stdout, '');
      assert.ok(!existsSync(path), `${args.join(' ')} created ${path}`);
    }
    const created = await almoner(`sqlite:${path}`, ['charity', 'create', '--name', 'First', '--email', 'first@example.org']);
    assert.equal(created.code, 0, created.stderr);
    assert.ok(existsSync(path), 'charity create makes the first database');
  });

  test("DATABASE_URL naming a folder: every command and serve say it is a folder, exit 2 (SQLite's \"unable to open database file\" was taken for a user who may not write it, and serve exited 1; an operator's review)", async () => {
    const folder = tempDir();
    const backup = join(tempDir(), 'b.db');
    const made = await almoner(`sqlite:${backup}`, ['charity', 'create', '--name', 'B', '--email', 'b@example.org']);
    assert.equal(made.code, 0, made.stderr);
    const commands = [
      ['charity', 'list'],
      ['charity', 'create', '--name', 'F', '--email', 'f@example.org'],
      ['serve'],
      ['backup', '--out', join(tempDir(), 'out.db')],
      ['restore', backup, '--replace'],
      ['keep-replaced', '--not-running', backup],
    ];
    for (const args of commands) {
      const run = await almoner(`sqlite:${folder}`, args, { PORT: '0' });
      assert.equal(run.code, 2, `${args.join(' ')}: exit ${run.code}: ${run.stderr}`);
      assert.ok(run.stderr.includes(`DATABASE_URL names a folder, ${folder}, not a database file: name the file in it (sqlite:${folder}/almoner.db, say)`), `${args.join(' ')}: ${run.stderr}`);
      assert.doesNotMatch(run.stderr, /may not write/, args.join(' '));
    }
  });

  test("sqlite::memory: is refused by every command, exit 2, and serve on it says no charity can be added (charity create printed a password for a charity no server could see, and serve told how to make one)", async () => {
    const backup = join(tempDir(), 'b.db');
    const made = await almoner(`sqlite:${backup}`, ['charity', 'create', '--name', 'B', '--email', 'b@example.org']);
    assert.equal(made.code, 0, made.stderr);
    const commands = [
      ['charity', 'create', '--name', 'Helping Hands', '--email', 'info@helpinghands.example'],
      ['charity', 'list'],
      ['donations', 'export'],
      ['backup', '--out', join(tempDir(), 'out.db')],
      ['restore', backup],
      ['keep-replaced', '--not-running', backup],
    ];
    for (const args of commands) {
      const run = await almoner('sqlite::memory:', args);
      assert.equal(run.code, 2, `${args.join(' ')}: exit ${run.code}: ${run.stderr}`);
      assert.equal(run.stdout, '', `${args.join(' ')}: nothing on stdout (no password)`);
      assert.ok(run.stderr.includes("almoner: sqlite::memory: is a database of one process alone, empty at each start and gone when it ends: no command can reach a server's"), `${args.join(' ')}: ${run.stderr}`);
    }
    const server = await new ServerProcess('sqlite::memory:').listening();
    try {
      await until('the note on stderr', 5_000, () => server.stderr.includes('none can be added'));
      assert.ok(server.stderr.includes("Almoner has no charities, and none can be added: sqlite::memory: is a database of one process alone"), server.stderr);
      assert.doesNotMatch(server.stderr, /charity create/, 'no command that cannot reach it');
    } finally {
      server.kill();
    }
  });

  test("a relative sqlite: path is named in full, from the folder the command ran in; the default is in Almoner's folder", async () => {
    const dir = tempDir();
    const child = (cwd: string, env: Record<string, string | undefined>) =>
      new Promise<Run>((resolve) => {
        const c = spawn(BIN, ['charity', 'list'], { cwd, env: { ...childEnv('', env) }, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        c.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
        c.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
        c.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    const relativeRun = await child(dir, { DATABASE_URL: 'sqlite:./data/almoner.db' });
    assert.equal(relativeRun.code, 2);
    assert.match(relativeRun.stderr, new RegExp(`^almoner: database sqlite:${escape(join(dir, 'data', 'almoner.db'))}\n`));
    // With no DATABASE_URL, the same database from any folder: Almoner's own data/almoner.db.
    const byDefault = await child(dir, { DATABASE_URL: undefined });
    const defaultPath = join(PROJECT, 'data', 'almoner.db');
    assert.match(byDefault.stderr, new RegExp(`^almoner: database sqlite:${escape(defaultPath)}\n`), relative(PROJECT, dir));
    assert.equal(byDefault.code, existsSync(defaultPath) ? 0 : 2, byDefault.stderr);
  });

  for (const backend of BACKENDS) {
    test(`a command that works on what is there refuses a database without Almoner's tables: exit 2 naming it, and no table made (on PostgreSQL it made them, and an erasure there said "0 donations", exit 0; an operator's review) [${backend.name}]`, async () => {
      const other = await backend.createDatabase();
      try {
        // Another program's database: an empty PostgreSQL database, or a SQLite file of another program's.
        if (backend.name === 'sqlite') rawSqlite(other.url, 'create table notes (id integer primary key, body text)');
        const tables = async () => (backend.name === 'sqlite' ? rawSqliteTables(other.url) : (await queryPostgres<{ n: string }>(other.url, "select count(*) as n from pg_tables where schemaname = 'public'"))[0]!.n);
        const before = await tables();
        for (const args of [['charity', 'list'], ['donations', 'export'], ['donor', 'erase', '--email', 'jane.doe@example.com'], ['donor', 'export', '--email', 'jane.doe@example.com'], ['giftaid', 'claims'], ['retention', 'apply'], ['audit']]) {
          const run = await almoner(other.url, args);
          assert.equal(run.code, 2, `${args.join(' ')}: exit ${run.code}: ${run.stderr}${run.stdout}`);
          assert.match(run.stderr, /holds no Almoner database \(none of its tables are there\): set DATABASE_URL to the server's database/, args.join(' '));
          assert.equal(run.stdout, '', args.join(' '));
        }
        assert.deepEqual(await tables(), before, 'no table made');
        // charity create makes them, as the first command on a new database.
        assert.equal((await almoner(other.url, ['charity', 'create', '--name', 'First', '--email', 'first@example.org'])).code, 0);
        assert.equal((await almoner(other.url, ['charity', 'list'])).code, 0);
      } finally {
        await other.drop();
      }
    });

    describe(`[${backend.name}]`, { concurrency: 1 }, () => {
      let database: TestDatabase;
      before(async () => {
        database = await backend.createDatabase();
        const first = await almoner(database.url, ['charity', 'create', '--name', 'Listed', '--email', 'listed@example.org']);
        assert.equal(first.code, 0, first.stderr);
      });
      after(() => database?.drop());

      test('every command says on stderr which database it used, without a password', async () => {
        const run = await almoner(database.url, ['charity', 'list', '--json']);
        assert.equal(run.code, 0, run.stderr);
        const line = run.stderr.split('\n')[0]!;
        assert.match(line, /^almoner: database (sqlite:\/|postgres(ql)?:\/\/)/);
        if (backend.name === 'sqlite') assert.equal(line, `almoner: database ${database.url}`);
        const password = new URL(database.url).password;
        if (password) assert.ok(!line.includes(password), line);
        assert.equal(JSON.parse(run.stdout).length, 1, 'stdout holds only the listing');
        if (backend.name !== 'postgres') return;
        // A password with an @ in it, and one given as a parameter: node-postgres reads both (the test server trusts any).
        const [scheme, rest] = database.url.split('://') as [string, string];
        const [user, hostAndPath] = rest.split('@') as [string, string];
        for (const url of [`${scheme}://${user}:p@ssw0rdTAIL@${hostAndPath}`, `${database.url}?password=s3cretpw&sslmode=disable`]) {
          const withPassword = await almoner(url, ['charity', 'list', '--json']);
          assert.equal(withPassword.code, 0, withPassword.stderr);
          for (const secret of ['ssw0rdTAIL', 's3cretpw']) assert.ok(!withPassword.stderr.includes(secret), withPassword.stderr); // printed before
        }
      });

      test('a reader that goes away ends a command quietly: no stack trace, exit 0', async () => {
        for (const args of [['charity', 'list'], ['charity', 'list', '--json'], ['donations', 'export'], ['giftaid', 'claims']]) {
          const run = await withClosedOutput(database.url, args);
          assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
          assert.doesNotMatch(run.stderr, /EPIPE|\bat .*\.js:\d+/, `${args.join(' ')}: ${run.stderr}`);
        }
      });

      test('charity create whose password could not be written: exit 1, and how to set a new one; the charity is listed', async () => {
        const run = await withClosedOutput(database.url, ['charity', 'create', '--name', 'Unseen', '--email', 'unseen@example.org']);
        assert.equal(run.code, 1, run.stderr);
        const m = /(\S+) has a password nobody has seen\. Set a new one with: bin\/almoner charity rotate (\S+)\n/.exec(run.stderr);
        assert.ok(m && m[1] === m[2], run.stderr);
        assert.doesNotMatch(run.stderr, /\bat .*\.js:\d+/);
        const listed = JSON.parse((await almoner(database.url, ['charity', 'list', '--json'])).stdout) as Array<{ username: string }>;
        assert.ok(listed.some((c) => c.username === m[1]), 'the charity was created');
        const rotated = await almoner(database.url, ['charity', 'rotate', m[1]!, '--json']);
        assert.equal(rotated.code, 0, rotated.stderr);
      });

      test('charity create or rotate with standard output closed or /dev/null: refused before anything changes, exit 2 (it made a charity whose password nobody saw, and exit 0)', async () => {
        const before = (await almoner(database.url, ['charity', 'list', '--json'])).stdout;
        const trail = (await almoner(database.url, ['audit', '--json'])).stdout;
        const [some] = JSON.parse(before) as Array<{ username: string }>;
        for (const args of [['charity', 'create', '--name', 'Nowhere', '--email', 'nowhere@example.org'], ['charity', 'rotate', some!.username]]) {
          const run = await withClosedOutput(database.url, args, { toNowhere: true });
          assert.equal(run.code, 2, `${args[1]}: ${run.stderr}`);
          assert.match(run.stderr, /standard output is closed or \/dev\/null, so the new password would never be seen/);
        }
        assert.equal((await almoner(database.url, ['charity', 'list', '--json'])).stdout, before, 'no charity made');
        assert.equal((await almoner(database.url, ['audit', '--json'])).stdout, trail, 'no charity made, no password changed');
      });
    });
  }
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
