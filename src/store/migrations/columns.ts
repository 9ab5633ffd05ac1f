import type { ColumnDefinitionBuilder } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

type Dialect = DatabaseLocation['dialect'];

/** An id column's type and definition: an identity on PostgreSQL, SQLite's integer primary key elsewhere. */
export function identityColumn(dialect: Dialect): { type: 'bigint' | 'integer'; define: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder } {
  return dialect === 'postgres'
    ? { type: 'bigint', define: (c) => c.primaryKey().generatedAlwaysAsIdentity() }
    : { type: 'integer', define: (c) => c.primaryKey().autoIncrement() };
}
