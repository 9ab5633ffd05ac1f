// A server stopped moments after it started: what it was still doing at the signal finishes
// before the database closes, and the stop is as clean as any other (exit 0, nothing on stderr but
// what a start says).
//
// Just after it listens, `serve` counts the charities (to say how to sign the first one up). On
// PostgreSQL that count may need a new connection of the pool, one being made when a SIGTERM came
// (`systemctl restart` right after a start, say): the database closed under it, and the server
// said `almoner: driver has already been destroyed` on stderr as it stopped (seen here in 4 of 21
// starts stopped at their first answer, 2026-12-02). The count is now an operation the store
// waits for as it closes, as a request's are. Without that (Store.count untracked), the test
// fails with that line on stderr.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { BACKENDS, type TestDatabase } from '../support/backends.js';
import { assertBuilt, until } from '../support/cli.js';
import { proxyFor, type TcpProxy } from '../support/proxy.js';
import { ServerProcess } from '../support/server.js';

/** Connections a server's start makes before it listens: the pool's first, and the instance row's own (store/instances.ts). */
const OPENING = 2;
/** How long the count's new connection takes to be made, and the purge's first statement to be answered (less: the store waits for it anyway). */
const CONNECT_MS = 1500;
const PURGE_MS = 300;

const postgres = BACKENDS.find((b) => b.name === 'postgres');

describe('a server stopped as it starts [postgres]', { skip: postgres ? false : 'TEST_DATABASE_URL is not set' }, () => {
  let database: TestDatabase;
  let proxy: TcpProxy | undefined;
  let server: ServerProcess | undefined;
  after(async () => {
    server?.signal('SIGKILL');
    await proxy?.close();
    await database?.drop();
  });

  test('SIGTERM while its count of charities waits for a new connection: the count finishes, then exit 0 with nothing said of a closed database', async () => {
    assertBuilt();
    database = await postgres!.createDatabase();
    let url: string;
    ({ proxy, url } = await proxyFor(database.url));
    // The opening's own connections (OPENING) go through at once; one after waits CONNECT_MS to be
    // made. The purge of expired keys, begun as the server listens, keeps the pool's open connection
    // a while, so the count that follows has to make a new one.
    proxy.delayConnections(OPENING, CONNECT_MS);
    proxy.slowAnswersTo('delete from "idempotency_keys"', PURGE_MS);
    server = new ServerProcess(url, { LOG_LEVEL: 'warn' });
    await until('the server says where its API reference is', 10_000, () => /API reference/.test(server!.stderr)); // written as the count begins
    server.signal('SIGTERM');
    const exit = await server.exit(15_000, 'of SIGTERM');
    assert.equal(proxy.accepted, OPENING + 1, `the server made ${proxy.accepted} connections, where the test expects the opening's ${OPENING} and the count's: see OPENING`);
    assert.deepEqual(exit, { code: 0, signal: null }, server.stderr);
    assert.doesNotMatch(server.stderr, /destroyed|almoner: (?!database )/, 'nothing said but what a start says');
    assert.match(server.stderr, /no charities yet/, 'the count finished: its hint was given');
  });
});
