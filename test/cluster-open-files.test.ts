// WORKERS=2 with an open-files limit the workers reach: a connection the primary hands to a worker
// whose file-descriptor table is full is dropped, and the worker goes on getting the next ones.
//
// Node's round-robin (lib/internal/cluster/round_robin_handle.js) hands a worker one connection at
// a time and waits for its answer before it hands it another. A worker with no descriptor free
// reads the message without its descriptor (recvmsg sets MSG_CTRUNC); Node's IPC then answers
// NODE_HANDLE_NACK, which for a connection handed on by cluster is neither sent again nor answered,
// so the primary never heard from that worker again and handed it nothing more. Once both workers
// had met it, the primary held every new connection unanswered until it was restarted (a review of
// 2026-11-30: floods of 150 connections under `prlimit --nofile=64:64`). cluster/lost-connections.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { SQLITE, type TestDatabase } from './support/backends.js';
import { until } from './support/cli.js';
import { ServerProcess } from './support/server.js';

const LIMIT = 64;

function logEntries(server: ServerProcess): Record<string, unknown>[] {
  return server.logLines().flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

function workerPids(server: ServerProcess): number[] {
  return logEntries(server)
    .filter((e) => typeof e.msg === 'string' && e.msg.startsWith('Server listening at'))
    .map((e) => e.pid as number);
}

function openFiles(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0; // gone
  }
}

/** GET `path` on a connection of its own; fails if nothing comes back within `ms` (a primary holding the connection answers never). */
function get(url: string, path: string, ms: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.setTimeout(ms, () => req.destroy(new Error(`no answer to GET ${path} within ${ms / 1000} s: the primary hands no connection on`)));
    req.on('error', reject);
    req.end();
  });
}

describe('WORKERS=2 with the workers out of file descriptors [sqlite]', () => {
  let database: TestDatabase;
  let server: ServerProcess;

  before(async () => {
    database = await SQLITE.createDatabase();
    server = await new ServerProcess(database.url, { WORKERS: '2', CONNECTIONS_PER_ADDRESS: '0' }).listening();
    await until('both workers listen', 10_000, () => workerPids(server).length === 2, () => server.stdout + server.stderr);
  });

  after(async () => {
    server?.kill();
    await database?.drop();
  });

  test('a connection handed to a worker with no descriptor free is dropped, and both workers go on getting new connections (the primary stopped handing any on, until 2026-11-30)', async () => {
    const workers = workerPids(server);
    // The review's `prlimit --nofile=64:64`, set on the running processes (Node raises its own limit to the hard one as it starts).
    for (const pid of [server.pid, ...workers]) execFileSync('prlimit', ['--pid', String(pid), `--nofile=${LIMIT}:${LIMIT}`]);

    // Connections that send nothing, each held by the worker it reaches, until both workers have no
    // descriptor free. Opened a few at a time, each few once it is placed (held by the primary or a
    // worker, or closed): all at once, the primary's own table filled first and it closed the rest.
    const processes = [server.pid, ...workers];
    const before = new Map(processes.map((pid) => [pid, openFiles(pid)]));
    const placed = () => processes.reduce((sum, pid) => sum + openFiles(pid) - before.get(pid)!, 0) + closed;
    const sockets: Socket[] = [];
    let closed = 0;
    while (!workers.every((pid) => openFiles(pid) >= LIMIT)) {
      assert.ok(sockets.length < 4 * LIMIT, `${sockets.length} connections and the workers have descriptors free: ${workers.map((pid) => `${pid}: ${openFiles(pid)} open`).join(', ')}`);
      for (let i = 0; i < 8; i++) sockets.push(connect(Number(new URL(server.url).port), '127.0.0.1').on('error', () => {}).on('close', () => closed++));
      await until('the connections placed', 10_000, () => placed() >= sockets.length || workers.every((pid) => openFiles(pid) >= LIMIT));
    }
    for (const socket of sockets) socket.destroy();
    await until(
      'the workers to close the connections',
      15_000,
      () => workers.every((pid) => openFiles(pid) < LIMIT / 2),
      () => workers.map((pid) => `${pid}: ${openFiles(pid)} open`).join(', '),
    );

    const mark = logEntries(server).filter((e) => e.route === '/health').length;
    for (let i = 0; i < 6; i++) assert.equal(await get(server.url, '/health', 10_000), 200);
    await until('6 access lines for /health', 5_000, () => logEntries(server).filter((e) => e.route === '/health').length >= mark + 6);
    const answeredBy = new Set(
      logEntries(server)
        .filter((e) => e.route === '/health')
        .slice(mark)
        .map((e) => e.pid),
    );
    assert.deepEqual([...answeredBy].sort(), [...workers].sort(), 'both workers get new connections again');
  });
});
