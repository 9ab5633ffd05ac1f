// Every migration, in order. Names are permanent: a new schema change is a new entry.
import { sql, type Kysely, type Migration } from 'kysely';
import type { DatabaseLocation } from '../../config.js';

type Dialect = DatabaseLocation['dialect'];
import { initial } from './0001_initial.js';
import { idempotencyKeys } from './0002_idempotency_keys.js';
import { giftaidClaims } from './0003_giftaid_claims.js';
import { commitTokens } from './0004_commit_tokens.js';
import { keysWithTheirDonation } from './0005_keys_with_their_donation.js';
import { donationIdsByDefault } from './0006_donation_ids_by_default.js';
import { auditLog } from './0007_audit_log.js';
import { erasure } from './0008_erasure.js';
import { donationsByCharity } from './0009_donations_by_charity.js';
import { giftAidKeptSevenYears } from './0010_giftaid_kept_seven_years.js';
import { auditLogNotTruncated } from './0011_audit_log_not_truncated.js';
import { erasedDonorReference } from './0012_erased_donor_reference.js';
import { erasedDonorFromAudit } from './0013_erased_donor_from_audit.js';
import { claimRowsWithoutDonation } from './0014_claim_rows_without_donation.js';
import { auditLogNotReplaced } from './0015_audit_log_not_replaced.js';
import { keptHouseReadAgain } from './0016_kept_house_read_again.js';
import { claimRowsDonor } from './0017_claim_rows_donor.js';
import { oldPasswordKept } from './0018_old_password_kept.js';
import { claimMoves } from './0019_claim_moves.js';
import { instances } from './0020_instances.js';
import { instancesSayWhat } from './0021_instances_say_what.js';
import { databaseIdentity } from './0022_database_identity.js';

export function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001_initial': initial(dialect),
    '0002_idempotency_keys': idempotencyKeys(),
    '0003_giftaid_claims': giftaidClaims(dialect),
    '0004_commit_tokens': commitTokens(),
    '0005_keys_with_their_donation': keysWithTheirDonation(),
    '0006_donation_ids_by_default': donationIdsByDefault(dialect),
    '0007_audit_log': auditLog(dialect),
    '0008_erasure': erasure(),
    '0009_donations_by_charity': donationsByCharity(),
    '0010_giftaid_kept_seven_years': giftAidKeptSevenYears(),
    '0011_audit_log_not_truncated': auditLogNotTruncated(dialect),
    '0012_erased_donor_reference': erasedDonorReference(),
    '0013_erased_donor_from_audit': erasedDonorFromAudit(),
    '0014_claim_rows_without_donation': claimRowsWithoutDonation(dialect),
    '0015_audit_log_not_replaced': auditLogNotReplaced(dialect),
    '0016_kept_house_read_again': keptHouseReadAgain(),
    '0017_claim_rows_donor': claimRowsDonor(),
    '0018_old_password_kept': oldPasswordKept(),
    '0019_claim_moves': claimMoves(),
    '0020_instances': instances(dialect),
    '0021_instances_say_what': instancesSayWhat(dialect),
    '0022_database_identity': databaseIdentity(dialect),
  };
}

/**
 * Migrations that were on main for a while and then taken back, each with what undoes it. A
 * database one of them ran on is brought back to the schema without it (src/store/migrate.ts:
 * before the migrations run, and its row in kysely_migration deleted), where it was refused as
 * made by "a newer Almoner", exit 2, with no way forward but the version that made it; a backup
 * that holds one is restored, and brought up to date as it is opened.
 *
 * 0018_previous_password: 0919866 to 2cb1e85 (2026-11-29, 21:09 to 21:35 UTC), taken back by
 * e37477a; 0018_old_password_kept, which followed it, adds columns of other names.
 */
export const WITHDRAWN_MIGRATIONS: Record<string, (db: Kysely<any>, dialect: Dialect) => Promise<void>> = {
  '0018_previous_password': async (db, dialect) => {
    for (const column of ['previous_until', 'previous_password_hash']) {
      if (dialect === 'postgres') {
        await sql`alter table charities drop column if exists ${sql.ref(column)}`.execute(db);
      } else {
        const { rows } = await sql<{ name: string }>`select name from pragma_table_info('charities')`.execute(db);
        if (rows.some((r) => r.name === column)) await sql`alter table charities drop column ${sql.ref(column)}`.execute(db);
      }
    }
  },
};

/** The migrations of `applied` this version knows neither as its own nor as withdrawn: a newer Almoner's, whose database or backup it refuses. */
export function newerThanThis(dialect: Dialect, applied: readonly string[]): string[] {
  const known = new Set([...Object.keys(migrations(dialect)), ...Object.keys(WITHDRAWN_MIGRATIONS)]);
  return applied.filter((name) => !known.has(name));
}
