// A Gift Aid claim's life at HMRC, as the operator records it. Pure.

export const CLAIM_STATUSES = ['prepared', 'submitted', 'paid', 'rejected'] as const;
export type ClaimStatus = (typeof CLAIM_STATUSES)[number];

/**
 * Where a claim may go next. A rejected claim frees its donations for the next claim, so no mark
 * follows it: only `giftaid reopen` (statusReopened), which takes a rejection marked by mistake
 * back when no other claim has taken its donations since. A paid claim is settled.
 */
export const NEXT_STATUSES: Readonly<Record<ClaimStatus, readonly ClaimStatus[]>> = {
  prepared: ['submitted', 'rejected'],
  submitted: ['paid', 'rejected'],
  paid: [],
  rejected: [],
};

/** The statuses a claim may be marked `to` from. */
export function statusesBefore(to: ClaimStatus): ClaimStatus[] {
  return CLAIM_STATUSES.filter((from) => NEXT_STATUSES[from].includes(to));
}

/** What a rejected claim is again once reopened: what it was when it was rejected (submitted, if it was ever uploaded). */
export function statusReopened(claim: { submitted_at: string | null }): ClaimStatus {
  return claim.submitted_at === null ? 'prepared' : 'submitted';
}

/**
 * How many times a claim's status has moved (migration 0019): its `moves`, or, for a claim read
 * from a database or a restore's file from before that column, one for each of its times (before
 * `reopen`, a status only moved forward).
 */
export function movesOf(claim: { moves?: number | null; submitted_at: string | null; paid_at: string | null; rejected_at: string | null }): number {
  if (typeof claim.moves === 'number') return claim.moves;
  return [claim.submitted_at, claim.paid_at, claim.rejected_at].filter((t) => t !== null).length;
}
