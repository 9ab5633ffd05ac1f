// A server whose log cannot be written goes on serving (log-output.ts). Until 2026-11-30 the first
// failed write killed it: `serve | head -c 3000` once head had exited (EPIPE), or a log file on a
// full disk (ENOSPC, and again at each restart); under WORKERS the workers died, then the primary
// (a faults review). The unit tests in test/log-output.test.ts cover a full disk and a stopped reader.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { basic } from '../support/app.js';
import { SQLITE, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, until } from '../support/cli.js';
import { freePort } from '../support/nginx.js';
import { ServerProcess } from '../support/server.js';

describe('a log whose reader is gone (EPIPE)', () => {
  const databases: TestDatabase[] = [];
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const server of servers) server.kill();
    for (const database of databases) await database.drop();
  });

  // A terminal is left blocking by Node (a pipe is not): until 2026-11-30 a terminal that took nothing (Ctrl-S, an ssh
  // session that stopped reading) held every request once its buffer was full, 83 answers in (a review).
  test('a terminal nobody reads: the server answers every request and stops cleanly', async () => {
    assertBuilt();
    const database = await SQLITE.createDatabase();
    databases.push(database);
    const created = await almoner(database.url, ['charity', 'create', '--name', 'Unread', '--email', 'unread@example.org', '--json']);
    assert.equal(created.code, 0, created.stderr);
    const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
    const port = await freePort();
    // python3's pty module: the server's stdout and stderr a terminal whose other end is held open and never read.
    const script = 'import os, pty, subprocess, sys\nm, s = pty.openpty()\np = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=s)\nos.close(s)\nprint(p.pid, flush=True)\nsys.exit(p.wait())\n';
    const wrapper = spawn('python3', ['-c', script, BIN, 'serve'], { env: childEnv(database.url, { PORT: String(port), LOG_LEVEL: 'info' }), stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => wrapper.once('exit', (code) => resolve(code)));
    let pid: number | undefined;
    try {
      let out = '';
      wrapper.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
      await until('the server started', 10_000, () => /^\d+\n/.test(out));
      pid = Number(out.trim());
      const me = () => fetch(`http://127.0.0.1:${port}/api/v1/me`, { method: 'POST', headers: { authorization: basic(username, password), accept: 'application/json' }, signal: AbortSignal.timeout(10_000) });
      await until('the server listens', 10_000, async () => (await me().catch(() => undefined))?.status === 200);
      for (let round = 0; round < 30; round++) {
        const answers = await Promise.all(Array.from({ length: 10 }, me));
        for (const res of answers) assert.equal(res.status, 200, `round ${round}: ${res.status}`);
      }
      process.kill(pid, 'SIGTERM');
      assert.equal(await exited, 0, 'exit 0');
    } finally {
      wrapper.kill('SIGKILL');
      try {
        if (pid !== undefined) process.kill(pid, 'SIGKILL'); // the server, which the wrapper's death leaves running
      } catch {
        // gone already
      }
    }
  });

  for (const workers of ['1', '2']) {
    test(`WORKERS=${workers}: the server answers every request and stops cleanly`, async () => {
      assertBuilt();
      const database = await SQLITE.createDatabase();
      databases.push(database);
      const created = await almoner(database.url, ['charity', 'create', '--name', 'Unlogged', '--email', 'unlogged@example.org', '--json']);
      assert.equal(created.code, 0, created.stderr);
      const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
      const server = new ServerProcess(database.url, { LOG_LEVEL: 'info', WORKERS: workers });
      servers.push(server);
      await server.listening();
      server.closeStdout();
      const me = () => fetch(`${server.url}/api/v1/me`, { method: 'POST', headers: { authorization: basic(username, password), accept: 'application/json' } });
      for (let round = 0; round < 20; round++) {
        const answers = await Promise.all(Array.from({ length: 10 }, me));
        for (const res of answers) assert.equal(res.status, 200, `round ${round}: ${res.status}`);
      }
      const { code, signal } = await server.stop('SIGTERM', 15_000);
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, server.stderr);
    });
  }
});
