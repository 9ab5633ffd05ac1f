// How a create's writes (donation-writes.ts) are stated once and run two ways. A write is a generator that yields
// the statements it runs and is handed back their rows: on SQLite a whole batch of them runs in one
// synchronous better-sqlite3 transaction (no promise per statement); on PostgreSQL the batch's
// writes advance together, and the statements of one kind that they yield at the same step run as
// one (the keys' look-up, say), so a batch costs a few round trips, not a few per write. There, no
// transaction is needed: every write ends with a statement of one kind (the donation's insert),
// and that kind writes all of the batch's last statements and its commit token in one statement,
// which PostgreSQL commits by itself (see ownCommit). The SQL of each statement is compiled once.
import type BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, type Compilable, type Kysely } from 'kysely';

/** A statement to run: its SQL and its parameters, in the SQL's order. */
export interface Statement {
  readonly sql: string;
  readonly parameters: readonly unknown[];
  /** PostgreSQL: how statements of this kind yielded at the same step run together. */
  readonly together?: Together;
  /** What `together` needs of this statement (the row it inserts, say). */
  readonly data?: unknown;
}

/**
 * Statements of one kind run as one. A kind has `run` (its statements yielded at one step, each
 * one's rows, in order, as if it had run alone) or `ownCommit` (the batch's last statements and its
 * commit). A statement of an `ownCommit` kind is its write's last: given its rows, the write
 * returns. The statements before it each commit by themselves, so they may only read, or make a
 * change that is right whatever becomes of the write (forgetting an expired key).
 */
export interface Together {
  run?(statements: readonly Statement[], query: Query): Promise<Rows[]>;
  /**
   * For the last statements of a batch's writes, all of this kind: one statement that writes them
   * all and the batch's commit `token`, to run with no transaction around it (PostgreSQL commits a
   * lone statement by itself), after any reads it needs first (`query`); and each statement's rows,
   * known before it is sent, so that a lost answer can be settled by the token. The statement
   * writes all or nothing.
   */
  ownCommit?(statements: readonly Statement[], query: Query, token: string): Promise<{ rows: Rows[]; commit: CompiledQuery }>;
}

/** Runs a statement and gives back its rows. */
export type Query = (compiled: CompiledQuery) => Promise<Rows>;

/** Queries on `db` (the batch's connection), each asking `stop` before it is sent. */
export function queryOn<DB>(db: Kysely<DB>, stop: () => void): Query {
  return async (compiled) => {
    stop();
    return (await db.executeQuery<Record<string, unknown>>(compiled)).rows;
  };
}

/**
 * The batch's last statements, once `runUntilLast` has brought its writes to them, of the writes
 * `keep` keeps: the kind that writes and commits them in one (Together.ownCommit), and which write
 * each is; undefined when every write has already returned (replays, say), so there is nothing to commit.
 */
export function lastStatements(
  steps: readonly IteratorResult<Statement, unknown>[],
  keep: (write: number) => boolean,
): { together: Pick<Required<Together>, 'ownCommit'>; statements: Statement[]; writes: number[] } | undefined {
  const writes = steps.flatMap((step, i) => (step.done || !keep(i) ? [] : [i]));
  if (writes.length === 0) return undefined;
  const statements = writes.map((i) => steps[i]!.value as Statement);
  const together = statements[0]!.together;
  if (!together?.ownCommit || !statements.every((s) => s.together === together)) {
    throw new Error('a batch of writes must end with statements of one kind that commits by itself');
  }
  return { together: together as Pick<Required<Together>, 'ownCommit'>, statements, writes };
}

/** A write's result once its last statement's rows are in. */
export function finish<T>(program: WriteProgram<T>, rows: Rows): T {
  const step = program.next(rows);
  if (!step.done) throw new Error('a write went on past the statement it said was its last');
  return step.value;
}

export type Rows = Record<string, unknown>[];

/** A write: yields statements, is given each one's rows, returns its result. Made afresh for each try. */
export type WriteProgram<T> = Generator<Statement, T, Rows>;

/**
 * The statements that run on every create, by name. Kysely would build and compile each afresh every
 * time (about a quarter of a create's time); here its SQL is compiled on first use, and later uses
 * only pass the parameters. The first use checks that they are the query's own, in its order.
 */
export class HotStatements {
  private readonly compiled = new Map<string, string>();

  statement(name: string, parameters: readonly unknown[], query: () => Compilable, together?: { with: Together; data?: unknown }): Statement {
    let sql = this.compiled.get(name);
    if (sql === undefined) {
      const first = query().compile();
      if (first.parameters.length !== parameters.length || first.parameters.some((p, i) => p !== parameters[i])) {
        throw new Error(`the parameters of the ${name} statement are not the query's, in its order`);
      }
      sql = first.sql;
      this.compiled.set(name, sql);
    }
    return { sql, parameters, together: together?.with, data: together?.data };
  }
}

/** A statement as Kysely runs it. */
export const compiled = (statement: Statement): CompiledQuery => CompiledQuery.raw(statement.sql, [...statement.parameters]);

/** What a statement that returns no rows gives back on SQLite, as its one row: better-sqlite3's run(), of which a write reads only this. */
export type Written = {
  /** The rowid of the row it last inserted: a table's INTEGER PRIMARY KEY. */
  lastInsertRowid: number | bigint;
};

/**
 * Runs a write on SQLite, synchronously (inside the batch's transaction). A statement that returns
 * rows gives them; one that does not gives one row, what it did (Written).
 */
export function runOnSqlite<T>(db: BetterSqlite3.Database, program: WriteProgram<T>): T {
  let step = program.next();
  while (!step.done) {
    const { sql, parameters } = step.value;
    const prepared = db.prepare(sql); // open.ts hands back the statement prepared before for the same SQL
    const rows = prepared.reader ? (prepared.all(parameters) as Rows) : [prepared.run(parameters) as Written]; // run() makes a fresh object: no copy
    step = program.next(rows);
  }
  return step.value;
}

/**
 * PostgreSQL: runs a batch's writes (through `query`) up to their last statements, all advancing
 * together: at each step, statements sharing a `together` run as one, the others one by one. Each
 * commits by itself (see Together). The writes are independent of one another (no two in a
 * batch touch the same key), so the order of their statements does not matter.
 */
export async function runUntilLast(query: Query, programs: WriteProgram<unknown>[]): Promise<IteratorResult<Statement, unknown>[]> {
  const steps = programs.map((p) => p.next());
  for (;;) {
    const open = steps.flatMap((step, i) => (step.done || step.value.together?.ownCommit ? [] : [i]));
    if (open.length === 0) return steps;
    const rows = new Map<number, Rows>();
    const groups = new Map<Together, number[]>();
    for (const i of open) {
      const statement = steps[i]!.value as Statement;
      if (statement.together?.run) {
        const members = groups.get(statement.together);
        if (members) members.push(i);
        else groups.set(statement.together, [i]);
      } else {
        rows.set(i, await query(compiled(statement)));
      }
    }
    for (const [together, members] of groups) {
      const each = await together.run!(members.map((i) => steps[i]!.value as Statement), query);
      members.forEach((i, j) => rows.set(i, each[j]!));
    }
    for (const i of open) steps[i] = programs[i]!.next(rows.get(i)!);
  }
}
