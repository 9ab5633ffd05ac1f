// A server whose log cannot be written goes on serving (log-output.ts). Until 2026-11-30 the first
// failed write killed it: `serve | head -c 3000` once head had exited (EPIPE), or a log file on a
// full disk (ENOSPC, and again at each restart); under WORKERS the workers died, then the primary
// (a faults review). The unit tests in test/log-output.test.ts cover a full disk and a stopped reader.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { basic } from '../support/app.js';
import { SQLITE, type TestDatabase } from '../support/backends.js';
import { almoner, assertBuilt } from '../support/cli.js';
import { ServerProcess } from '../support/server.js';

describe('a log whose reader is gone (EPIPE)', () => {
  const databases: TestDatabase[] = [];
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const server of servers) server.kill();
    for (const database of databases) await database.drop();
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
