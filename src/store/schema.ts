// The database schema as one TypeScript interface: the single source of the query types.
import type { Generated } from 'kysely';
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
  created_at: string;
  updated_at: string;
}

export interface DonationsTable {
  id: Generated<number>;
  charity_id: number;
  donor_first_name: string | null;
  donor_last_name: string | null;
  donor_email: string;
  donor_phone: string | null;
  donor_address: string | null;
  donor_city: string | null;
  donor_postcode: string | null;
  donor_ip: string | null;
  gift_aid: number;
  /** As the charity sent it, for the echo. */
  amount: string;
  /** The same amount in pence, exact, for sums and Gift Aid. */
  amount_minor: number;
  payment_method: string | null;
  payment_confirmation_number: string | null;
  donation_type: string;
  /** ISO 8601 UTC with microseconds; fixed width, so text order is time order. */
  donation_date: string;
  zakat_donation: number;
  recorded_at: string;
}

export interface IdempotencyKeysTable {
  charity_id: number;
  key: string;
  /** SHA-256 of the validated donation the key was first used for. */
  fingerprint: string;
  /** The donation stored with the key, in the same transaction. */
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

/** A write transaction's token, committed with it: whether a COMMIT whose answer was lost took effect. */
export interface CommitTokensTable {
  token: string;
  committed_at: string;
}

export interface Database {
  charities: CharitiesTable;
  donations: DonationsTable;
  idempotency_keys: IdempotencyKeysTable;
  giftaid_claims: GiftaidClaimsTable;
  giftaid_claim_donations: GiftaidClaimDonationsTable;
  commit_tokens: CommitTokensTable;
}
