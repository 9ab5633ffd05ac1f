// Test support for the real executable: run bin/almoner as an operator would, on a given database.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir, type TestDatabase } from './backends.js';

export const BIN = fileURLToPath(new URL('../../bin/almoner', import.meta.url));
const DIST_MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** bin/almoner runs the compiled code: fail with a clear message instead of a confusing one. */
export function assertBuilt(): void {
  assert.ok(existsSync(DIST_MAIN), 'dist/ is missing: run `npm run build` before these tests');
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a bin/almoner child on this database: this process's environment without the
 * test runner's marker and without settings the parent may have (PORT, LOG_LEVEL, the pool size),
 * then `extra`. An `undefined` in `extra` removes that variable.
 */
export function childEnv(databaseUrl: string, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // the child is not a test file
  delete env.PORT;
  delete env.LOG_LEVEL;
  delete env.DATABASE_POOL_MAX;
  Object.assign(env, { DATABASE_URL: databaseUrl, HOST: '127.0.0.1' });
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/**
 * How to run it: `uid` and `gid`, another user's ids to run it as (the test must be root); `timeoutMs`, how long it may take before
 * it is killed and the run rejects (20 s: a command that hangs; longer for one doing much work under a small heap, which a loaded
 * machine slows several times over).
 */
export interface RunAs {
  uid?: number;
  gid?: number;
  timeoutMs?: number;
}

/** Runs bin/almoner with DATABASE_URL (and any extra environment); never rejects on a non-zero exit. */
export function almoner(databaseUrl: string, args: string[], extra: Record<string, string | undefined> = {}, as?: RunAs): Promise<Run> {
  return startAlmoner(databaseUrl, args, extra, as).done;
}

/** How a run that must be ended by a signal ended (a shim's SIGKILL, say): the test fails if it exits instead. */
export async function killedBySignal(run: Promise<Run>): Promise<{ signal?: string }> {
  return await run.then(
    (r) => assert.fail(`not killed: exit ${r.code}, ${r.stderr}${r.stdout}`),
    (err: { signal?: string }) => err,
  );
}

/** The same, with the process's pid while it runs. */
export function startAlmoner(databaseUrl: string, args: string[], extra: Record<string, string | undefined> = {}, { timeoutMs = 20_000, ...ids }: RunAs = {}): { pid: number; done: Promise<Run> } {
  let pid = 0;
  const done = new Promise<Run>((resolve, reject) => {
    const child = execFile(BIN, args, { env: childEnv(databaseUrl, extra), timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, ...ids }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err); // could not run at all, or timed out
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
    pid = child.pid ?? 0;
  });
  return { pid, done };
}

/** Polls `done` until it is true; fails with `what` (and `detail()`, if given) after `ms`. */
export async function until(
  what: string,
  ms: number,
  done: () => boolean | Promise<boolean>,
  detail: () => string = () => '',
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) {
      const more = detail();
      assert.fail(`${what}: not within ${ms / 1000} s${more ? ` (${more})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A `tool` in front of the real one that kills the restore (its parent) with SIGKILL: before its own work, or once it has succeeded. */
export function killing(tool: 'pg_dump' | 'pg_restore', when: 'before' | 'after'): string {
  const shim = tempDir();
  const real = execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim();
  // pg_restore also reads the archive (--list) before anything is marked: only its restore (--single-transaction) counts.
  const body = when === 'before' ? 'kill -9 $PPID; exit 1' : `"${real}" "$@"; code=$?\ncase " $* " in *" --single-transaction "*) [ $code -eq 0 ] && kill -9 $PPID;; esac\nexit $code`;
  writeFileSync(join(shim, tool), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return `${shim}:${process.env.PATH}`;
}

/** The operator's steps on `database`, each expected to succeed: a command, a charity, a claim (marked submitted), a backup. */
export function operator(database: TestDatabase, backend: string) {
  const cli = async (args: string[]) => {
    const run = await almoner(database.url, args);
    assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}${run.stdout}`);
    return run;
  };
  return {
    cli,
    charity: async (name: string) => JSON.parse((await cli(['charity', 'create', '--name', name, '--email', `${name.toLowerCase()}@example.org`, '--json'])).stdout) as { id: number; name: string; username: string; password: string },
    claim: async (username: string) => {
      const out = tempDir();
      const made = JSON.parse((await cli(['giftaid', 'claim', '--charity', username, '--out', out, '--json'])).stdout) as { claim: number | null; donations: number };
      if (made.claim !== null) await cli(['giftaid', 'mark', String(made.claim), 'submitted']);
      return { ...made, out };
    },
    backup: async (name: string) => {
      const file = join(tempDir(), name);
      if (backend === 'sqlite') await cli(['backup', '--out', file]);
      else execFileSync('pg_dump', ['--format=custom', `--file=${file}`, database.url]);
      return file;
    },
  };
}

/**
 * A new database of `backend`'s with a charity signed up before a backup of it (`file`) and one after ("Before", then
 * "Afterwards"), for `run`, which may restore it; the database dropped after.
 */
export async function withBackupBetween(
  backend: { name: string; createDatabase(): Promise<TestDatabase> },
  run: (t: { database: TestDatabase; cli: ReturnType<typeof operator>['cli']; file: string }) => Promise<void>,
): Promise<void> {
  assertBuilt();
  const database = await backend.createDatabase();
  try {
    const { cli, charity, backup } = operator(database, backend.name);
    await charity('Before');
    const file = await backup('before');
    await charity('Afterwards');
    await run({ database, cli, file });
  } finally {
    await database.drop();
  }
}

/** A PATH with a pg_restore in front of the real one whose restore (--single-transaction) kills the restore with SIGKILL before doing anything, as one rolled back; its reading of the archive (--list) is the real one's. */
export function killedAsPgRestoreBegins(): string {
  const shim = tempDir();
  const real = execFileSync('sh', ['-c', 'command -v pg_restore'], { encoding: 'utf8' }).trim();
  writeFileSync(join(shim, 'pg_restore'), `#!/bin/sh\ncase " $* " in *" --single-transaction "*) kill -9 $PPID; exit 1;; esac\nexec "${real}" "$@"\n`, { mode: 0o755 });
  return `${shim}:${process.env.PATH}`;
}

/** Whether util-linux's `setpriv --pdeathsig` is here: a PostgreSQL restore's pg_restore then dies with it (cli/backup.ts, dyingWithThis). */
export const SETPRIV = execFileSync('sh', ['-c', 'setpriv --pdeathsig TERM -- true && echo yes || true'], { encoding: 'utf8' }).trim() === 'yes';

/** `path` (a PATH) with a `setpriv` in front that refuses --pdeathsig, as util-linux's before 2.33: pg_restore and pg_dump are then run plainly, as where there is none. */
export function withoutSetpriv(path = process.env.PATH ?? ''): string {
  const shim = tempDir();
  writeFileSync(join(shim, 'setpriv'), "#!/bin/sh\necho \"setpriv: unrecognized option '$1'\" >&2\nexit 1\n", { mode: 0o755 });
  return `${shim}:${path}`;
}

/**
 * A PATH with a pg_restore in front of the real one whose restore (--single-transaction) writes its pid to `folder`/orphan,
 * kills the restore (its parent) with SIGKILL before connecting, waits for `folder`/go, and then, left running alone (an
 * orphan), is the real one (exec: the same process), reading the list its restore gave it.
 */
export function orphanedAsPgRestoreBegins(folder: string): string {
  const shim = tempDir();
  const real = execFileSync('sh', ['-c', 'command -v pg_restore'], { encoding: 'utf8' }).trim();
  writeFileSync(
    join(shim, 'pg_restore'),
    `#!/bin/sh\ncase " $* " in *" --single-transaction "*) echo $$ > "${folder}/orphan.tmp"; mv "${folder}/orphan.tmp" "${folder}/orphan"; kill -9 $PPID; while [ ! -e "${folder}/go" ]; do sleep 0.05; done;; esac\nexec "${real}" "$@"\n`,
    { mode: 0o755 },
  );
  return `${shim}:${process.env.PATH}`;
}

/** Whether process `pid` has ended: gone, or a zombie no one has reaped yet (an orphan's, reparented). */
export function ended(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return true;
  }
}
