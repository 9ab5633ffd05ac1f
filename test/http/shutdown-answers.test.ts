// A shutdown lets answers still going out finish: an answer the server has ended is not sent yet
// while the client is still reading it (over the Internet, most of a large one waits in the
// server's process: the kernel holds a few hundred kB for a connection). Node's
// closeIdleConnections, which server.close() calls, took an ended answer for a sent one and cut it
// off mid-body; and closeUnanswered took a client reading one large answer for one that does not
// read (socket.bytesWritten counts an answer whole as soon as it is handed to the socket). Neither
// is seen with the 1.7 MB of /docs/swagger-ui-bundle.js on this machine's loopback, whose buffers
// take it all, so these answers are 32 MB, from a plain node:http server that trackConnections
// watches; the shutdown's clock is given to closeUnanswered, so nothing waits out its seconds.
import assert from 'node:assert/strict';
import http, { type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { ARRIVAL_BEFORE_CLOSE_MS, QUIET_BEFORE_CLOSE_MS, SENDING_BEFORE_CLOSE_MS, trackConnections } from '../../src/http/connections.js';
import { until } from '../support/cli.js';

const ANSWER = Buffer.alloc(32 * 1024 * 1024, 'a');

/** The server's end of a connection, with libuv's write queue: what the kernel has not taken yet. */
type Watched = Socket & { _handle?: { writeQueueSize: number } };

const servers: http.Server[] = [];
after(() => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
});

/** A server whose every answer is ANSWER, and its connections watched as the app watches them: a shutdown starts afresh with each. */
async function serve(): Promise<{ server: http.Server; port: number; tracker: ReturnType<typeof trackConnections>; answering: () => ServerResponse | undefined }> {
  let answering: ServerResponse | undefined;
  const server = http.createServer((_req, res) => {
    answering = res;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': ANSWER.length }).end(ANSWER);
  });
  servers.push(server);
  const tracker = trackConnections(server, false);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, tracker, answering: () => answering };
}

/** A client that has asked for the answer and reads none of it until told to: what it has received, and the server's end of it. */
async function slowReader({ port, answering }: Awaited<ReturnType<typeof serve>>): Promise<{ client: Socket; received: () => number; ended: Promise<void>; readWhile(more: () => boolean): void; socket: Watched }> {
  const client = connect(port, '127.0.0.1');
  client.on('error', () => {});
  let received = 0;
  client.on('data', (d: Buffer) => {
    received += d.length;
    if (!reading()) client.pause();
  });
  let reading = () => false;
  const ended = new Promise<void>((resolve) => client.once('close', () => resolve()));
  client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  client.pause();
  await until('the answer ended, most of it still in the server', 5_000, () => {
    const res = answering();
    return res?.finished === true && res.socket !== null && res.socket.writableLength > 0;
  });
  const reader = { client, received: () => received, readWhile: (more: () => boolean) => (reading = more), ended, socket: answering()!.socket! as Watched };
  await settled(reader.socket);
  return reader;
}

/** Waits until the kernel takes no more of the answer from the server's process (the client's buffers are full). */
async function settled(socket: Watched): Promise<void> {
  let last = -1;
  await until('the kernel took no more', 5_000, async () => {
    const queued = socket._handle?.writeQueueSize ?? -2;
    const same = queued === last;
    last = queued;
    if (!same) await new Promise((r) => setTimeout(r, 100));
    return same;
  });
}

/** Lets the client read until the kernel has taken more of the answer from the server's process, then stops it. */
async function reads(reader: Awaited<ReturnType<typeof slowReader>>): Promise<void> {
  if (reader.socket.destroyed) return;
  const queued = reader.socket._handle!.writeQueueSize;
  const before = reader.received();
  reader.readWhile(() => reader.socket._handle?.writeQueueSize === queued);
  reader.client.resume();
  await until('the kernel took more of the answer', 5_000, () => reader.socket.destroyed || reader.socket._handle?.writeQueueSize !== queued);
  if (!reader.socket.destroyed) await settled(reader.socket);
  assert.ok(reader.received() > before);
}

test("an answer ended but not all sent is not cut off as the server closes (Node's closeIdleConnections took it for sent)", async () => {
  const { server, ...rest } = await serve();
  const reader = await slowReader({ server, ...rest });
  server.closeIdleConnections(); // as server.close() does, and the shutdown's reaper every 50 ms
  assert.ok(!reader.socket.destroyed, 'the connection was destroyed with most of its answer still to go out');
  reader.readWhile(() => true);
  reader.client.resume();
  await until('the whole answer received, or the connection closed', 20_000, () => reader.received() > ANSWER.length || reader.socket.destroyed);
  assert.ok(reader.received() > ANSWER.length, `the connection was closed after ${reader.received()} bytes of an answer of ${ANSWER.length}`);
  server.closeIdleConnections(); // all sent now: closed
  await reader.ended;
});

test('in a shutdown, a client reading one large answer is kept while it reads, and let go a second after it stops', async () => {
  const served = await serve();
  const { tracker } = served;
  const reader = await slowReader(served);
  const start = 100_000;
  tracker.closeUnanswered(start);
  tracker.closeUnanswered(start + ARRIVAL_BEFORE_CLOSE_MS); // past the time a request may still be arriving: its answer is watched
  await reads(reader);
  tracker.closeUnanswered(start + ARRIVAL_BEFORE_CLOSE_MS + QUIET_BEFORE_CLOSE_MS + 1);
  assert.ok(!reader.socket.destroyed, `let go ${QUIET_BEFORE_CLOSE_MS} ms after its answer was handed to the socket, though the client has read ${reader.received()} bytes of it since`);
  // It stops reading: a second later it is let go.
  tracker.closeUnanswered(start + ARRIVAL_BEFORE_CLOSE_MS + 2 * QUIET_BEFORE_CLOSE_MS + 2);
  assert.ok(reader.socket.destroyed, 'a client that stopped reading for a second held the shutdown up');
  reader.client.destroy();
});

test(`in a shutdown, no answer is kept going out past SENDING_BEFORE_CLOSE_MS (${SENDING_BEFORE_CLOSE_MS} ms), so it still ends within its 10 s, exit 0`, async () => {
  assert.ok(SENDING_BEFORE_CLOSE_MS > ARRIVAL_BEFORE_CLOSE_MS + QUIET_BEFORE_CLOSE_MS && SENDING_BEFORE_CLOSE_MS <= 9_000);
  const served = await serve();
  const { tracker } = served;
  const reader = await slowReader(served);
  const start = 200_000;
  tracker.closeUnanswered(start);
  tracker.closeUnanswered(start + ARRIVAL_BEFORE_CLOSE_MS);
  for (let at = start + ARRIVAL_BEFORE_CLOSE_MS + QUIET_BEFORE_CLOSE_MS; at < start + SENDING_BEFORE_CLOSE_MS; at += QUIET_BEFORE_CLOSE_MS) {
    await reads(reader);
    tracker.closeUnanswered(at);
    assert.ok(!reader.socket.destroyed, `a client still reading was let go ${at - start} ms into the shutdown`);
  }
  await reads(reader);
  tracker.closeUnanswered(start + SENDING_BEFORE_CLOSE_MS);
  assert.ok(reader.socket.destroyed, `an answer was still going out ${SENDING_BEFORE_CLOSE_MS} ms into the shutdown`);
  reader.client.destroy();
});
