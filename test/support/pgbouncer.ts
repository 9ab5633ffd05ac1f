// Debian's PgBouncer in front of the test's PostgreSQL, in transaction pooling (the usual production
// setting), as an unprivileged foreground process with its configuration and log in a temporary
// folder of its own. CI installs it; PGBOUNCER_PATH overrides where it is.
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { asRoot, Daemon, NOBODY } from './daemon.js';

export const PGBOUNCER_PATH = process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer';

/** Why PgBouncer cannot be used here, or undefined when it can. CI installs it, so there it always runs. */
export const noPgBouncer: string | undefined =
  existsSync(PGBOUNCER_PATH) || process.env.CI ? undefined : `no pgbouncer at ${PGBOUNCER_PATH} (apt-get install -y pgbouncer, or set PGBOUNCER_PATH)`;

/** A running PgBouncer (pool_mode = transaction) on 127.0.0.1:`port`, in front of the PostgreSQL that `url` names, trusting its user. */
export class PgBouncerProcess {
  readonly dir = mkdtempSync(join(tmpdir(), 'almoner-pgbouncer-'));
  private readonly daemon: Daemon;
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
    // PgBouncer refuses to run as root: as root (CI) it runs as nobody, its folder theirs.
    if (asRoot()) {
      for (const name of ['', 'userlist.txt', 'pgbouncer.ini']) chownSync(join(this.dir, name), NOBODY, NOBODY);
    } else {
      chmodSync(this.dir, 0o700);
    }
    this.daemon = new Daemon(PGBOUNCER_PATH, [join(this.dir, 'pgbouncer.ini')]);
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
    await this.daemon.listening(this.port, () => `log: ${this.log()}`);
    return this;
  }

  stop(): Promise<void> {
    return this.daemon.stop();
  }
}
