// Another program the tests start in the foreground (nginx, PgBouncer): its standard error kept,
// its exit awaited, its port waited for, and its stop; and the free ports they are given.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';

/** Debian's nobody:nogroup: what such a program runs as when the tests run as root (as in CI). */
export const NOBODY = 65534;

/** Whether the tests run as root (as in CI). */
export const asRoot = (): boolean => process.getuid?.() === 0;

/**
 * A port nobody listens on right now: the kernel's pick, or one of TEST_PORT_RANGE (`47300-47399`)
 * where the machine's ports are shared out among those running tests on it.
 */
export async function freePort(): Promise<number> {
  const range = /^(\d+)-(\d+)$/.exec(process.env.TEST_PORT_RANGE ?? '');
  const tries = range ? Array.from({ length: Number(range[2]) - Number(range[1]) + 1 }, (_, i) => Number(range[1]) + i) : [0];
  for (const port of tries.sort(() => Math.random() - 0.5)) {
    const got = await new Promise<number | undefined>((resolve) => {
      const server = createServer().once('error', () => resolve(undefined));
      server.listen(port, '127.0.0.1', () => {
        const { port: taken } = server.address() as AddressInfo;
        server.close(() => resolve(taken));
      });
    });
    if (got !== undefined) return got;
  }
  throw new Error(`no free port in TEST_PORT_RANGE ${process.env.TEST_PORT_RANGE}`);
}

/** A program started in the foreground, as nobody:nogroup when the tests run as root. */
export class Daemon {
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitedYet = false;
  private readonly child: ChildProcess;

  /** `group`: in a process group of its own, all of which a stop that must kill kills (nginx's master and worker). */
  constructor(
    readonly path: string,
    args: string[],
    private readonly group = false,
  ) {
    const options: SpawnOptions = { stdio: ['ignore', 'ignore', 'pipe'], detached: group, ...(asRoot() ? { uid: NOBODY, gid: NOBODY } : {}) };
    this.child = spawn(path, args, options);
    this.child.stderr!.setEncoding('utf8').on('data', (s: string) => (this.stderr += s));
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.exitedYet = true;
        resolve({ code, signal });
      }),
    );
    this.child.once('error', (err) => {
      this.stderr += `cannot start ${path}: ${err.message}\n`;
      this.exitedYet = true; // no 'exit' follows a failed spawn
    });
  }

  /** Waits until it accepts connections on 127.0.0.1:`port`; fails after 10 s, or if it exits, with `detail()` (its log). */
  async listening(port: number, detail: () => string): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (this.exitedYet) assert.fail(`${this.path} exited early\nstderr: ${this.stderr}\n${detail()}`);
      const up = await new Promise<boolean>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => resolve(true)).once('error', () => resolve(false));
        socket.once('connect', () => socket.destroy());
      });
      if (up) return;
      if (Date.now() > deadline) assert.fail(`${this.path} is not listening on 127.0.0.1:${port} after 10 s\nstderr: ${this.stderr}\n${detail()}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** SIGTERM; SIGKILL after 5 s (to its whole process group, if it has one). */
  async stop(): Promise<void> {
    if (this.exitedYet || this.child.pid === undefined) return;
    this.child.kill('SIGTERM');
    const pid = this.child.pid;
    const timer = setTimeout(() => {
      try {
        if (this.group) process.kill(-pid, 'SIGKILL');
        else this.child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }, 5_000);
    await this.exited;
    clearTimeout(timer);
  }
}
