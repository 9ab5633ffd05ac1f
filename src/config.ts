// Every environment variable Almoner reads, parsed and checked in one place.

export type DatabaseLocation = { dialect: 'sqlite'; path: string };

export interface Config {
  database: DatabaseLocation;
  port: number;
  host: string;
  logLevel: string;
}

export class ConfigError extends Error {}

export const DEFAULT_DATABASE_URL = 'sqlite:./data/almoner.db';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** DATABASE_URL: `sqlite:<path>` (also `sqlite://<path>`). */
export function parseDatabaseUrl(url: string): DatabaseLocation {
  const sqlite = /^sqlite:(?:\/\/)?(.+)$/.exec(url);
  if (sqlite) return { dialect: 'sqlite', path: sqlite[1]! };
  throw new ConfigError(`DATABASE_URL must look like sqlite:<path> (got ${JSON.stringify(redactUrl(url))}).`);
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

export function databaseFromEnv(env: NodeJS.ProcessEnv = process.env): DatabaseLocation {
  return parseDatabaseUrl(env.DATABASE_URL || DEFAULT_DATABASE_URL);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    database: databaseFromEnv(env),
    port: parsePort(env.PORT),
    host: env.HOST || '127.0.0.1',
    logLevel: parseLogLevel(env.LOG_LEVEL),
  };
}
