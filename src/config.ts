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
  /** Creates one charity may have in flight at once in one server process; 0 is no limit. */
  createConcurrencyLimit: number;
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
  /** PostgreSQL: how often each server process refreshes its row in almoner_instances (INSTANCE_REFRESH_MS; store/instances.ts). */
  instanceRefreshMs?: number;
}

export class ConfigError extends Error {}

/** A port another program holds: a moment's trouble (exit 1, which systemd restarts), said alike by one process and under WORKERS. */
export const portTaken = (setting: 'PORT' | 'METRICS_PORT', port: number, host: string) =>
  `${setting} ${port} on ${host} is in use by another program (EADDRINUSE): stop it, or set ${setting} to a free port`;

/** The default database: data/almoner.db in Almoner's own folder, wherever the command is run from (found by the package's name: this code runs from a bundle). */
export const DEFAULT_DATABASE_URL = `sqlite:${join(dirname(createRequire(import.meta.url).resolve('almoner/package.json')), 'data', 'almoner.db')}`;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const DEFAULT_POOL_MAX = 10;

/** Why no command takes `sqlite::memory:`, and what to do; `serve` says it too, in place of how to create the first charity. */
export const IN_MEMORY =
  "sqlite::memory: is a database of one process alone, empty at each start and gone when it ends: no command can reach a server's, and what one made would be lost as it ended. " +
  "Set DATABASE_URL to the server's database (a SQLite file, sqlite:/path/almoner.db, or PostgreSQL).";

/** DATABASE_URL: `sqlite:<path>` (also `sqlite://<path>`), or `postgres://…` / `postgresql://…`. */
export function parseDatabaseUrl(url: string, poolMax = DEFAULT_POOL_MAX): DatabaseLocation {
  // What was typed, its password hidden: until 2026-11-29 a rewritten URL, " POSTGRES://…" shown as "postgres://…" (a review).
  const shown = JSON.stringify(redactUrl(url));
  // A blank before or after is read as part of a SQLite file's name, or of PostgreSQL's database name ("postgres " does not exist).
  const blank = blankEnds(url);
  if (blank) throw new ConfigError(`DATABASE_URL ${blank} (got ${shown}): ${blank === 'is blank' ? 'unset it for the default database, or give one' : 'remove it'}.`);
  const sqlite = /^sqlite:(?:\/\/)?(.+)$/.exec(url);
  if (sqlite) return { dialect: 'sqlite', path: sqlite[1]! };
  if (/^postgres(ql)?:\/\/./.test(url)) {
    const fault = urlFault(url, { socketForm: true, port: 5432 });
    if (fault) throw new ConfigError(`DATABASE_URL is not a valid PostgreSQL connection string (got ${shown}): ${fault}`);
    return { dialect: 'postgres', url, poolMax };
  }
  throw new ConfigError(
    `DATABASE_URL must look like sqlite:<path> or postgres://user:password@host:port/database (got ${shown})` +
      (/^file:/i.test(url) ? ': a SQLite file is given as sqlite:<path>.' : schemeCase(url, /^(?:sqlite|postgres(?:ql)?):/i)),
  );
}

/** A blank character, named for an operator. */
const blankName = (c: string): string => (c === ' ' ? 'a space' : c === '\t' ? 'a tab' : c === '\n' || c === '\r' ? 'a line break' : 'a blank');

/** What is wrong with a value that begins or ends with a blank (a space, tab or line break), or '' for none. */
function blankEnds(value: string): string {
  if (value.trim() === '') return 'is blank';
  const first = /^\s/.test(value) ? blankName(value[0]!) : '';
  const last = /\s$/.test(value) ? blankName(value[value.length - 1]!) : '';
  return first && last ? `begins with ${first} and ends with ${last}` : first ? `begins with ${first}` : last ? `ends with ${last}` : '';
}

/** For a URL refused as not of the form wanted: '.', or what is wrong, where it is a scheme written in capitals (`POSTGRES://`) or a blank before it. */
function schemeCase(url: string, schemes: RegExp): string {
  const said: string[] = [];
  if (/^\s/.test(url)) said.push(`it begins with ${blankName(url[0]!)}: remove it`);
  const scheme = schemes.exec(url.trimStart())?.[0];
  if (scheme && scheme !== scheme.toLowerCase()) said.push(`the scheme is written in lower case (${scheme.toLowerCase()}, not ${scheme})`);
  return said.length > 0 ? `: ${said.join('; ')}.` : '.';
}

const PERCENT_ENCODING = 'a user name or password holding @ : / ? # [ ] % or a space must be percent-encoded (# as %23, % as %25; encodeURIComponent does it).';

/**
 * What is wrong with `url` (`postgres://…`, `redis://…`) as its driver will read it, or '' for nothing:
 * node-postgres (pg-connection-string) and ioredis both read it with WHATWG's URL and then decode its
 * user and password, and fail at start (exit 1: "Invalid URL", "URI malformed") on what this refuses.
 * `socketForm`: an empty host after the user is taken, as pg-connection-string takes it (with a stand-in
 * host): `postgres://user@/database?host=/var/run/postgresql`, a Unix socket (refused until 2026-11-29,
 * blaming percent-encoding: a review).
 */
function urlFault(url: string, how: { socketForm: boolean; port: number }): string {
  // A # is never part of a connection string: one in a user name or password cut the string there (host "alm").
  if (url.includes('#')) return PERCENT_ENCODING;
  const read = how.socketForm ? readPostgresUrl(url) : URL.canParse(url) ? { parsed: new URL(url) } : undefined;
  if (!read) return authorityFault(url, how) || PERCENT_ENCODING;
  const { parsed } = read;
  // A / or ? in a user name ended the URL's host there: the password the string holds is not one to the parser (a review).
  if (hiddenPassword(url, parsed)) return PERCENT_ENCODING;
  if (parsed.port === '0') return authorityFault(url, how) || PERCENT_ENCODING;
  try {
    // A stray % (not followed by two hex digits) passes URL but not the decoding that pg, libpq and ioredis apply.
    decodeURIComponent(parsed.username);
    decodeURIComponent(parsed.password);
  } catch {
    return PERCENT_ENCODING;
  }
  return '';
}

/**
 * A postgres:// URL as node-postgres (pg-connection-string) reads it: by WHATWG's URL, or in a Unix
 * socket's form, with no host after the user (`postgres://user@/database?host=/var/run/postgresql`),
 * with a stand-in host as pg-connection-string reads it (`noHost`). Undefined: it is no such URL.
 */
export function readPostgresUrl(url: string): { parsed: URL; noHost: boolean } | undefined {
  if (URL.canParse(url)) return { parsed: new URL(url), noHost: false };
  const standIn = url.replace('@/', '@socket.invalid/');
  return url.includes('@/') && URL.canParse(standIn) ? { parsed: new URL(standIn), noHost: true } : undefined;
}

/**
 * A URL refused by WHATWG's URL (or with port 0) because of its host or port, said, or '' when its
 * user name or password is to blame: the host and port are after the last @ of the part between `//`
 * and the first / ? or # (or after `//` without an @), unless an @ comes later, past a / ? or # that
 * an unencoded user name or password holds.
 */
function authorityFault(url: string, { socketForm, port: usual }: { socketForm: boolean; port: number }): string {
  const start = url.indexOf('//');
  if (start < 0) return '';
  const rest = url.slice(start + 2);
  const authority = /^[^/?#]*/.exec(rest)![0];
  if (!authority.includes('@') && rest.slice(authority.length).includes('@')) return '';
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1);
  if ((hostPort.match(/:/g) ?? []).length > 1 && !hostPort.startsWith('[')) return `an IPv6 address is written in brackets: [::1]:${usual}.`;
  const [, host = '', port] = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/s.exec(hostPort) ?? [];
  if (host === '' && authority.includes('@')) {
    return `there is no host after the @${socketForm ? ' (for a Unix socket, the host is left out with its port, and given as a parameter: postgres://user@/database?host=/var/run/postgresql)' : ''}.`;
  }
  if (port !== undefined && port !== '' && !(/^[0-9]+$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) return 'the port must be a whole number from 1 to 65535.';
  return '';
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
 * For messages: a connection string as it was typed (until 2026-11-29, as the URL parser wrote it
 * again: a review), without its password, wherever it is written: after the user (up to the last @,
 * as drivers read it: `p@ss` is one password) or as a query parameter.
 */
function redactUrl(url: string): string {
  // A parameter by its name as the driver reads it, decoded: `pass%77ord=` is a password too (a review).
  const hidden = hideUserPassword(url).replace(/([?&])([^=&#]*)=([^&]*)/g, (all, start: string, name: string) =>
    SECRET_PARAMETERS.includes(decodedName(name).toLowerCase()) ? `${start}${name}=***` : all,
  );
  // Not a URL at all: a libpq keyword string ("host=db user=almoner password=…") had its password shown until 2026-11-29 (a review).
  return URL.canParse(url) ? hidden : hidden.replace(/(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&]*)/gi, '$1***');
}

/** A query parameter's name, decoded as a URL's reader decodes it (as typed, if it cannot be). */
function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' '));
  } catch {
    return name;
  }
}

/** `url` as typed, without the password in its user part. */
function hideUserPassword(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL (a # ? or / in a password, a port out of range, the socket form's empty host): all from the user's colon to the last @.
    return url.includes('//') ? url.replace(/\/\/([^:/@]*):.*@/s, '//$1:***@') : url.replace(/^([^:]*:).*@/s, '$1***@');
  }
  // A user name holding an unencoded / ? or #, which ends the URL's host: what is between // and the last @ holds the password (until 2026-11-29 shown whole; a review).
  if (hiddenPassword(url, parsed)) return url.replace(/^([^/]*\/\/).*@/s, '$1***@');
  // A mistyped URL that is still a URL but has no host (`postgresql:user:pw@h/db`, `postgres:/user:pw@h`):
  // its "password" is not one to the parser, so all between the first colon and the last @ goes (until
  // 2026-11-29 such a URL was shown whole, its password with it: a review).
  if (parsed.host === '' && url.includes('@')) return url.replace(/^([^:]*:).*@/s, '$1***@');
  if (parsed.password === '') return url;
  // The parser's password, as typed: after the user's colon, up to the last @ before the host.
  const typed = /^([^/]*\/\/[^:/?#]*:)[^/?#]*@/s;
  if (typed.test(url)) return url.replace(typed, '$1***@');
  parsed.password = '***'; // typed otherwise than that reads (a tab in it, which the parser drops): as the parser writes it again
  return parsed.href;
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

function parseCreateConcurrencyLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_CREATES_IN_FLIGHT;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n > 1_000_000) throw new ConfigError(`CREATE_CONCURRENCY_LIMIT must be a whole number of requests, 0 for no limit (got ${JSON.stringify(raw)}).`);
  return n;
}

/**
 * REDIS_URL: `redis://…` or `rediss://…`, as ioredis will read it. A # ? or / in the password, a
 * stray %, or a port out of range was found only by ioredis, when serve opened it: "almoner: Invalid
 * URL" with exit 1, not naming REDIS_URL, which systemd restarts for good (until 2026-11-29: a review).
 */
function parseRedisUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  const shown = JSON.stringify(redactUrl(raw));
  if (!/^rediss?:\/\/./.test(raw)) throw new ConfigError(`REDIS_URL must look like redis://host:6379 (got ${shown})${schemeCase(raw, /^rediss?:/i)}`);
  const fault = urlFault(raw, { socketForm: false, port: 6379 });
  if (fault) throw new ConfigError(`REDIS_URL is not a valid Redis URL (got ${shown}): ${fault}`);
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

/** CREATE_CONCURRENCY_LIMIT's default: creates one charity may have in flight at once in one server process (http/throttle.ts, CreatesInFlight). */
export const DEFAULT_CREATES_IN_FLIGHT = 100;

/** WORKERS: at most this many (each worker is a whole Node.js process, about 100 MB under load). */
export const MAX_WORKERS = 64;

/** INSTANCE_REFRESH_MS's default. */
export const DEFAULT_INSTANCE_REFRESH_MS = 2000;

/**
 * INSTANCE_REFRESH_MS: how often a server or a command on PostgreSQL tells the database it runs
 * (store/instances.ts), 2000 by default. A restore waits five of them for a process killed without a
 * clean shutdown to be forgotten; tests shorten it instead of waiting 10 s.
 */
export function parseInstanceRefreshMs(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_INSTANCE_REFRESH_MS;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 50 || n > 60_000) throw new ConfigError(`INSTANCE_REFRESH_MS must be a whole number of milliseconds from 50 to 60000 (got ${JSON.stringify(raw)}).`);
  return n;
}

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
    createConcurrencyLimit: parseCreateConcurrencyLimit(env.CREATE_CONCURRENCY_LIMIT),
    redisUrl: parseRedisUrl(env.REDIS_URL),
    redisPrefix: parseRedisPrefix(env.REDIS_PREFIX),
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    tls: parseTls(env),
    metrics: parseMetrics(env),
    docs: isOn(env, 'DOCS'),
    apiContactEmail: parseApiContactEmail(env.API_CONTACT_EMAIL),
    connectionsPerAddress: parseConnectionsPerAddress(env.CONNECTIONS_PER_ADDRESS),
    workers,
    instanceRefreshMs: parseInstanceRefreshMs(env.INSTANCE_REFRESH_MS),
  };
}
