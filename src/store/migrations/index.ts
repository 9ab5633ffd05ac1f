// Every migration, in order. Names are permanent: a new schema change is a new entry.
import type { Migration } from 'kysely';
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
  };
}
