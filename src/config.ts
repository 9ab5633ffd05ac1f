// Every environment variable Almoner reads, parsed and checked in one place.

export type DatabaseLocation =
  | { dialect: 'sqlite'; path: string }
  | { dialect: 'postgres'; url: string; poolMax: number };

export interface Config {
  database: DatabaseLocation;
  port: number;
  host: string;
  logLevel: string;
}

export class ConfigError extends Error {}

export const DEFAULT_DATABASE_URL = 'sqlite:./data/almoner.db';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const DEFAULT_POOL_MAX = 10;

/** DATABASE_URL: `sqlite:<path>` (also `sqlite://<path>`), or `postgres://…` / `postgresql://…`. */
export function parseDatabaseUrl(url: string, poolMax = DEFAULT_POOL_MAX): DatabaseLocation {
  const sqlite = /^sqlite:(?:\/\/)?(.+)$/.exec(url);
  if (sqlite) return { dialect: 'sqlite', path: sqlite[1]! };
  if (/^postgres(ql)?:\/\/./.test(url)) {
    try {
      new URL(url);
    } catch {
      throw new ConfigError(`DATABASE_URL is not a valid PostgreSQL connection string (got ${JSON.stringify(redactUrl(url))}).`);
    }
    return { dialect: 'postgres', url, poolMax };
  }
  throw new ConfigError(
    `DATABASE_URL must look like sqlite:<path> or postgres://user:password@host:port/database (got ${JSON.stringify(redactUrl(url))}).`,
  );
}

/** For messages: a connection string without its password. */
function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
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

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    database: databaseFromEnv(env),
    port: parsePort(env.PORT),
    host: env.HOST || '127.0.0.1',
    logLevel: parseLogLevel(env.LOG_LEVEL),
  };
}
