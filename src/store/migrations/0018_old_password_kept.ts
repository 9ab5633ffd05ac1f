import type { Kysely, Migration } from 'kysely';

/**
 * A rotation with a grace period (`charity rotate --grace`): the replaced password's hash, and until
 * when it still works (stored format, UTC). Both null when no old password works.
 */
export function oldPasswordKept(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('charities').addColumn('old_password_hash', 'text').execute();
      await db.schema.alterTable('charities').addColumn('old_password_until', 'text').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('charities').dropColumn('old_password_until').execute();
      await db.schema.alterTable('charities').dropColumn('old_password_hash').execute();
    },
  };
}
