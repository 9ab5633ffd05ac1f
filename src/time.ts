// The one place that reads the clock and formats timestamps.
// Every timestamp Almoner stores or returns is ISO 8601 UTC with microseconds:
// YYYY-MM-DDTHH:MM:SS.ffffffZ. Fixed width, so stored text sorts in time order.

/**
 * The wall clock in microseconds (Date has only milliseconds): the high-resolution clock, which
 * never jumps, plus its distance from the system's clock, looked at again each second and taken
 * when it has moved by more than a few milliseconds (a clock set right by NTP after the process
 * started, a VM restored from a snapshot). Taken once at start (until 2026-11-28), a server started
 * before the clock was set kept the wrong time until it restarted: donations dated days off, and an
 * Idempotency-Key retried after a restart past its seeming 24 hours stored twice.
 */
export class WallClock {
  private offsetMs: number;
  private lookedAt: number;

  constructor(
    private readonly monotonicMs: () => number = () => performance.now(),
    private readonly systemMs: () => number = () => Date.now(),
  ) {
    this.lookedAt = this.monotonicMs();
    this.offsetMs = this.systemMs() - this.lookedAt;
  }

  micros(): number {
    const now = this.monotonicMs();
    if (now - this.lookedAt >= 1000) {
      this.lookedAt = now;
      const offset = this.systemMs() - now;
      // Date's milliseconds would make each look move the time back and forth by up to one: only a real move is taken.
      if (Math.abs(offset - this.offsetMs) > 5) this.offsetMs = offset;
    }
    return Math.floor((this.offsetMs + now) * 1000);
  }
}

const wallClock = new WallClock();

/** Microseconds since the Unix epoch (WallClock). */
export function nowMicros(): number {
  return wallClock.micros();
}

export function formatMicros(micros: number): string {
  const second = Math.floor(micros / 1_000_000);
  let prefix = secondPrefixes.get(second);
  if (prefix === undefined) {
    // Date's formatting costs more than the rest of a create's timestamps together: done once a second.
    if (secondPrefixes.size >= 8) secondPrefixes.clear();
    prefix = new Date(second * 1000).toISOString().slice(0, 20); // 2021-02-25T13:45:12.
    secondPrefixes.set(second, prefix);
  }
  return `${prefix}${String(micros - second * 1_000_000).padStart(6, '0')}Z`;
}

/** A few recent seconds formatted (now, and a key's expiry a day on), by seconds since the epoch. */
const secondPrefixes = new Map<number, string>();

export function nowIso(): string {
  return formatMicros(nowMicros());
}

/**
 * A timer for judging another party's silence (the database's, Redis's, the primary process's):
 * `verdict` runs `ms` from now, but only once the event loop has since read whatever arrived. A
 * timer fires before the loop polls its sockets, so on a server busy for longer than `ms` (a flood
 * handled in one turn) an answer already there was taken for a silence: a create stored and
 * answered 503 "outcome unknown" (a review, 2026-11-30). setImmediate runs after that poll.
 * `verdict` must look whether the answer came meanwhile: clearTimeout stops it only until the timer fires.
 */
export function setDeadline(verdict: () => void, ms: number): NodeJS.Timeout {
  return setTimeout(() => setImmediate(verdict), ms);
}

/** Milliseconds on performance.now()'s scale, for measuring how long something has lasted. */
export type Clock = () => number;

/** The real clock; tests pass one they move forward instead of waiting. */
export const monotonicClock: Clock = () => performance.now();

/** A calendar day as YYYY-MM-DD, the year in four digits, so that days compare as strings. */
export function dayIso(year: number, month: number, day: number): string {
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`;
}

/** A calendar day as the start of that day in UTC, in the stored format. */
export function startOfDayIso(year: number, month: number, day: number): string {
  return `${dayIso(year, month, day)}T00:00:00.000000Z`;
}

/** The last instant of a calendar day, in the stored format; pairs with startOfDayIso for inclusive ranges. */
export function endOfDayIso(year: number, month: number, day: number): string {
  return `${dayIso(year, month, day)}T23:59:59.999999Z`;
}

export function isRealDate(year: number, month: number, day: number): boolean {
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  return day <= daysInMonth(year, month);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) {
    const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
    return leap ? 29 : 28;
  }
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

// Made on first use: loading the time-zone data costs about 30 ms, which every command and the
// server's start-up would pay, while only Gift Aid needs it.
let ukDayFormat: Intl.DateTimeFormat | undefined;

/** The calendar day in the UK (where Gift Aid is claimed) at an instant, as YYYY-MM-DD. */
export function ukDay(at: Date): string {
  ukDayFormat ??= new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit' });
  return ukDayFormat.format(at);
}

/**
 * The first instant of a UK calendar day (YYYY-MM-DD), in the stored format: midnight in London,
 * which in British Summer Time is 23:00 UTC the day before. A donation sent with a date is stored
 * at midnight UTC of it, which is always inside its UK day; one sent without is on the UK day it
 * was recorded (giftaid/schedule.ts's donationDay), so a range of UK days needs these bounds.
 */
export function ukStartOfDayIso(day: string): string {
  const before = new Date(Date.parse(`${day}T00:00:00Z`) - DAY_MS).toISOString().slice(0, 10);
  return summerTimeAtEndOf(before) ? `${before}T23:00:00.000000Z` : `${day}T00:00:00.000000Z`;
}

/** The last instant of a UK calendar day (YYYY-MM-DD), in the stored format; pairs with ukStartOfDayIso. */
export function ukEndOfDayIso(day: string): string {
  return summerTimeAtEndOf(day) ? `${day}T22:59:59.999999Z` : `${day}T23:59:59.999999Z`;
}

const DAY_MS = 86_400_000;

/** Whether London is an hour ahead of UTC at 23:00 UTC on `day`: then its next day has begun there. */
function summerTimeAtEndOf(day: string): boolean {
  const eleven = Date.parse(`${day}T23:00:00Z`);
  return ukDay(new Date(eleven)) === new Date(eleven + 3_600_000).toISOString().slice(0, 10);
}
