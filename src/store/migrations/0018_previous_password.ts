import type { Kysely, Migration } from 'kysely';

/**
 * A charity keeps, for a while after a rotate, the hash of the password the rotate replaced, and
 * until when (charities/credentials.ts's ownPassword): a request with it is answered 401 but is not
 * counted as a guess, so an integration still sending it does not get its address throttled out of
 * the new password.
 */
export function previousPassword(): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('charities').addColumn('previous_password_hash', 'text').execute();
      await db.schema.alterTable('charities').addColumn('previous_until', 'text').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('charities').dropColumn('previous_until').execute();
      await db.schema.alterTable('charities').dropColumn('previous_password_hash').execute();
    },
  };
}
