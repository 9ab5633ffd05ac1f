import { InvalidArgumentError } from 'commander';
import { isEmail } from '../donations/validate.js';
import { periodEndOf } from '../giftaid/schedule.js';
import { dayIso, endOfDayIso, isRealDate, startOfDayIso } from '../time.js';

/** A mistake in what the operator asked for: exit status 2. */
export class UsageError extends Error {}

/** No charity has this username: a usage error. */
export function unknownCharity(username: string): UsageError {
  return new UsageError(`no charity has the username ${JSON.stringify(username)}.`);
}

export function emailArgument(value: string): string {
  if (!isEmail(value)) throw new InvalidArgumentError('It must be a valid email address.');
  return value;
}

export function nameArgument(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('It must not be empty.');
  if (value.length > 255) throw new InvalidArgumentError('It must be at most 255 characters.');
  // A control character pasted with the name (or a code point no text may hold) would go into every
  // Gift Aid schedule's title, every export and every answer to /me: refused here, named by its code.
  const bad = /[\p{Cc}\uFFFE\uFFFF]|\p{Cs}/u.exec(value);
  if (bad) throw new InvalidArgumentError(`It must not hold control characters (U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} at character ${bad.index + 1}).`);
  return value;
}

type Day = { year: number; month: number; day: number };

function parseDay(value: string): Day {
  const m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(value);
  const day = m && { year: Number(m[1]), month: Number(m[2]), day: Number(m[3]) };
  if (!day) throw new InvalidArgumentError('It must be a date as YYYY-MM-DD.');
  if (!isRealDate(day.year, day.month, day.day)) throw new InvalidArgumentError('It is not a day of the calendar.');
  return day;
}

/** A day, as YYYY-MM-DD: for a command that decides itself where the day starts and ends (Gift Aid's are UK days). */
export function dayArgument(value: string): string {
  const d = parseDay(value);
  return dayIso(d.year, d.month, d.day);
}

/** --period-end: the day an accounting period ends each year, as MM-DD (one every year has). */
export function periodEndArgument(value: string): string {
  const end = periodEndOf(value);
  if (end === undefined) throw new InvalidArgumentError('It must be a day of the year as MM-DD (04-05 for 5 April; 02-29 for the last day of February).');
  return end;
}

/** --from: the start of that day in UTC, in the stored timestamp format. */
export function fromArgument(value: string): string {
  const d = parseDay(value);
  return startOfDayIso(d.year, d.month, d.day);
}

/** --to: the end of that day in UTC, so the bound is inclusive. */
export function toArgument(value: string): string {
  const d = parseDay(value);
  return endOfDayIso(d.year, d.month, d.day);
}

/** The longest grace period `charity rotate --grace` gives an old password: a week, as Stripe's key roll. */
export const LONGEST_GRACE_MS = 7 * 24 * 3_600_000;
const GRACE_UNITS_MS = { m: 60_000, h: 3_600_000, d: 24 * 3_600_000 } as const;

/** --grace: how long an old password goes on working, as a whole number of minutes, hours or days (30m, 24h, 7d); in milliseconds. */
export function graceArgument(value: string): number {
  const m = /^([0-9]+)(m|h|d)$/.exec(value);
  if (!m) throw new InvalidArgumentError('It must be a whole number of minutes, hours or days: 30m, 24h or 7d.');
  const ms = Number(m[1]) * GRACE_UNITS_MS[m[2] as keyof typeof GRACE_UNITS_MS];
  if (ms === 0) throw new InvalidArgumentError('It must be more than nothing: leave --grace out for the old password to stop at once.');
  if (ms > LONGEST_GRACE_MS) throw new InvalidArgumentError('It must be at most 7d: an old password works for a week at most.');
  return ms;
}
