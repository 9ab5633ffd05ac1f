// Successful credential look-ups are reused for up to CREDENTIAL_TTL_MS instead of reading the
// database on every request. Anything that would fail is checked against the database first, so
// a new password or an enable works at once, while a disable, or an old password after a rotate,
// stops working within that time on every instance (the interface promises 5 seconds).
//
// The Authorization headers that matched a remembered credential are remembered beside it, so that
// the same header again is found by one look-up instead of being decoded and its password hashed
// (a fifth of the server's instructions per `/me`: docs/performance.md). A header holds the
// password itself: it is used only while its credential is still the one remembered (so never past
// that credential's time), and kept in two generations of CREDENTIAL_TTL_MS, so that none is held
// more than twice that after it matched.
import type { CharityCredential } from '../charities/charity.js';
import { monotonicClock, type Clock } from '../time.js';
import type { CredentialLookup, Credentials } from './auth.js';

export const CREDENTIAL_TTL_MS = 2000;
const MAX_ENTRIES = 10_000;

export function cachedCredentials(lookup: CredentialLookup, { ttlMs = CREDENTIAL_TTL_MS, clock = monotonicClock }: { ttlMs?: number; clock?: Clock } = {}): Credentials {
  const entries = new Map<string, { found: CharityCredential; until: number }>();
  const recent = (username: string): CharityCredential | undefined => {
    const hit = entries.get(username);
    return hit && hit.until > clock() ? hit.found : undefined;
  };

  type Match = { username: string; found: CharityCredential };
  let matches = new Map<string, Match>();
  let olderMatches = new Map<string, Match>();
  let turnAt = clock() + ttlMs;
  /** A new generation of matches every ttlMs, and the one before it kept for one more: none outlives 2 × ttlMs. */
  const age = (): void => {
    const now = clock();
    if (now < turnAt) return;
    const justTurned = now < turnAt + ttlMs; // else a whole generation passed with no request: both go
    olderMatches = justTurned ? matches : new Map();
    matches = new Map();
    turnAt = justTurned ? turnAt + ttlMs : now + ttlMs;
  };

  return {
    recent,
    async fresh(username, budget) {
      const found = await lookup(username, budget);
      if (!found) entries.delete(username);
      else {
        if (entries.size >= MAX_ENTRIES) entries.clear(); // usernames come from clients: bound the memory
        entries.set(username, { found, until: clock() + ttlMs });
      }
      return found;
    },
    matchedBy(authorization) {
      age();
      const match = matches.get(authorization) ?? olderMatches.get(authorization);
      return match !== undefined && recent(match.username) === match.found ? match.found : undefined;
    },
    matched(authorization, username, found) {
      age();
      if (matches.size >= MAX_ENTRIES) matches.clear(); // only headers that matched get here, but bound them all the same
      matches.set(authorization, { username, found });
    },
  };
}
