// A TCP proxy between Almoner and its database that a test can cut, to stage an outage
// without stopping the shared server.
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

type Mode = 'open' | 'reset' | 'blackhole';

/** The statement that writes a batch of creates and its commit token, and commits by itself (donation-writes.ts, commitStatement). */
const COMMIT = Buffer.from('with "commit" as (insert into "commit_tokens"');

export class TcpProxy {
  private readonly server: Server;
  private mode: Mode = 'open';
  private readonly pairs = new Set<[Socket, Socket]>();
  private readonly frozen = new Set<Socket>();
  private paused = false;
  /** Bytes held while paused, in order, to pass on at resume(). */
  private held: Array<() => void> = [];
  private dropEvery = 0;
  private dropFailures = false;
  private delayMs = 0;
  private commitsSeen = 0;
  private cutAfterMs: number | undefined;
  /** Pieces of SQL watched, and how many statements sent held each. */
  private readonly watched = new Map<string, { piece: Buffer; sent: number }>();
  /** Statements (a piece of their SQL) whose answers are held back, and for how long. */
  private slowed: { statement: Buffer; ms: number } | undefined;
  /**
   * With a commit's answer dropped, every other connection dies too, as when a firewall's or NAT's
   * state is lost: the client learns it only when it next sends on one (which is then closed).
   */
  private dropEveryConnection = false;
  private awayAfterDropMs = 0;
  /** Connections that died that way: the next thing their client sends closes them. */
  private readonly stale = new Set<Socket>();
  /** How many answers to a batch's commit have been dropped. */
  droppedCommitAnswers = 0;
  /** How many connections have been accepted so far. */
  accepted = 0;
  /** How many connections terminateAfterAnswerTo has ended. */
  terminated = 0;
  /** Connections after the first `after` wait `ms` before they reach the database (delayConnections). */
  private connectionDelay: { after: number; ms: number } | undefined;
  /** A statement (a piece of its SQL) after whose first message of `type` its connection ends with a FATAL error (terminateAtMessage). */
  private endingAt: { statement: Buffer; type: number; reset: boolean } | undefined;
  /** Connections after the first `after` are refused, reset at once, until this is undefined again (refuseConnections). */
  private refusedAfter: number | undefined;
  /** A statement (a piece of its SQL) whose answer ends its connection with a FATAL error (terminateAfterAnswerTo). */
  private terminating: Buffer | undefined;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {
    this.server = createServer((client) => this.accept(client));
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  /**
   * reset: every connection is closed at once and new ones are refused, as when the database stops.
   * blackhole: bytes stop flowing and connections hang, as when the network drops packets; those
   * connections stay dead for good, even after restore(), as real ones would.
   */
  cut(mode: 'reset' | 'blackhole'): void {
    this.mode = mode;
    for (const pair of this.pairs) {
      if (mode === 'reset') pair.forEach((s) => s.destroy());
      else this.freeze(pair[0], pair[1]);
    }
    this.pairs.clear();
  }

  /**
   * Lets every n-th batch's commit (the statement that commits by itself) reach the database, then drops the
   * connection when its answer comes back, if it says the statement committed, so the client never learns that
   * it was (0: off). A statement that failed (a key already stored) committed nothing: its answer is let through,
   * unless `failuresToo`, when its connection is dropped all the same. `everyConnection`: the other open
   * connections die too, each noticed when next used. `thenAwayMs`: the database is away that long after each
   * drop, every connection closed and new ones refused, as one restarting.
   */
  dropCommitAnswers(every: number, { failuresToo = false, everyConnection = false, thenAwayMs = 0 } = {}): void {
    this.dropEvery = every;
    this.dropFailures = failuresToo;
    this.dropEveryConnection = everyConnection;
    this.awayAfterDropMs = thenAwayMs;
  }

  /**
   * Once: drops the connection `ms` after the next batch's commit (a statement that commits by itself) has gone through
   * to the database, whether or not it has been answered, as a network that fails mid-statement.
   */
  cutAfterCommit(ms: number): void {
    this.cutAfterMs = ms;
  }

  /** From now on, counts the statements sent whose SQL holds `piece`: how many so far, when called. */
  countStatements(piece: string): () => number {
    const watch = this.watched.get(piece) ?? { piece: Buffer.from(piece), sent: 0 };
    this.watched.set(piece, watch);
    const from = watch.sent;
    return () => watch.sent - from;
  }

  /** Delays the answers to statements whose SQL holds `statement` by `ms` (undefined: none), as a query that takes that long. */
  slowAnswersTo(statement: string | undefined, ms = 0): void {
    this.slowed = statement === undefined ? undefined : { statement: Buffer.from(statement), ms };
  }

  /** Delays every answer from the database by `ms` (0: none), as a database that has slowed down. */
  slow(ms: number): void {
    this.delayMs = ms;
  }

  /** Connections accepted after the first `after` reach the database `ms` late, as over a slow network or to a busy server: their client waits that long to connect. */
  delayConnections(after: number, ms: number): void {
    this.connectionDelay = { after, ms };
  }

  /** New connections after the first `after` are reset at once, as by a database at its connection limit or restarting, while open ones go on (undefined: none again). */
  refuseConnections(after: number | undefined): void {
    this.refusedAfter = after;
  }

  /**
   * Once: the next statement sent whose SQL holds `statement` is answered, and in the same read its
   * connection's FATAL error (`terminating connection due to administrator command`, as
   * pg_terminate_backend sends it), then the connection closes: the client learns of it between
   * that statement and its next, its query answered.
   */
  terminateAfterAnswerTo(statement: string): void {
    this.terminating = Buffer.from(statement);
  }

  /**
   * Once: on the next connection to send a statement whose SQL holds `statement`, the database's
   * answers pass until the first message `at`, which is followed at once by the FATAL error
   * pg_terminate_backend sends, and the connection closes. At a CommandComplete the client never
   * gets the ReadyForQuery after it (a cursor: the last batch's end, its rows not yet handed over);
   * at a PortalSuspended, a cursor's batch is whole and the next is never read. With `reset`, no
   * FATAL: the connection is reset (a TCP RST) just after the message, so the client's next write
   * fails (`write EPIPE`) before it reads anything more, as a terminated session's can.
   */
  terminateAtMessage(statement: string, at: 'CommandComplete' | 'PortalSuspended', { reset = false } = {}): void {
    this.endingAt = { statement: Buffer.from(statement), type: at === 'CommandComplete' ? 0x43 : 0x73, reset };
  }

  /** Holds every byte both ways, on open connections and new ones, as a stalled server does; resume() passes them on. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    const held = this.held;
    this.held = [];
    for (const pass of held) pass();
  }

  restore(): void {
    this.mode = 'open';
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) pair.forEach((s) => s.destroy());
    for (const s of this.frozen) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    client.on('error', () => {});
    this.accepted++;
    if (this.mode === 'reset' || (this.refusedAfter !== undefined && this.accepted > this.refusedAfter)) return void client.destroy();
    if (this.mode === 'blackhole') return void this.frozen.add(client.pause());
    const delay = this.connectionDelay;
    if (delay && this.accepted > delay.after) {
      client.pause();
      return void setTimeout(() => client.destroyed || this.forward(client.resume()), delay.ms);
    }
    this.forward(client);
  }

  private forward(client: Socket): void {
    const upstream = connect(this.targetPort, this.targetHost);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    const pair: [Socket, Socket] = [client, upstream];
    this.pairs.add(pair);
    let dropNextAnswer = false;
    let slowNextAnswer = 0;
    let heldAnswer: Buffer[] | undefined;
    let terminateAfterAnswer = false;
    /** terminateAtMessage armed on this connection: the message type to end at, and the answers' bytes not yet passed on (a piece of a message). */
    let untilComplete: { type: number; reset: boolean; rest: Buffer } | undefined;
    client.on('data', (chunk: Buffer) => {
      if (this.stale.delete(client)) return void pair.forEach((s) => s.destroy());
      if (this.endingAt && chunk.includes(this.endingAt.statement)) {
        untilComplete = { type: this.endingAt.type, reset: this.endingAt.reset, rest: Buffer.alloc(0) };
        this.endingAt = undefined;
      }
      if (this.terminating && chunk.includes(this.terminating)) {
        terminateAfterAnswer = true;
        this.terminating = undefined;
      }
      if (this.dropEvery > 0 && chunk.includes(COMMIT)) dropNextAnswer = ++this.commitsSeen % this.dropEvery === 0;
      if (this.slowed && chunk.includes(this.slowed.statement)) slowNextAnswer = this.slowed.ms;
      for (const watch of this.watched.values()) if (chunk.includes(watch.piece)) watch.sent++;
      if (this.paused) return void this.held.push(() => upstream.write(chunk));
      upstream.write(chunk);
      if (this.cutAfterMs !== undefined && chunk.includes(COMMIT)) {
        setTimeout(() => pair.forEach((s) => s.destroy()), this.cutAfterMs);
        this.cutAfterMs = undefined;
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (untilComplete) {
        // Whole messages pass; at the first of the type awaited, the FATAL follows it and the connection ends.
        const bytes = Buffer.concat([untilComplete.rest, chunk]);
        let at = 0;
        while (at + 5 <= bytes.length && at + 1 + bytes.readUInt32BE(at + 1) <= bytes.length) {
          const end = at + 1 + bytes.readUInt32BE(at + 1);
          if (bytes[at] === untilComplete.type) {
            if (untilComplete.reset) client.write(bytes.subarray(0, end), () => client.resetAndDestroy());
            else client.end(Buffer.concat([bytes.subarray(0, end), TERMINATED]));
            this.terminated++;
            return void upstream.destroy();
          }
          at = end;
        }
        client.write(bytes.subarray(0, at));
        untilComplete.rest = bytes.subarray(at);
        return;
      }
      if (terminateAfterAnswer && holdsMessage(chunk, 0x5a)) {
        // The answer, up to its ReadyForQuery ('Z'), then the FATAL, in one write: pg reads them together.
        client.end(Buffer.concat([chunk, TERMINATED]));
        this.terminated++;
        return void upstream.destroy();
      }
      if (this.paused) return void this.held.push(() => client.write(chunk));
      if (this.delayMs > 0) return void setTimeout(() => client.write(chunk), this.delayMs); // in order: one delay for all
      if (heldAnswer) return void heldAnswer.push(chunk); // the rest of a held answer, in order
      if (slowNextAnswer > 0) {
        const held = (heldAnswer = [chunk]);
        setTimeout(() => {
          heldAnswer = undefined;
          for (const c of held) client.write(c);
        }, slowNextAnswer);
        slowNextAnswer = 0;
        return;
      }
      if (dropNextAnswer && !this.dropFailures && holdsMessage(chunk, 0x45)) dropNextAnswer = false; // 'E': an ErrorResponse
      if (!dropNextAnswer) return void client.write(chunk);
      // The database has answered the commit, so it is committed; the client never hears so.
      this.droppedCommitAnswers++;
      client.destroy();
      upstream.destroy();
      if (this.dropEveryConnection) for (const [otherClient] of this.pairs) if (otherClient !== client) this.stale.add(otherClient);
      if (this.awayAfterDropMs > 0) {
        this.cut('reset');
        setTimeout(() => this.restore(), this.awayAfterDropMs);
      }
    });
    // One side gone, the other goes too, as through a real proxy (else the far side's connection is left open).
    client.on('close', () => {
      this.pairs.delete(pair);
      upstream.destroy();
    });
    upstream.on('close', () => {
      this.pairs.delete(pair);
      client.destroy();
    });
  }

  private freeze(a: Socket, b: Socket): void {
    for (const s of [a, b]) {
      s.pause();
      s.removeAllListeners('data');
      this.frozen.add(s);
    }
  }
}

/** Whether PostgreSQL's answer in `chunk` (whole messages: a type byte, then their length) holds a message of this type. */
function holdsMessage(chunk: Buffer, type: number): boolean {
  for (let at = 0; at + 5 <= chunk.length; at += 1 + chunk.readUInt32BE(at + 1)) {
    if (chunk[at] === type) return true;
  }
  return false;
}

/** PostgreSQL's ErrorResponse as pg_terminate_backend ends a session with it: FATAL, SQLSTATE 57P01. */
const TERMINATED = (() => {
  const fields = Buffer.from('SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0');
  const head = Buffer.alloc(5);
  head[0] = 0x45; // 'E'
  head.writeUInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
})();

/** A proxy in front of a PostgreSQL test database, and the connection string that goes through it. */
export async function proxyFor(databaseUrl: string): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(databaseUrl);
  const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
  const viaProxy = new URL(databaseUrl);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(await proxy.listen());
  return { proxy, url: viaProxy.href };
}
