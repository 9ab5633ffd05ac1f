// Debian's PgBouncer in front of the test's PostgreSQL, in transaction pooling (the usual production
// setting), as an unprivileged foreground process with its configuration and log in a temporary
// folder of its own. CI installs it; PGBOUNCER_PATH overrides where it is.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PGBOUNCER_PATH = process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer';

/** Why PgBouncer cannot be used here, or undefined when it can. CI installs it, so there it always runs. */
export const noPgBouncer: string | undefined =
  existsSync(PGBOUNCER_PATH) || process.env.CI ? undefined : `no pgbouncer at ${PGBOUNCER_PATH} (apt-get install -y pgbouncer, or set PGBOUNCER_PATH)`;

/** Debian's nobody:nogroup: PgBouncer refuses to run as root, so it runs as them when the tests do (as in CI). */
const NOBODY = 65534;

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

/** A running PgBouncer (pool_mode = transaction) on 127.0.0.1:`port`, in front of the PostgreSQL that `url` names, trusting its user. */
export class PgBouncerProcess {
  stderr = '';
  readonly dir = mkdtempSync(join(tmpdir(), 'almoner-pgbouncer-'));
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitedYet = false;
  private readonly child: ChildProcess;
  private readonly target: URL;

  /**
   * `serverIdleTimeout`: seconds a server connection may sit idle before PgBouncer closes it (its
   * server_idle_timeout; 600 by default): short, the pooler holds no session to PostgreSQL while
   * its clients are idle, as the review that found the restore's hole saw.
   */
  constructor(
    url: string,
    readonly port: number,
    { serverIdleTimeout = 600 }: { serverIdleTimeout?: number } = {},
  ) {
    this.target = new URL(url);
    const user = decodeURIComponent(this.target.username) || 'postgres';
    writeFileSync(join(this.dir, 'userlist.txt'), `"${user}" ""\n`);
    writeFileSync(
      join(this.dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=${this.target.hostname} port=${this.target.port || 5432}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${join(this.dir, 'userlist.txt')}`,
        'pool_mode = transaction',
        `server_idle_timeout = ${serverIdleTimeout}`,
        'ignore_startup_parameters = extra_float_digits',
        `logfile = ${join(this.dir, 'pgbouncer.log')}`,
        '',
      ].join('\n'),
    );
    const root = process.getuid?.() === 0;
    if (root) {
      for (const name of ['', 'userlist.txt', 'pgbouncer.ini']) chownSync(join(this.dir, name), NOBODY, NOBODY);
    } else {
      chmodSync(this.dir, 0o700);
    }
    this.child = spawn(PGBOUNCER_PATH, [join(this.dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'], ...(root ? { uid: NOBODY, gid: NOBODY } : {}) });
    this.child.stderr!.setEncoding('utf8').on('data', (s: string) => (this.stderr += s));
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.exitedYet = true;
        resolve({ code, signal });
      }),
    );
    this.child.once('error', (err) => {
      this.stderr += `cannot start ${PGBOUNCER_PATH}: ${err.message}\n`;
      this.exitedYet = true;
    });
  }

  /** `url`'s database, reached through the pooler. */
  url(url: string): string {
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  log(): string {
    const file = join(this.dir, 'pgbouncer.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  }

  /** Waits until PgBouncer accepts connections. */
  async listening(): Promise<this> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (this.exitedYet) assert.fail(`pgbouncer exited early\nstderr: ${this.stderr}\nlog: ${this.log()}`);
      const up = await new Promise<boolean>((resolve) => {
        const socket = connect(this.port, '127.0.0.1', () => resolve(true)).once('error', () => resolve(false));
        socket.once('connect', () => socket.destroy());
      });
      if (up) return this;
      if (Date.now() > deadline) assert.fail(`pgbouncer is not listening on 127.0.0.1:${this.port} after 10 s\nstderr: ${this.stderr}\nlog: ${this.log()}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async stop(): Promise<void> {
    if (this.exitedYet) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.exited;
    clearTimeout(timer);
  }
}
