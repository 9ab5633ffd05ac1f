// Successful credential look-ups are reused for up to CREDENTIAL_TTL_MS instead of reading the
// database on every request. Anything that would fail is checked against the database first, so
// a new password or an enable works at once, while a disable, or an old password after a rotate,
// stops working within that time on every instance (the interface promises 5 seconds).
import type { CharityCredential } from '../charities/charity.js';
import { monotonicClock, type Clock } from '../time.js';
import type { CredentialLookup, Credentials } from './auth.js';

export const CREDENTIAL_TTL_MS = 2000;
const MAX_ENTRIES = 10_000;

export function cachedCredentials(lookup: CredentialLookup, { ttlMs = CREDENTIAL_TTL_MS, clock = monotonicClock }: { ttlMs?: number; clock?: Clock } = {}): Credentials {
  const entries = new Map<string, { found: CharityCredential; until: number }>();
  return {
    recent(username) {
      const hit = entries.get(username);
      return hit && hit.until > clock() ? hit.found : undefined;
    },
    async fresh(username, budget) {
      const found = await lookup(username, budget);
      if (!found) entries.delete(username);
      else {
        if (entries.size >= MAX_ENTRIES) entries.clear(); // usernames come from clients: bound the memory
        entries.set(username, { found, until: clock() + ttlMs });
      }
      return found;
    },
  };
}
