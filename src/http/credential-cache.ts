// Successful credential look-ups are reused for up to CREDENTIAL_TTL_MS instead of reading the
// database on every request. Anything that would fail is checked against the database first, so
// a new password or an enable works at once, while a disable, or an old password after a rotate,
// stops working within that time on every instance (the README promises 5 seconds).
//
// The Authorization headers that matched a remembered credential are remembered beside it, so that
// the same header again is found by one look-up instead of being decoded and its password hashed
// (a fifth of the server's instructions per `/me`: docs/performance.md). A header holds the
// password itself: it is used only while its credential is still the one remembered (so never past
// that credential's time), and kept in two generations of CREDENTIAL_TTL_MS, so that none is held
// more than twice that after it matched.
//
// A credential in use is read again in the background in the last quarter of its time, by one
// read, so that it does not run out under the requests using it: each of those would otherwise
// miss it at once and read the database for itself (on PostgreSQL, 40 reads or so every 2 s under
// 64 connections, and those requests held up to 80 ms: docs/performance.md). A credential is
// remembered for CREDENTIAL_TTL_MS from the moment the read that found it began, so a slow read
// cannot stretch that, and a read never replaces what a later-begun one found.
import type { CharityCredential } from '../charities/charity.js';
import { DatabaseBudget } from '../store/budget.js';
import { monotonicClock, type Clock } from '../time.js';
import type { CredentialLookup, Credentials } from './auth.js';

export const CREDENTIAL_TTL_MS = 2000;
/** A remembered credential used when this share of its time or less is left is read again in the background. */
const REFRESH_WHEN_LEFT = 0.25;
const MAX_ENTRIES = 10_000;

export interface CachedCredentials extends Credentials {
  /**
   * Drops what has run out: credentials past their time, and headers past their two generations.
   * Otherwise that happens only as requests come, and an idle server would hold a header, which
   * holds a password, until the next one: the server calls this every quarter of CREDENTIAL_TTL_MS. Returns
   * how many credentials and headers are still held.
   */
  forget(): number;
}

export function cachedCredentials(lookup: CredentialLookup, { ttlMs = CREDENTIAL_TTL_MS, clock = monotonicClock }: { ttlMs?: number; clock?: Clock } = {}): CachedCredentials {
  /** What the read begun at `since` found, remembered until `since + ttlMs`; `undefined` marks a username it did not find. */
  const entries = new Map<string, { found: CharityCredential | undefined; since: number; until: number }>();
  /** Usernames being read again in the background: one read each at a time. */
  const refreshing = new Set<string>();

  const read: CredentialLookup = async (username, budget) => {
    const since = clock();
    const found = await lookup(username, budget);
    const held = entries.get(username);
    if (held && held.since > since) return found; // a read begun later has already answered: it stands
    if (!found) {
      // Marked, not dropped, so that an earlier-begun read answering after cannot bring it back. Only
      // over an entry already there: a username nobody has authenticated with takes no room.
      if (held) entries.set(username, { found, since, until: since });
    } else {
      if (entries.size >= MAX_ENTRIES) entries.clear(); // usernames come from clients: bound the memory
      entries.set(username, { found, since, until: since + ttlMs });
    }
    return found;
  };

  const refresh = (username: string): void => {
    refreshing.add(username);
    // With its own time for the database, as a request's. If it fails, the credential runs out at its
    // time and the next request's own read meets (and reports) the failure.
    read(username, new DatabaseBudget()).then(
      () => refreshing.delete(username),
      () => refreshing.delete(username),
    );
  };

  const recent = (username: string): CharityCredential | undefined => {
    const hit = entries.get(username);
    if (hit?.found === undefined) return undefined;
    const left = hit.until - clock();
    if (left <= 0) return undefined;
    if (left <= ttlMs * REFRESH_WHEN_LEFT && !refreshing.has(username)) refresh(username);
    return hit.found;
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
    fresh: read,
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
    forget() {
      age();
      const now = clock();
      // Counted from the read's start, so a marker of a username not found is kept as long as a
      // credential found by a read begun before it could still be in time: that read, answering
      // late, then finds it and stands aside, or finds none and writes an entry already run out.
      for (const [username, entry] of entries) if (entry.since + ttlMs <= now) entries.delete(username);
      return entries.size + matches.size + olderMatches.size;
    },
  };
}
