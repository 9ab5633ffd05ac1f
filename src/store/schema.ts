// The database schema as one TypeScript interface: the single source of the query types.
import type { ColumnType, Generated, Selectable } from 'kysely';
import type { DonationColumns } from '../donations/fields.js';
import type { ClaimStatus } from '../giftaid/claim.js';

export interface CharitiesTable {
  id: Generated<number>;
  name: string;
  email: string;
  username: string;
  /** SHA-256 of the generated password, hex. */
  password_hash: string;
  /** 1 or 0 (SQLite has no boolean type). */
  active: number;
  /** After `charity rotate --grace`: the replaced password's hash, which works until old_password_until (stored format); both null otherwise. */
  old_password_hash: ColumnType<string | null, string | null | undefined, string | null>;
  old_password_until: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: string;
  updated_at: string;
}

/** A charity's row as read. */
export type CharityRow = Selectable<CharitiesTable>;

/**
 * A donation's row: its own columns, then the donation's, derived from the field table (text as
 * text, yes/no and flags as 0 or 1, an amount as sent and in pence, dates as ISO 8601 UTC with
 * microseconds: fixed width, so text order is time order).
 */
export type DonationsTable = { id: Generated<number>; charity_id: number } & DonationColumns & {
  recorded_at: string;
  /** When its personal data was erased (donations/erasure.ts); null while it has not been. */
  erased_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** YYYY-MM-DD: the last day the personal data kept for Gift Aid must be kept; null if none is. */
  erase_after: ColumnType<string | null, string | null | undefined, string | null>;
  /** While details erased on a donor's request are kept for Gift Aid: that donor's reference (donation-query.ts's donorReference), so that their later requests still find them. */
  erased_donor: ColumnType<string | null, string | null | undefined, string | null>;
};

export interface IdempotencyKeysTable {
  charity_id: number;
  key: string;
  /** SHA-256 of the validated donation the key was first used for. */
  fingerprint: string;
  /** The donation stored with the key: in the same statement on PostgreSQL, the same transaction on SQLite. */
  donation_id: number;
  created_at: string;
  expires_at: string;
}

export interface GiftaidClaimsTable {
  id: Generated<number>;
  charity_id: number;
  status: ClaimStatus;
  /** The last day of donations the claim took (YYYY-MM-DD). */
  up_to: string;
  /** The day the claim was prepared, in the UK (YYYY-MM-DD): the day its rules were applied. */
  claim_date: string;
  donation_count: number;
  total_minor: number;
  prepared_at: string;
  submitted_at: string | null;
  paid_at: string | null;
  rejected_at: string | null;
  /** How many times its status has moved (`giftaid mark`, `giftaid reopen`): migration 0019. */
  moves: Generated<number>;
}

/** A donation in a claim, with its row exactly as it went into HMRC's schedule. */
export interface GiftaidClaimDonationsTable {
  claim_id: number;
  donation_id: number;
  /** 1, 2, 3, … over the whole claim: file ceil(position / 1000), item ((position - 1) % 1000) + 1. */
  position: number;
  /** 1 while the claim is live (not rejected), null after: a donation has at most one live row. */
  live: 1 | null;
  first_name: string;
  last_name: string;
  house: string;
  postcode: string;
  /** YYYY-MM-DD. */
  donation_day: string;
  amount_minor: number;
}

/** A claim's row whose donation this database does not hold (kept by a restore: migration 0014), as it went into HMRC's schedule. */
export interface GiftaidClaimRowsWithoutDonationTable extends Omit<GiftaidClaimDonationsTable, 'live'> {
  /** Its donor's reference (donation-query.ts's donorReference), so that their requests find the row; null if not known (kept before migration 0017) or erased. */
  donor: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A PostgreSQL batch's token, written by the statement that commits it: whether a commit whose answer was lost took effect (group-commit.ts). */
export interface CommitTokensTable {
  token: string;
  committed_at: string;
}

/** An operator action: when, what, on what, by which operating-system user on which host, and a summary (JSON; never a secret or a donor's personal data). */
export interface AuditLogTable {
  id: Generated<number>;
  at: string;
  action: string;
  target: string;
  os_user: string;
  host: string;
  summary: string;
}

export interface Database {
  charities: CharitiesTable;
  donations: DonationsTable;
  idempotency_keys: IdempotencyKeysTable;
  giftaid_claims: GiftaidClaimsTable;
  giftaid_claim_donations: GiftaidClaimDonationsTable;
  giftaid_claim_rows_without_donation: GiftaidClaimRowsWithoutDonationTable;
  commit_tokens: CommitTokensTable;
  audit_log: AuditLogTable;
}
