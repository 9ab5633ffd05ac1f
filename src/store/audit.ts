// The audit trail of operator actions: appended, never changed (the database refuses; see
// migrations/0007_audit_log.ts). Each change's entry goes in the same transaction as the change.
import { hostname, userInfo } from 'node:os';
import type { Kysely } from 'kysely';
import { nowIso } from '../time.js';
import type { Database } from './schema.js';

/** What was done, to what, in a few facts: never a password, never a donor's personal data. */
export interface AuditEntry {
  action: AuditAction;
  target: string;
  summary?: Record<string, string | number | boolean | null>;
}

export type AuditAction =
  | 'charity create'
  | 'charity rotate'
  | 'charity end-grace'
  | 'charity disable'
  | 'charity enable'
  | 'donations export'
  | 'donor export'
  | 'donor erase'
  | 'donor erase dry run'
  | 'retention apply'
  | 'giftaid claim'
  | 'giftaid files'
  | 'giftaid schedule'
  | 'giftaid mark'
  | 'giftaid reopen'
  | 'giftaid claims kept'
  | 'backup'
  | 'backup prune'
  | 'restore'
  | 'keep-replaced';

export interface AuditRecord {
  id: number;
  at: string;
  action: string;
  target: string;
  os_user: string;
  host: string;
  summary: Record<string, unknown>;
}


/** The operating-system user running this process (by uid where the system has no name for it). */
export function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/** Who is acting: the operating-system user and the host. */
function actor(): { os_user: string; host: string } {
  return { os_user: osUser(), host: hostname() };
}

/** Appends `entry`, within `db` (pass the transaction of the change it records). */
export async function appendAudit(db: Kysely<Database>, entry: AuditEntry): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({ at: nowIso(), action: entry.action, target: entry.target, ...actor(), summary: JSON.stringify(entry.summary ?? {}) })
    .execute();
}

/** The trail in order, from `since` (a stored timestamp) on. */
export async function readAudit(db: Kysely<Database>, since?: string): Promise<AuditRecord[]> {
  let q = db.selectFrom('audit_log').selectAll();
  if (since !== undefined) q = q.where('at', '>=', since);
  return (await q.orderBy('id').execute()).map(toAuditRecord);
}

/** A row of audit_log as stored (read by Kysely, pg or better-sqlite3 alike) as an AuditRecord. */
export function toAuditRecord(r: { id: number | string | bigint; at: string; action: string; target: string; os_user: string; host: string; summary: string }): AuditRecord {
  return { id: Number(r.id), at: r.at, action: r.action, target: r.target, os_user: r.os_user, host: r.host, summary: JSON.parse(r.summary) as Record<string, unknown> };
}

/** A `retention apply` entry's target: the UK day the run was made as of (donors.ts writes it, erasuresAfter reads it). */
export const retentionTarget = (day: string): string => `before ${day}`;
const RETENTION_TARGET = /^before (\d{4}-\d{2}-\d{2})$/;

/** Donors' erasures and retention runs a replaced database recorded after its backup was taken. */
export interface ErasuresSince {
  /** Each `donor erase`: the donor's reference (donorReference), the charity it was limited to, if any, and the entry that first recorded it (entryKey). */
  donors: { reference: string; charity: string | null; original: string }[];
  /**
   * The `retention apply` runs to make again: for each retention period a run used, its last run (a
   * later run with the same period erased all an earlier one did): the period, the UK day it ran
   * as of (undefined if its entry does not say), and the entry that first recorded it. Until
   * 2026-11-29 only the very last run was made again, so what an earlier run with a shorter period
   * had erased came back with the backup.
   */
  retention: { years: number; day: string | undefined; original: string }[];
}

/** An entry a restore made again (an erasure, a charity's change carried over) names the one it repeats (again_of): the entry that first recorded it. */
const originalOf = (e: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target' | 'summary'>): string => (typeof e.summary.again_of === 'string' ? e.summary.again_of : entryKey(e));

/** Whether `restored` (heldBy) holds the entry `e`, or the one it repeats: if the backup holds that one, so is it held. */
const heldIn = (restored: ReadonlySet<string>, e: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target' | 'summary'>): boolean => restored.has(entryKey(e)) || restored.has(originalOf(e));

/**
 * What a replaced database's trail erased that the restored trail (the backup's) does not hold:
 * put back, the backup brings those donors' data back with it, so a restore erases it again
 * (cli/backup.ts). An entry is the backup's if the backup's trail holds it, the same id with the
 * same time, action and target (entryKey). Compared by time (until 2026-11-28), an erasure whose
 * time came before the backup's last entry but whose transaction committed after the backup began
 * was missed; compared by id alone, after an earlier restore (of the wrong backup, say) had sent the
 * two trails' ids down two histories, an erasure whose id the backup used for something else was.
 */
export function erasuresAfter(trail: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target' | 'summary'>[], restored: ReadonlySet<string>): ErasuresSince {
  const entries = trail.filter((e) => !heldIn(restored, e));
  const donors = entries.filter((e) => e.action === 'donor erase').map((e) => ({ reference: e.target, charity: (e.summary.charity as string | null | undefined) ?? null, original: originalOf(e) }));
  // Each period's last run of all, in the order of those last runs (one met again moves to the end), then
  // those the backup does not hold: picked among those it does not hold, a run made again held its own, and
  // the run before it became the last, made again by the next keep-replaced (until 2026-11-29; a review).
  const lastOfPeriod = new Map<number, (typeof trail)[number]>();
  for (const e of trail.filter((e) => e.action === 'retention apply')) {
    const years = Number(e.summary.retention_years);
    lastOfPeriod.delete(years);
    lastOfPeriod.set(years, e);
  }
  const retention = [...lastOfPeriod]
    .filter(([, e]) => !heldIn(restored, e))
    .map(([years, e]) => ({ years, day: RETENTION_TARGET.exec(e.target)?.[1], original: originalOf(e) }));
  return { donors, retention };
}

/**
 * A charity's sign-up, rotation, end of grace, disable or enable, as its trail entry names it, the
 * entry that first recorded it (entryKey), and who made it there (`user@host`, as the entry says).
 */
export type CharityChange = Pick<AuditRecord, 'action' | 'target' | 'summary'> & { original: string; madeBy: string };

/** What a trail records of a charity's sign-up, password and state. */
const CHARITY_CHANGES = new Set(['charity create', 'charity rotate', 'charity end-grace', 'charity disable', 'charity enable']);

/**
 * The charities' sign-ups, rotations, ends of grace, disables and enables a replaced database's
 * trail records and the backup's does not (entry by entry, as erasuresAfter: one a restore carried
 * over counts as the one it repeats), in order: what a restore carries over (cli/backup.ts), as the
 * backup brings each charity back as it was then.
 */
export function charityChangesAfter(trail: AuditRecord[], restored: ReadonlySet<string>): CharityChange[] {
  return trail
    .filter((e) => CHARITY_CHANGES.has(e.action) && !heldIn(restored, e))
    .map((e) => ({ action: e.action, target: e.target, summary: e.summary, original: originalOf(e), madeBy: `${e.os_user}@${e.host}` }));
}

/** The charities whose sign-up, password or state `entries` change by the operator's hand, not as a restore's carry of another database's change (again_of): each with those changes' actions. */
export function charitiesChangedIn(entries: Pick<AuditRecord, 'action' | 'target' | 'summary'>[]): Map<string, string[]> {
  const changed = new Map<string, string[]>();
  for (const e of entries) if (CHARITY_CHANGES.has(e.action) && typeof e.summary.again_of !== 'string') changed.set(e.target, [...(changed.get(e.target) ?? []), e.action]);
  return changed;
}

/**
 * The entries a trail holds, for erasuresAfter and charityChangesAfter: each by entryKey, and each
 * erasure a restore made again, or charity's change it carried over, also as the one it repeats
 * (again_of), so that a trail holding only the repeat is taken to hold the original too.
 */
export function heldBy(trail: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target' | 'summary'>[]): Set<string> {
  const held = new Set(trail.map(entryKey));
  for (const e of trail) if (typeof e.summary.again_of === 'string') held.add(e.summary.again_of);
  return held;
}

/** An audit entry as one history's: two trails share an entry only if they agree on all of this. */
export function entryKey(e: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target'>): string {
  return JSON.stringify([Number(e.id), e.at, e.action, e.target]);
}

/**
 * Whether a database whose trail is `later` shares its history with the one a backup of trail
 * `backup` was taken of: it holds an entry of the backup's (entryKey), as the database a backup was
 * taken of does, and one a wrong backup was restored over since (whose claims it then took in). An
 * empty backup trail proves nothing. A replaced database, or one keep-replaced is given, settles the
 * claims since a backup only so: one the server had just made, or another application's, settled
 * them (a review, 2026-11-30).
 */
export function continuesFrom(later: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target'>[], backup: Pick<AuditRecord, 'id' | 'at' | 'action' | 'target'>[]): boolean {
  const held = new Set(backup.map(entryKey));
  return later.some((e) => held.has(entryKey(e)));
}

/** The trail a restore put back: the entries before the latest `restore` entry (all of them if there is none). */
export function restoredTrail<E extends Pick<AuditRecord, 'action'>>(trail: E[]): E[] {
  const at = trail.findLastIndex((e) => e.action === 'restore');
  return at < 0 ? trail : trail.slice(0, at);
}

/**
 * The restore, if any, after which Gift Aid claims made since its backup are not known to this
 * database, and nothing has settled them since: giftaid claim refuses until something does (a
 * claim on one would take their donations again, under their numbers; a Gift Aid review,
 * 2026-11-30). The latest `restore` entry decides: one into a new or empty database, or over one
 * that was itself still unsettled, says `claims_since_backup: "unknown"`; one over a settled
 * database, `"kept"`. After it, a `keep-replaced` that kept the claims it was given (`claims_kept`)
 * or a `giftaid claim` (made with --checked-since-backup, as the refusal asks) settles it.
 */
export function claimsUnsettledBy(trail: Pick<AuditRecord, 'at' | 'action' | 'summary'>[]): Pick<AuditRecord, 'at' | 'summary'> | undefined {
  const at = trail.findLastIndex((e) => e.action === 'restore');
  const restore = trail[at];
  if (restore?.summary.claims_since_backup !== 'unknown') return undefined;
  const settled = trail.slice(at + 1).some((e) => (e.action === 'keep-replaced' && e.summary.claims_kept === true) || e.action === 'giftaid claim');
  return settled ? undefined : restore;
}
