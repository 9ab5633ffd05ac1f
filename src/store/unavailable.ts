// Which failures mean "the database cannot answer right now" (a 503 the client may retry),
// as opposed to a fault in Almoner (a 500). Each driver says it its own way.
import { RESTORING_CODE } from './restoring.js';

// EMFILE/ENFILE: no file descriptor left for a new PostgreSQL connection's socket (the process's or the
// system's open-files limit, reached by many client connections); EADDRNOTAVAIL: no local port left.
// Nothing was sent, and a connection closing frees one: a 503 to retry, not a 500.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EMFILE', 'ENFILE', 'EADDRNOTAVAIL']);

// PostgreSQL SQLSTATEs: class 08 connection exceptions, 53 insufficient resources,
// 57P01-57P03 server shutting down or starting up.
const PG_STATES = /^(08...|53...|57P0[123])$/;

// Statements PostgreSQL refuses for a moment, storing nothing, on a connection that still stands:
// 25006 a read-only database (a hot standby after a failover, default_transaction_read_only during
// maintenance), 57014 a statement cancelled (statement_timeout, pg_cancel_backend), 55P03 a lock
// not granted (lock_timeout), 42501 a privilege the database user lacks (revoked while the server
// runs: a grant puts it right, as a failover's end does a read-only database's). A 503 to retry:
// each was a 500, after its batch was tried again in halves.
const PG_REFUSED_FOR_NOW = /^(25006|57014|55P03|42501)$/;

// PostgreSQL's refusals of a new connection for what DATABASE_URL says, which no wait or restart mends:
// 3D000 no such database, 28000 a role that does not exist or may not log in (or pg_hba.conf lets no
// such connection in), 28P01 a wrong password, and 42501 as a FATAL error, which only a connection's
// start meets: a user without CONNECT on the database (42501 otherwise is a statement refused, which
// leaves its connection standing: PG_REFUSED_FOR_NOW). Not class 08, 53 or 57P0x (a server starting
// or going away, too many connections: PG_STATES above), which pass.
const PG_REFUSED_FOR_GOOD = /^(3D000|28000|28P01)$/;

/** The SQLSTATE with which PostgreSQL refused a connection for good (PG_REFUSED_FOR_GOOD), else undefined. */
export function refusedForGood(err: unknown): string | undefined {
  const { code, severity } = (err ?? {}) as { code?: unknown; severity?: unknown };
  if (code === '42501' && severity === 'FATAL') return code;
  return typeof code === 'string' && PG_REFUSED_FOR_GOOD.test(code) ? code : undefined;
}

// node-postgres and pg-pool report lost connections and timeouts by message only.
const PG_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|Query read timeout|connection error and is not queryable|Client was closed and is not queryable/i;

// SQLite: another writer holds the lock past busy_timeout, or the disk is full, read-only or failing.
const SQLITE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY)/;

export function isDatabaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as NodeJS.ErrnoException).code;
  // A batch's commit whose answer was lost and which the database could not settle (group-commit.ts); a request's time for the database ran out (budget.ts);
  // a connection opened to a database a restore is replacing (restoring.ts).
  if (code === 'ALMONER_COMMIT_UNKNOWN' || code === 'ALMONER_DATABASE_DEADLINE' || code === RESTORING_CODE) return true;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || PG_STATES.test(code) || PG_REFUSED_FOR_NOW.test(code) || SQLITE_CODES.test(code))) return true;
  if (err instanceof AggregateError) return err.errors.some(isDatabaseUnavailable);
  return PG_MESSAGES.test(err.message);
}

/**
 * PostgreSQL answered a statement with an error of its own (a constraint, a deadlock): the
 * statement did not take effect, and the connection still stands. Not a lost connection or a
 * database going away, after which nobody can say.
 */
export function isRefused(err: unknown): boolean {
  const { code, severity } = (err ?? {}) as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string' && (PG_REFUSED_FOR_NOW.test(code) || !isDatabaseUnavailable(err));
}

/** SQLite's I/O errors (SQLITE_IOERR and its extended codes), after which what reached the file is not known: its code, else undefined. */
export function ioErrorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_IOERR') ? code : undefined;
}

/** Another writer holds SQLite's lock: worth waiting for, asynchronously. */
export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code);
}
