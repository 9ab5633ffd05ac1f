// Debian's nginx running the shipped deploy/nginx.conf, as an unprivileged foreground process with
// everything it writes in a temporary folder; only the machine-specific lines are changed (listen
// addresses, certificate paths, upstream port). CI installs nginx; NGINX_PATH overrides where it is.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chownSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { asRoot, Daemon, NOBODY } from './daemon.js';

export const NGINX_PATH = process.env.NGINX_PATH ?? '/usr/sbin/nginx';

/** Why nginx cannot be used here, or undefined when it can. CI installs it, so there it always runs. */
export const noNginx: string | undefined =
  existsSync(NGINX_PATH) || process.env.CI ? undefined : `no nginx at ${NGINX_PATH} (apt-get install -y nginx, or set NGINX_PATH)`;

export const SHIPPED_CONF = fileURLToPath(new URL('../../deploy/nginx.conf', import.meta.url));

/** The access log the shipped file names. */
const SHIPPED_ACCESS_LOG = '/var/log/nginx/almoner-access.log';

export interface Site {
  /** HTTPS on 127.0.0.1 (the shipped file's `listen 443 ssl`). */
  httpsPort: number;
  /** Plain HTTP on 127.0.0.1 (the shipped file's `listen 80`). */
  httpPort: number;
  certFile: string;
  keyFile: string;
  /** Where Almoner listens on 127.0.0.1 (the shipped file's 127.0.0.1:3000). */
  upstreamPort: number;
}

/** Replaces `from` with `to`, failing unless the shipped file has it exactly once. */
function replaceOnce(conf: string, from: string, to: string): string {
  const parts = conf.split(from);
  assert.equal(parts.length, 2, `deploy/nginx.conf should have ${JSON.stringify(from)} exactly once: update the test's substitutions if it changed`);
  return parts.join(to);
}

/** The shipped file for this machine: its own ports on 127.0.0.1 (no IPv6 listens), the test's certificate and Almoner's port. */
export function localise(conf: string, site: Site): string {
  let out = conf;
  out = replaceOnce(out, 'listen 80;', `listen 127.0.0.1:${site.httpPort};`);
  out = replaceOnce(out, 'listen [::]:80;', '');
  out = replaceOnce(out, 'listen 443 ssl;', `listen 127.0.0.1:${site.httpsPort} ssl;`);
  out = replaceOnce(out, 'listen [::]:443 ssl;', '');
  out = replaceOnce(out, '/etc/letsencrypt/live/almoner.example.org/fullchain.pem', site.certFile);
  out = replaceOnce(out, '/etc/letsencrypt/live/almoner.example.org/privkey.pem', site.keyFile);
  out = replaceOnce(out, 'server 127.0.0.1:3000;', `server 127.0.0.1:${site.upstreamPort};`);
  return out;
}

function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { timeout: 20_000 }, (err, _stdout, stderr) => (err ? reject(new Error(`${file} ${args.join(' ')} failed: ${err.message}\n${stderr}`)) : resolve())),
  );
}

/** A self-signed certificate for 127.0.0.1 and localhost, valid for a day, made by the openssl command line. */
export async function selfSignedCertificate(dir: string): Promise<{ certFile: string; keyFile: string; cert: string }> {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  await run('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', keyFile, '-out', certFile,
  ]);
  return { certFile, keyFile, cert: readFileSync(certFile, 'utf8') };
}

function chownTree(path: string, id: number): void {
  chownSync(path, id, id);
  if (statSync(path).isDirectory()) for (const name of readdirSync(path)) chownTree(join(path, name), id);
}

/** A running nginx (master and worker), in `dir`, serving the localised shipped file. */
export class NginxProcess {
  private readonly daemon: Daemon;

  /**
   * `dir` must already hold what `site` names (the certificate and key); nginx's configuration,
   * temporary files, logs and pid file go there too. Not started as root: as root (CI), the folder
   * is handed to nobody:nogroup and nginx runs as them.
   */
  constructor(
    readonly dir: string,
    readonly site: Site,
  ) {
    // The shipped file's access log (in each server), and Debian's (the http block's below), in `dir`.
    writeFileSync(join(dir, 'almoner.conf'), localise(readFileSync(SHIPPED_CONF, 'utf8'), site).replaceAll(SHIPPED_ACCESS_LOG, this.accessLog()));
    // Debian's own nginx.conf writes to /var/log/nginx and /var/lib/nginx: this one keeps to `dir`.
    writeFileSync(
      join(dir, 'nginx.conf'),
      [
        'worker_processes 1;',
        'events { worker_connections 1024; }',
        'http {',
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((name) => `  ${name}_temp_path ${join(dir, name)};`),
        `  access_log ${this.accessLog()};`,
        `  include ${join(dir, 'almoner.conf')};`,
        '}',
        '',
      ].join('\n'),
    );
    if (asRoot()) chownTree(dir, NOBODY);
    const globals = `daemon off; pid ${join(dir, 'nginx.pid')}; error_log ${join(dir, 'error.log')} warn;`;
    // In a process group of its own: the worker can be killed with the master if it must come to that.
    this.daemon = new Daemon(NGINX_PATH, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf'), '-g', globals], true);
  }

  /** Where nginx writes its access log. */
  accessLog(): string {
    return join(this.dir, 'access.log');
  }

  errorLog(): string {
    const file = join(this.dir, 'error.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  }

  /** Waits until nginx accepts connections on its HTTPS port. */
  async listening(): Promise<this> {
    await this.daemon.listening(this.site.httpsPort, () => `error.log: ${this.errorLog()}`);
    return this;
  }

  /** SIGTERM (nginx's fast shutdown, which stops its worker too); the whole process group is killed after 5 s. */
  stop(): Promise<void> {
    return this.daemon.stop();
  }
}
