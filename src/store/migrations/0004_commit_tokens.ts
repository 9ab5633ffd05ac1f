import type { Kysely, Migration } from 'kysely';

/**
 * One row per PostgreSQL batch of writes, written with it: after a commit whose answer was lost, its
 * token says whether it was committed (see group-commit.ts). Rows are kept a day, then purged.
 */
export function commitTokens(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('commit_tokens')
        .addColumn('token', 'text', (c) => c.primaryKey())
        .addColumn('committed_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('commit_tokens_committed_at').on('commit_tokens').column('committed_at').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('commit_tokens').execute();
    },
  };
}
