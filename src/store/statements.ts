// The writes every create makes, stated once and run two ways. A write is a generator that yields
// the statements it runs and is handed back their rows: on SQLite a whole batch of them runs in one
// synchronous better-sqlite3 transaction (no promise per statement); on PostgreSQL each statement
// is a round trip awaited in the batch's transaction. The SQL of each statement is compiled once.
import type BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, type Compilable, type Transaction } from 'kysely';

/** A statement to run: its SQL and its parameters, in the SQL's order. */
export interface Statement {
  readonly sql: string;
  readonly parameters: readonly unknown[];
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

  statement(name: string, parameters: readonly unknown[], query: () => Compilable): Statement {
    let sql = this.compiled.get(name);
    if (sql === undefined) {
      const first = query().compile();
      if (first.parameters.length !== parameters.length || first.parameters.some((p, i) => p !== parameters[i])) {
        throw new Error(`the parameters of the ${name} statement are not the query's, in its order`);
      }
      sql = first.sql;
      this.compiled.set(name, sql);
    }
    return { sql, parameters };
  }
}

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

/** Runs a write in a Kysely transaction, a round trip per statement; `stop` is asked before each one. */
export async function runOnKysely<T, DB>(trx: Transaction<DB>, program: WriteProgram<T>, stop: () => void): Promise<T> {
  let step = program.next();
  while (!step.done) {
    stop();
    const { rows } = await trx.executeQuery<Record<string, unknown>>(CompiledQuery.raw(step.value.sql, [...step.value.parameters]));
    step = program.next(rows);
  }
  return step.value;
}
