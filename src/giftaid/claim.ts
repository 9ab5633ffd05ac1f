// A Gift Aid claim's life at HMRC, as the operator records it. Pure.

export const CLAIM_STATUSES = ['prepared', 'submitted', 'paid', 'rejected'] as const;
export type ClaimStatus = (typeof CLAIM_STATUSES)[number];

/**
 * Where a claim may go next. A rejected claim frees its donations for the next claim, so nothing
 * follows it (marking it live again could claim a donation twice); a paid claim is settled.
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

/** Whether a claim that is `from` can come to be `to` by the moves NEXT_STATUSES allows (one or more). */
export function comesAfter(to: ClaimStatus, from: ClaimStatus): boolean {
  return NEXT_STATUSES[from].some((next) => next === to || comesAfter(to, next));
}
