// Each server process on PostgreSQL keeps a row in almoner_instances while it runs, so that a restore
// sees it whatever sits between it and PostgreSQL; so does each command (`giftaid claim`, an
// export) since 2026-12-01, which a restore through a pooler could not see either. Until 2026-12-01 a restore looked only at the database's sessions
// and a server checked the restore's mark only as each of its connections opened; behind a
// transaction pooler (PgBouncer, pool_mode = transaction) the restore saw the pooler's server
// connections (none while the servers were idle) and a server's connections to the pooler never
// opened again, so a restore went ahead under running servers and lost 92 of 240 creates they had
// answered 200 (a review, 2026-11-30, PgBouncer 1.18).
//
// A server writes its row, then reads the mark; a restore writes its mark, then reads the rows
// (cli/backup.ts): one of the two sees the other. The row is refreshed every `everyMs` on a
// connection of its own, never a request's, with the mark read after it each time: a server that
// was running when the mark was made answers 503 from then on (open.ts), as one whose connection
// opened onto it does, until the mark is gone.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { ConfigError } from '../config.js';
import { closingClient } from './pg-client.js';
import { readMark, RESTORING_CODE, unfinished, type Restoring } from './restoring.js';

/** The table (migrations/0020_instances.ts). */
export const INSTANCES_TABLE = 'almoner_instances';

/**
 * After how many of its own intervals unrefreshed a row is taken for a server that has gone (killed,
 * its machine lost): each row says its interval, so a restore needs none of its own. Five, not
 * one: a server busy with a long collection or a slow database is not taken for gone.
 */
export const FORGOTTEN_AFTER_INTERVALS = 5;

/** A process's row as a restore reads it: one refreshed within its FORGOTTEN_AFTER_INTERVALS. */
export interface Running {
  /** `server`, or the command's name (`giftaid claim`); a row an older version wrote (before 0021) says nothing, and was a server's. */
  what: string;
  host: string;
  pid: number;
  /** Seconds since it was last refreshed, and after how many more it is forgotten if it is not refreshed again. */
  seenAgo: number;
  forgottenIn: number;
}

type Query = (text: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>>;

/** The servers whose rows say they run on the database `query` asks (none where the table is not: a database before 0020, or an empty one). Ages on the database's clock, not this machine's. */
export async function runningInstances(query: Query): Promise<Running[]> {
  if ((await query('select to_regclass($1) as t', [INSTANCES_TABLE]))[0]?.t == null) return [];
  const rows = await query(
    // `what` read from the row as JSON: a database before 0021 has no such column (a restore reads it before it is migrated).
    `select host, pid, to_jsonb(i) ->> 'what' as what, extract(epoch from now() - seen_at)::float8 as ago, every_ms * $1 / 1000.0 as forget
       from ${INSTANCES_TABLE} i where seen_at > now() - every_ms * $1 * interval '1 millisecond' order by seen_at desc`,
    [FORGOTTEN_AFTER_INTERVALS],
  );
  return rows.map((r) => {
    const seenAgo = Math.max(0, Number(r.ago));
    return { what: typeof r.what === 'string' ? r.what : 'server', host: String(r.host), pid: Number(r.pid), seenAgo, forgottenIn: Math.max(0, Number(r.forget) - seenAgo) };
  });
}

/** A restore's refusal of a database with `running` processes on it, servers or commands (exit 2's words). */
export function runningSaid(running: Running[]): string {
  const n = running.length;
  // The most recently seen first; under WORKERS a few machines' processes are many.
  const shown = running
    .slice(0, 5)
    .map((r) => `${r.what === 'server' ? 'a server' : `\`${r.what}\``}, process ${r.pid} on ${r.host}, last seen ${r.seenAgo.toFixed(1)} s ago`);
  const each = [...shown, ...(n > shown.length ? [`and ${n - shown.length} more`] : [])].join('; ');
  const wait = Math.ceil(Math.max(...running.map((r) => r.forgottenIn)));
  const them = n === 1 ? 'it' : 'them';
  return (
    `${n} process${n === 1 ? ' is' : 'es are'} running on this database, through a pooler or not (${each}): stop ${them}${running.some((r) => r.what !== 'server') ? ` or let ${them} finish` : ''}, then restore. ` +
    `A process stopped without a clean shutdown (killed, its machine lost) is taken for gone once it has not been seen for ${FORGOTTEN_AFTER_INTERVALS} of its refreshes: ` +
    `if none is running, restore again in ${wait} s`
  );
}

/** PostgreSQL's refusals of a write by a user that may only read (42501) or on a read-only database (25006). */
const ROW_REFUSED = new Set(['42501', '25006']);

/** The user's name if it may insert, update or delete in any of the tables a command writes, else undefined (a user that may only read). */
async function mayWriteAlmoner(query: Query): Promise<string | undefined> {
  const [row] = await query(
    `select current_user as who, coalesce(bool_or(has_table_privilege(t, 'INSERT, UPDATE, DELETE')), false) as writes
       from unnest(array[to_regclass('audit_log'), to_regclass('charities'), to_regclass('donations')]) t where t is not null`,
  );
  return row?.writes === true ? String(row.who) : undefined;
}

/** A server's row, kept while it runs: `stop` removes it (a clean shutdown). */
export interface Instance {
  stop(): Promise<void>;
}

/** The rows this process keeps now (keepInstance), for forgetRows. */
const keptHere = new Set<Instance>();

/**
 * Removes every row this process keeps, waiting `withinMs` at most: for a command about to end
 * early (its reader gone, Ctrl-C, SIGTERM; cli/main.ts, cli/io.ts). Until 2026-12-01 such a
 * command's row outlived it, and a restore run next was refused for 10 s, told to stop a process
 * that had gone (a review of 69a2340). A row not removed in time is taken for gone as a killed one is.
 */
export async function forgetRows(withinMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([...keptHere].map((kept) => kept.stop().catch(() => {}))),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs))),
  ]);
  clearTimeout(timer);
}

export interface InstanceOptions {
  everyMs: number;
  connectMs: number;
  queryMs: number;
  /** What the process is, as a restore names it: `server`, or a command's name (`giftaid claim`). */
  what: string;
  /**
   * A command's: if the database refuses its row (a user that may only read, a read-only standby), it
   * runs without one, as it did before commands kept one; it could not write to what a restore replaces
   * either. A server's row is never optional (a server's user is checked for the grants at its start).
   */
  optional?: boolean;
  /** Told, after each refresh, of the mark it read: the refusal (code RESTORING_CODE) while there is one, else undefined. */
  marked(refusal: Error | undefined): void;
}

/**
 * Writes this process's row (a server's, or a command's since 2026-12-01), then reads the restore's
 * mark: a marked database is refused (ConfigError, exit 2 at start-up), the row removed. Then refreshes the row every `everyMs`, each time reading the
 * mark after it (`marked`), until `stop`. On a connection of its own (one more per server process,
 * idle between refreshes): a refresh never waits behind requests for one of the pool's, nor makes
 * a request wait.
 */
export async function keepInstance(connectionString: string, { everyMs, connectMs, queryMs, what, optional = false, marked }: InstanceOptions): Promise<Instance> {
  const { default: pgModule } = await import('pg');
  const own = new pgModule.Pool({ Client: closingClient(pgModule), connectionString, max: 1, idleTimeoutMillis: 0, connectionTimeoutMillis: connectMs, query_timeout: queryMs, keepAlive: true });
  own.on('error', () => {}); // an idle connection dropped: the next refresh opens another
  const id = randomUUID();
  const ask = async <T>(work: (query: Query) => Promise<T>): Promise<T> => {
    const client = await own.connect();
    let broken: Error | undefined;
    // pg-pool listens for errors only on idle clients: a connection ended while checked out but between
    // queries (a FATAL read with the answer to the last, as pg_terminate_backend or a restart sends
    // it) emitted an unhandled 'error' and ended the process, a server's or a command's (a review,
    // 2026-12-02: 1 in 3 minutes of terminations every 2 s). Now it is not used again, as a query's failure.
    const dropped = (err: Error) => (broken = err);
    client.on('error', dropped);
    try {
      return await work(async (text, params) => (await client.query(text, params)).rows);
    } catch (err) {
      broken = err as Error; // a query timed out or the connection went: not used again
      throw err;
    } finally {
      client.removeListener('error', dropped);
      client.release(broken);
    }
  };
  // The row, then the mark: a restore that marked before the row was written sees it once written, and one that marked after is seen here.
  const refresh = () =>
    ask(async (query) => {
      const seen = await query(`update ${INSTANCES_TABLE} set seen_at = now() where id = $1 returning id`, [id]);
      // Gone: pruned while this process could not refresh it, or its table made again by a restore. Written again.
      if (seen.length === 0) await insert(query);
      return readMark({ query });
    });
  const insert = (query: Query) =>
    query(`insert into ${INSTANCES_TABLE} (id, what, host, pid, every_ms) values ($1, $2, $3, $4, $5) on conflict (id) do update set seen_at = now()`, [id, what, hostname(), process.pid, everyMs]);
  const remove = () => ask((query) => query(`delete from ${INSTANCES_TABLE} where id = $1`, [id])).catch(() => {});
  let first: Restoring | undefined;
  try {
    first = await ask(async (query) => {
      // Rows of servers long gone (killed, their machines lost), pruned as each server starts.
      await query(`delete from ${INSTANCES_TABLE} where seen_at < now() - every_ms * $1 * interval '1 millisecond'`, [FORGOTTEN_AFTER_INTERVALS]);
      await insert(query);
      return readMark({ query });
    });
  } catch (err) {
    await remove();
    const code = String((err as { code?: unknown }).code);
    // Without a row only where the command could write nothing a restore might lose: a user that may write Almoner's tables but
    // was never granted this one (`grant … on all tables` run before 0020 made it) ran charity create and erasures unseen (a review of 2a801bc).
    const writer = optional && code === '42501' ? await ask(mayWriteAlmoner).catch(() => undefined) : undefined;
    await own.end();
    if (writer) {
      throw new ConfigError(
        `this database user (${writer}) may write Almoner's tables but not its row in ${INSTANCES_TABLE} (${(err as Error).message}), by which a restore sees a command ` +
          `that runs through a pooler: as the tables' owner, grant select, insert, update, delete on ${INSTANCES_TABLE} to ${writer}`,
      );
    }
    if (optional && ROW_REFUSED.has(code)) return { stop: async () => {} };
    throw err;
  }
  if (first) {
    await remove();
    await own.end();
    throw refusal(first);
  }
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  // When the last refresh that succeeded was sent: its row's seen_at is no earlier.
  let refreshed = performance.now();
  const next = () => {
    timer = setTimeout(() => {
      const sent = performance.now();
      running = refresh().then(
        (mark) => {
          refreshed = sent;
          marked(mark ? refusal(mark) : undefined);
        },
        (err: unknown) => {
          // Unreadable (a mark half made) is refused as the connection check refuses it.
          if (err instanceof ConfigError) return marked(Object.assign(err, { code: RESTORING_CODE }));
          // Its row unrefreshed for nearly as long as a restore waits before taking it for gone (its privileges on the table
          // revoked, its own connection refused while the pool's work): a restore may go ahead, so nothing more is written.
          const unseen = performance.now() - refreshed;
          if (unseen >= (FORGOTTEN_AFTER_INTERVALS - 1) * everyMs) marked(notRefreshed(what, unseen, err));
        },
      );
      void running.then(() => {
        if (!stopped) next();
      });
    }, everyMs);
    timer.unref(); // a server's clean shutdown stops it; nothing else waits for it
  };
  next();
  let removed: Promise<void> | undefined;
  const kept: Instance = {
    // Once, however many ask (a command's pool ending, and its forgetRows as it ends early): each waits for the row to go.
    stop() {
      return (removed ??= (async () => {
        stopped = true;
        clearTimeout(timer);
        await running;
        await remove();
        await own.end();
        keptHere.delete(kept);
      })());
    },
  };
  keptHere.add(kept);
  return kept;
}

/** What a server (or a command: `what`) that could not refresh its row for `ms` answers, `err` the last refresh's error: a 503, as for a restore's mark. */
function notRefreshed(what: string, ms: number, err: unknown): ConfigError {
  const why = err instanceof Error ? err.message : String(err);
  return Object.assign(
    new ConfigError(`this ${what === 'server' ? 'server' : `command (${what})`} has not refreshed its row in ${INSTANCES_TABLE} for ${(ms / 1000).toFixed(1)} s (${why}): a restore may take it for gone, so it takes nothing to the database until it can`),
    { code: RESTORING_CODE },
  );
}

/** What a server whose refresh found the restore's mark answers: as refuseMarkedConnection's (restoring.ts), a 503 to a request. */
function refusal(what: Restoring): ConfigError {
  return Object.assign(new ConfigError(unfinished(what)), { code: RESTORING_CODE });
}
