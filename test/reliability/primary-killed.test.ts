// WORKERS=2 on SQLite: the primary killed with SIGKILL (the OOM killer, a `kill -9`) as its workers
// start. Each worker notices that its primary is gone and ends, saying at most one line through its
// logger: none is left running, and none prints a Node stack trace.
//
// A worker whose primary died before Node's own start in the worker had sent the primary its first
// message ('online', before any of Almoner's code runs) printed Node's `Error: write EPIPE` and its
// stack trace (an unhandled 'error' event on cluster.worker): a review, and before the fix 10 of 10
// rounds here that killed the primary as its first worker was forked. bin/worker-preload.cjs, which
// each worker loads first, now takes that error for the primary's going; without it (its --require
// in cluster/primary.ts taken out) the first rounds fail on `EPIPE`. A worker already serving ended
// with Node's own exit status 0, saying nothing: now it says so in one line and exits 1 (the
// second kind of round checks the line).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { SQLITE, type TestDatabase } from '../support/backends.js';
import { assertBuilt, until } from '../support/cli.js';
import { ServerProcess } from '../support/server.js';

/** Rounds of each kind: enough that a trace printed in some rounds only is seen. */
const ROUNDS = 5;

/** The processes `pid` has forked (Linux's /proc/PID/task/PID/children), empty once it is gone. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter((s) => s !== '').map(Number);
  } catch {
    return [];
  }
}

/** Whether `pid` still runs: a zombie (ended, its status not yet read by whoever adopted it) does not. */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Waits, looking every millisecond, for the primary to have forked `count` workers, and returns their ids. */
async function forked(server: ServerProcess, count: number): Promise<number[]> {
  let workers: number[] = [];
  await until(`the primary forks worker ${count}`, 60_000, async () => {
    for (let i = 0; i < 25; i++) {
      workers = childrenOf(server.pid);
      if (workers.length >= count) return true;
      await new Promise((r) => setTimeout(r, 1));
    }
    return false;
  }, () => server.stderr);
  return workers;
}

describe('WORKERS=2: the primary killed as its workers start [sqlite]', () => {
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  const workers: number[] = [];
  before(async () => {
    assertBuilt();
    database = await SQLITE.createDatabase();
  });
  after(async () => {
    for (const pid of workers.filter(running)) process.kill(pid, 'SIGKILL');
    for (const server of servers) server.kill();
    await database?.drop();
  });

  /** Starts a server, kills its primary the moment it has forked `count` workers, and returns it once every worker has ended (its stdout and stderr closed), with their ids. */
  async function killedAt(count: number): Promise<{ server: ServerProcess; pids: number[] }> {
    const server = new ServerProcess(database.url, { WORKERS: '2' });
    servers.push(server);
    const pids = await forked(server, count);
    workers.push(...pids);
    server.signal('SIGKILL');
    const ended = await Promise.race([server.closed.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 60_000).unref())]);
    assert.ok(ended, `a worker still writes to the server's stdout or stderr 60 s after the primary was killed: ${pids.filter(running).join(', ')} running`);
    return { server, pids };
  }

  /** Nothing but what a start says and whole JSON log lines: no `write EPIPE`, no stack trace. */
  function assertQuiet(server: ServerProcess, round: string): void {
    const output = `${server.stderr}${server.stdout}`;
    assert.doesNotMatch(output, /EPIPE/, `${round}: ${output}`);
    assert.doesNotMatch(output, /^\s+at /m, `${round}: a stack trace: ${output}`);
    for (const line of server.logLines()) assert.doesNotThrow(() => JSON.parse(line), `${round}: not a log line: ${line}`);
  }

  test(`killed as its first worker is forked (${ROUNDS} times): the worker ends, no EPIPE, no stack trace`, async () => {
    for (let round = 1; round <= ROUNDS; round++) {
      const { server, pids } = await killedAt(1);
      assertQuiet(server, `round ${round}`);
      assert.deepEqual(pids.filter(running), [], `round ${round}: a worker left running`);
    }
  });

  test(`killed as its second worker is forked, the first serving (${ROUNDS} times): both end, the first saying why in one log line`, async () => {
    for (let round = 1; round <= ROUNDS; round++) {
      const { server, pids } = await killedAt(2);
      assertQuiet(server, `round ${round}`);
      assert.deepEqual(pids.filter(running), [], `round ${round}: a worker left running`);
      const gone = server.logLines().filter((line) => line.includes('the primary process is gone'));
      assert.equal(gone.length, 1, `round ${round}: the serving worker says why it ends, once: ${server.stdout}`);
      assert.equal((JSON.parse(gone[0]!) as { level: number }).level, 60);
    }
  });
});
