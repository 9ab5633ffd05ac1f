// `npm start` stops with its server (issue 12, item 4): a SIGTERM or SIGINT to npm's process, as a
// process manager or a terminal sends it, stops `bin/almoner serve` cleanly and npm exits with it.
//
// npm (11) forwards both signals to the child it started. With `"start": "bin/almoner serve"` that
// child is `sh -c` (dash), which does not pass them on: on SIGTERM npm dies at once and the server
// keeps listening, reparented to PID 1; on SIGINT nothing stops at all. `exec` replaces the shell
// with the server, so the signal reaches it, and npm exits with the server's status. Checked: with
// the old script the SIGTERM test fails ("still running after npm exited": node bin/almoner serve)
// and the SIGINT test fails ("npm exits after SIGINT: not within 10 s").
//
// Linux only, like the deployment it tests: the process group is read from /proc.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { tempDir } from '../support/backends.js';
import { assertBuilt, childEnv, until } from '../support/cli.js';
import { ROOT } from '../support/root.js';

/** A process's group and state from /proc/PID/stat, or undefined once it is gone. */
function procStat(pid: number): { pgrp: number; state: string } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
  const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { pgrp: Number(pgrp), state: state! };
}

/** Alive: exists and is not a zombie (an exited child nobody has reaped yet). */
function alive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '(gone)';
  }
}

/** Every live process in process group `pgid`. */
function processGroup(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => procStat(pid)?.pgrp === pgid && alive(pid));
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('npm start', () => {
  const started: ChildProcess[] = [];
  const dirs: string[] = [];

  after(() => {
    // A survivor keeps npm's process group (it was detached into its own): end the whole group.
    for (const npm of started) {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // ESRCH: nothing left in it
      }
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    test(`${signal} to npm's process stops the server and npm exits 0`, { timeout: 60_000 }, async () => {
      assertBuilt();
      const dir = tempDir();
      dirs.push(dir);
      // Its own process group, so everything npm started can be found (and killed) afterwards.
      const npm = spawn('npm', ['start'], {
        cwd: ROOT,
        env: childEnv(`sqlite:${join(dir, 'almoner.db')}`, { PORT: '0' }),
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      started.push(npm);
      let output = '';
      npm.stdout!.setEncoding('utf8').on('data', (s: string) => (output += s));
      npm.stderr!.setEncoding('utf8').on('data', (s: string) => (output += s));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        npm.once('exit', (code, sig) => resolve({ code, signal: sig })),
      );
      let npmExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
      void exited.then((e) => (npmExit = e));

      let url = '';
      await until('npm start serves /health', 30_000, async () => {
        if (npmExit) assert.fail(`npm exited early (${JSON.stringify(npmExit)}):\n${output}`);
        url ||= /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1] ?? '';
        return url !== '' && (await fetch(`${url}/health`).then((r) => r.ok, () => false));
      });
      const port = Number(new URL(url).port);
      const group = processGroup(npm.pid!);
      const server = Number(/"pid":(\d+)/.exec(output)?.[1]); // Fastify's log lines carry the server's pid
      assert.ok(group.includes(server), `the server (pid ${server}) is in npm's process group ${group.join(', ')}`);

      process.kill(npm.pid!, signal);
      await until(`npm exits after ${signal}`, 10_000, () => npmExit !== undefined, () => output);
      const survivors = group.filter(alive);
      assert.deepEqual(
        survivors.map((pid) => `${pid} ${commandLine(pid)}`),
        [],
        `still running after npm exited (${JSON.stringify(npmExit)}); npm's output:\n${output}`,
      );
      assert.equal(await accepts(port), false, `something still accepts connections on port ${port}`);
      assert.match(output, new RegExp(`"signal":"${signal}","msg":"shutting down`), 'the server shut down on the signal itself');
      assert.deepEqual(npmExit, { code: 0, signal: null }, `npm exits with the server's status 0:\n${output}`);
      assert.ok(!existsSync(join(dir, 'almoner.db-wal')), 'the server closed its database (SQLite removes the WAL file on close)');
    });
  }
});
