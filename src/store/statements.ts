// The writes every create makes, stated once and run two ways. A write is a generator that yields
// the statements it runs and is handed back their rows: on SQLite a whole batch of them runs in one
// synchronous better-sqlite3 transaction (no promise per statement); on PostgreSQL the batch's
// writes advance together, and the statements of one kind that they yield at the same step run as
// one (a multi-row insert, say), so a batch costs a few round trips, not a few per write. A batch
// of writes that are each one last statement of one kind (creates without a key) needs no
// transaction at all: that kind writes them and the batch's commit token in one statement, which
// PostgreSQL commits by itself (see ownCommit). The SQL of each statement is compiled once.
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
  /** The write ends with this statement: given its rows, it returns. */
  readonly last?: boolean;
}

/** Statements of one kind run as one: each statement's rows, in order, as if it had run alone. */
export interface Together {
  run(statements: readonly Statement[], query: Query): Promise<Rows[]>;
  /**
   * PostgreSQL, for a batch of nothing but these statements, each its write's last: one statement
   * that writes them all and the batch's commit `token`, to run with no transaction around it
   * (PostgreSQL commits a lone statement by itself), after any reads it needs first (`query`), and
   * each statement's rows, known before it is sent, so that a lost answer can be settled by the token.
   */
  ownCommit?(statements: readonly Statement[], query: Query, token: string): Promise<{ rows: Rows[]; commit: CompiledQuery }>;
}

/** Runs a statement and gives back its rows. */
export type Query = (compiled: CompiledQuery) => Promise<Rows>;

/** Queries on `db` (a connection or a transaction), each asking `stop` before it is sent. */
export function queryOn<DB>(db: Kysely<DB>, stop: () => void): Query {
  return async (compiled) => {
    stop();
    return (await db.executeQuery<Record<string, unknown>>(compiled)).rows;
  };
}

/** The kind that can write and commit this batch's first statements in one (Together.ownCommit), if they are all its and each is its write's last. */
export function ownCommitOf(steps: readonly IteratorResult<Statement, unknown>[]): Required<Together> | undefined {
  const first = steps[0];
  const together = first && !first.done ? first.value.together : undefined;
  if (!together?.ownCommit) return undefined;
  return steps.every((step) => !step.done && step.value.last && step.value.together === together) ? (together as Required<Together>) : undefined;
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

  statement(name: string, parameters: readonly unknown[], query: () => Compilable, together?: { with: Together; data?: unknown; last?: boolean }): Statement {
    let sql = this.compiled.get(name);
    if (sql === undefined) {
      const first = query().compile();
      if (first.parameters.length !== parameters.length || first.parameters.some((p, i) => p !== parameters[i])) {
        throw new Error(`the parameters of the ${name} statement are not the query's, in its order`);
      }
      sql = first.sql;
      this.compiled.set(name, sql);
    }
    return { sql, parameters, together: together?.with, data: together?.data, last: together?.last };
  }
}

/** A statement as Kysely runs it. */
export const compiled = (statement: Statement): CompiledQuery => CompiledQuery.raw(statement.sql, [...statement.parameters]);

/** Runs a write on SQLite, synchronously (inside the batch's transaction). */
export function runOnSqlite<T>(db: BetterSqlite3.Database, program: WriteProgram<T>): T {
  let step = program.next();
  while (!step.done) {
    const { sql, parameters } = step.value;
    const prepared = db.prepare(sql); // open.ts hands back the statement prepared before for the same SQL
    const rows = prepared.reader ? (prepared.all(parameters) as Rows) : (prepared.run(parameters), []);
    step = program.next(rows);
  }
  return step.value;
}

/**
 * Runs a batch's writes in a Kysely transaction (through `query`, on it), all advancing together: at
 * each step, statements sharing a `together` run as one, the others one by one.
 * The writes are independent of one another (no two in a batch touch the same key), so the order
 * of their statements within the transaction does not matter. `steps`: their first steps, if taken already.
 */
export async function runBatchOnKysely(query: Query, programs: WriteProgram<unknown>[], steps: IteratorResult<Statement, unknown>[] = programs.map((p) => p.next())): Promise<unknown[]> {
  for (;;) {
    const open = steps.flatMap((step, i) => (step.done ? [] : [i]));
    if (open.length === 0) return steps.map((step) => step.value);
    const rows = new Map<number, Rows>();
    const groups = new Map<Together, number[]>();
    for (const i of open) {
      const { together } = steps[i]!.value as Statement;
      if (!together) continue;
      const members = groups.get(together);
      if (members) members.push(i);
      else groups.set(together, [i]);
    }
    for (const i of open) {
      const statement = steps[i]!.value as Statement;
      if (statement.together && groups.get(statement.together)!.length > 1) continue;
      rows.set(i, await query(compiled(statement)));
    }
    for (const [together, members] of groups) {
      if (members.length < 2) continue;
      const each = await together.run(members.map((i) => steps[i]!.value as Statement), query);
      members.forEach((i, j) => rows.set(i, each[j]!));
    }
    for (const i of open) steps[i] = programs[i]!.next(rows.get(i)!);
  }
}
