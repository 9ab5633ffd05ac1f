// Every environment variable Almoner reads, parsed and checked in one place.
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import proxyAddr from '@fastify/proxy-addr';
import { isEmail } from './donations/validate.js';

export type DatabaseLocation =
  | { dialect: 'sqlite'; path: string }
  | { dialect: 'postgres'; url: string; poolMax: number };

export interface Config {
  database: DatabaseLocation;
  port: number;
  host: string;
  logLevel: string;
  /** Creates per second per charity; 0 is no limit. */
  createRateLimit: number;
  /** Rate-limit counters shared by every instance; undefined keeps them per process. */
  redisUrl: string | undefined;
  /** What this deployment's Redis keys and channel begin with: deployments sharing one Redis must each have their own. */
  redisPrefix: string;
  /** Fastify's trustProxy: whom to believe about the client's address (X-Forwarded-For). */
  trustProxy: boolean | string;
  /** Serve HTTPS with this certificate and key (PEM files). */
  tls: { certFile: string; keyFile: string } | undefined;
  /** Prometheus metrics: off, on the API's port (GET /metrics), or on a port of their own. */
  metrics: { enabled: false } | { enabled: true; port: number | undefined };
  /** GET /docs and GET /api/v1/openapi.json. */
  docs: boolean;
  /** The address integrators write to about this server, given as the OpenAPI document's contact (API_CONTACT_EMAIL). */
  apiContactEmail: string | undefined;
  /** Open connections one client address may hold (in each worker process); 0 is no limit. */
  connectionsPerAddress: number;
  /** Processes serving the port (WORKERS): 1 is the server alone; more, a primary process and this many workers. */
  workers: number;
}

export class ConfigError extends Error {}

/** A port another program holds: a moment's trouble (exit 1, which systemd restarts), said alike by one process and under WORKERS. */
export const portTaken = (setting: 'PORT' | 'METRICS_PORT', port: number, host: string) =>
  `${setting} ${port} on ${host} is in use by another program (EADDRINUSE): stop it, or set ${setting} to a free port`;

/** The default database: data/almoner.db in Almoner's own folder, wherever the command is run from (found by the package's name: this code runs from a bundle). */
export const DEFAULT_DATABASE_URL = `sqlite:${join(dirname(createRequire(import.meta.url).resolve('almoner/package.json')), 'data', 'almoner.db')}`;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const DEFAULT_POOL_MAX = 10;

/** DATABASE_URL: `sqlite:<path>` (also `sqlite://<path>`), or `postgres://…` / `postgresql://…`. */
export function parseDatabaseUrl(url: string, poolMax = DEFAULT_POOL_MAX): DatabaseLocation {
  const sqlite = /^sqlite:(?:\/\/)?(.+)$/.exec(url);
  if (sqlite) return { dialect: 'sqlite', path: sqlite[1]! };
  if (/^postgres(ql)?:\/\/./.test(url)) {
    try {
      // A stray % (not followed by two hex digits) passes URL but not the decoding that pg and libpq apply.
      // A # is never part of a connection string: one in a user name or password cut the string there (host "alm").
      if (url.includes('#')) throw new Error('#');
      const parsed = new URL(url);
      const { username, password } = parsed;
      // A / or ? in a user name ended the URL's host there: the password the string holds is not one to the parser (a review).
      if (hiddenPassword(url, parsed)) throw new Error('/ or ?');
      decodeURIComponent(username);
      decodeURIComponent(password);
    } catch {
      throw new ConfigError(
        `DATABASE_URL is not a valid PostgreSQL connection string (got ${JSON.stringify(redactUrl(url))}): ` +
          'a user name or password holding @ : / ? # [ ] % or a space must be percent-encoded (# as %23, % as %25; encodeURIComponent does it).',
      );
    }
    return { dialect: 'postgres', url, poolMax };
  }
  throw new ConfigError(
    `DATABASE_URL must look like sqlite:<path> or postgres://user:password@host:port/database (got ${JSON.stringify(redactUrl(url))}).`,
  );
}

/** Which database this is, for an operator: a SQLite file's absolute path, or a connection string without its password. */
export function describeDatabase(location: DatabaseLocation): string {
  return location.dialect === 'sqlite' ? `sqlite:${location.path === ':memory:' ? ':memory:' : resolve(location.path)}` : redactUrl(location.url);
}

/**
 * Whether a connection string holds a password the URL parser (its reading, `parsed`) does not see:
 * none parsed, no user name either, and a colon between `//` and the last `@`, where that stretch
 * also holds a `/`, `?` or `#` (`postgres://app?x:pw@host/db`, whose host the parser takes to be "app").
 */
function hiddenPassword(url: string, parsed: URL): boolean {
  if (parsed.username !== '' || parsed.password !== '') return false;
  const start = url.indexOf('//') + 2;
  const at = url.lastIndexOf('@');
  if (start < 2 || at < start) return false; // no @ at all: no password (a port's colon is none; until a review, such a URL was refused)
  const userinfo = url.slice(start, at);
  return userinfo.includes(':') && /[/?#]/.test(userinfo);
}

/** Query parameters of a connection string that hold a secret (node-postgres reads them). */
const SECRET_PARAMETERS = ['password', 'sslpassword', 'sslkey'];

/**
 * For messages: a connection string without its password, wherever it is written: after the
 * user (up to the last @, as drivers read it: `p@ss` is one password) or as a query parameter.
 */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    // A user name holding an unencoded / ? or #, which ends the URL's host: what is between // and the last @ holds the password (until 2026-11-29 shown whole; a review).
    if (hiddenPassword(url, parsed)) return url.replace(/^([^/]*\/\/).*@/s, '$1***@');
    // A mistyped URL that is still a URL but has no host (`postgresql:user:pw@h/db`, `postgres:/user:pw@h`):
    // its "password" is not one to the parser, so all between the first colon and the last @ goes (until
    // 2026-11-29 such a URL was shown whole, its password with it: a review).
    if (parsed.host === '' && url.includes('@')) return url.replace(/^([^:]*:).*@/s, '$1***@');
    if (parsed.password !== '') parsed.password = '***';
    for (const name of SECRET_PARAMETERS) if (parsed.searchParams.has(name)) parsed.searchParams.set(name, '***');
    return parsed.href;
  } catch {
    // Not a URL at all: a libpq keyword string ("host=db user=almoner password=…") had its password shown until 2026-11-29 (a review).
    return url
      .replace(/\/\/([^:/@]*):.*@/, '//$1:***@')
      .replace(/([?&](?:ssl)?password=)[^&]*/gi, '$1***')
      .replace(/(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&]*)/gi, '$1***');
  }
}

function parsePort(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 3000;
  const port = Number(raw);
  if (!/^[0-9]+$/.test(raw) || port > 65535) throw new ConfigError(`PORT must be a whole number from 0 to 65535 (got ${JSON.stringify(raw)}).`);
  return port;
}

function parseLogLevel(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'info';
  if (!LOG_LEVELS.includes(raw)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(raw)}).`);
  return raw;
}

function parsePoolMax(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_POOL_MAX;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 1 || n > 1000) throw new ConfigError(`DATABASE_POOL_MAX must be a whole number from 1 to 1000 (got ${JSON.stringify(raw)}).`);
  return n;
}

export function databaseFromEnv(env: NodeJS.ProcessEnv = process.env): DatabaseLocation {
  return parseDatabaseUrl(env.DATABASE_URL || DEFAULT_DATABASE_URL, parsePoolMax(env.DATABASE_POOL_MAX));
}

/** RETENTION_YEARS: how long a donation without Gift Aid keeps its donor's personal data (6 by default). */
export function retentionYearsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.RETENTION_YEARS;
  if (raw === undefined || raw === '') return 6;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 1 || n > 100) throw new ConfigError(`RETENTION_YEARS must be a whole number of years from 1 to 100 (got ${JSON.stringify(raw)}).`);
  return n;
}

function parseCreateRateLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 100;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n > 1_000_000) throw new ConfigError(`CREATE_RATE_LIMIT must be a whole number of requests per second, 0 for no limit (got ${JSON.stringify(raw)}).`);
  return n;
}

function parseRedisUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^rediss?:\/\/./.test(raw)) throw new ConfigError(`REDIS_URL must look like redis://host:6379 (got ${JSON.stringify(redactUrl(raw))}).`);
  return raw;
}

/** REDIS_PREFIX: letters, digits and `_ . -`; `almoner` by default. */
function parseRedisPrefix(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'almoner';
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(raw)) throw new ConfigError(`REDIS_PREFIX must be 1 to 64 letters, digits, '_', '.' or '-' (got ${JSON.stringify(raw)}).`);
  return raw;
}

/**
 * TRUST_PROXY: false, true (believe X-Forwarded-For from anyone: only behind a proxy that
 * overwrites it), or the proxies' addresses and CIDR ranges, separated by commas.
 */
function parseTrustProxy(raw: string | undefined): boolean | string {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  if (/^[0-9a-fA-F.:/, ]+$/.test(raw) && /[.:]/.test(raw)) {
    try {
      proxyAddr.compile(raw.split(',').map((s) => s.trim())); // as the server reads it: 10.0.0.0/33 or "a b" is refused here, not at start
      return raw;
    } catch {
      // refused below, with what a good value looks like
    }
  }
  throw new ConfigError(`TRUST_PROXY must be true, false, or the proxies' addresses/CIDR ranges separated by commas (got ${JSON.stringify(raw)}).`);
}

function parseTls(env: NodeJS.ProcessEnv): Config['tls'] {
  const certFile = env.TLS_CERT_FILE || undefined;
  const keyFile = env.TLS_KEY_FILE || undefined;
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile) throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE go together: set both for HTTPS, or neither.');
  return { certFile, keyFile };
}

/** An on/off setting, on unless set otherwise. */
function isOn(env: NodeJS.ProcessEnv, name: string): boolean {
  const mode = (env[name] ?? '').toLowerCase();
  if (mode === 'off' || mode === 'false' || mode === '0') return false;
  if (mode !== '' && mode !== 'on' && mode !== 'true' && mode !== '1') throw new ConfigError(`${name} must be on or off (got ${JSON.stringify(env[name])}).`);
  return true;
}

function parseMetrics(env: NodeJS.ProcessEnv): Config['metrics'] {
  if (!isOn(env, 'METRICS')) {
    if (env.METRICS_PORT) throw new ConfigError(`METRICS_PORT is set, but METRICS is off: no metrics would be served on ${JSON.stringify(env.METRICS_PORT)}. Unset one of them.`);
    return { enabled: false };
  }
  const raw = env.METRICS_PORT;
  if (raw === undefined || raw === '') return { enabled: true, port: undefined };
  const port = Number(raw);
  if (!/^[0-9]+$/.test(raw) || port < 1 || port > 65535) throw new ConfigError(`METRICS_PORT must be a port from 1 to 65535 (got ${JSON.stringify(raw)}).`);
  if (port === parsePort(env.PORT)) throw new ConfigError(`METRICS_PORT must differ from PORT (both are ${port}): the metrics get a port of their own.`);
  return { enabled: true, port };
}

function parseApiContactEmail(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!isEmail(raw)) throw new ConfigError(`API_CONTACT_EMAIL must be an e-mail address (got ${JSON.stringify(raw)}).`);
  return raw;
}

/** CONNECTIONS_PER_ADDRESS by default: enough for a busy integration, far below a file-descriptor limit. */
export const DEFAULT_CONNECTIONS_PER_ADDRESS = 256;

function parseConnectionsPerAddress(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_CONNECTIONS_PER_ADDRESS;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n > 1_000_000) throw new ConfigError(`CONNECTIONS_PER_ADDRESS must be a whole number of connections, 0 for no limit (got ${JSON.stringify(raw)}).`);
  return n;
}

/** WORKERS: at most this many (each worker is a whole Node.js process, about 100 MB under load). */
export const MAX_WORKERS = 64;

function parseWorkers(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 1;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 1 || n > MAX_WORKERS) throw new ConfigError(`WORKERS must be a whole number of processes from 1 to ${MAX_WORKERS} (got ${JSON.stringify(raw)}).`);
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const database = databaseFromEnv(env);
  const workers = parseWorkers(env.WORKERS);
  // Not the server's, but in the same environment as the daily `retention apply`: a bad value stops the service at its start, not only that run.
  retentionYearsFromEnv(env);
  if (workers > 1 && database.dialect === 'sqlite' && database.path === ':memory:') {
    throw new ConfigError('WORKERS above 1 needs a database every worker opens alike, a SQLite file or PostgreSQL: with sqlite::memory: each would have its own.');
  }
  return {
    database,
    port: parsePort(env.PORT),
    host: env.HOST || '127.0.0.1',
    logLevel: parseLogLevel(env.LOG_LEVEL),
    createRateLimit: parseCreateRateLimit(env.CREATE_RATE_LIMIT),
    redisUrl: parseRedisUrl(env.REDIS_URL),
    redisPrefix: parseRedisPrefix(env.REDIS_PREFIX),
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    tls: parseTls(env),
    metrics: parseMetrics(env),
    docs: isOn(env, 'DOCS'),
    apiContactEmail: parseApiContactEmail(env.API_CONTACT_EMAIL),
    connectionsPerAddress: parseConnectionsPerAddress(env.CONNECTIONS_PER_ADDRESS),
    workers,
  };
}
