// Test support for the reliability tests: many distinct, varied donations; what the API must
// answer for each; creates that report "no answer" instead of throwing; and what is stored.
import assert from 'node:assert/strict';
import { signUpCharity } from '../../src/charities/signup.js';
import type { DatabaseLocation } from '../../src/config.js';
import { toDonationRecord } from '../../src/donations/donation.js';
import { validateDonation } from '../../src/donations/validate.js';
import { openStore } from '../../src/store/open.js';
import type { ExportedDonation } from '../../src/store/store.js';
import { exampleDonation, RECORD_KEYS, TIMESTAMP } from './app.js';
import { rawSql, type TestDatabase } from './backends.js';

export type Body = Record<string, unknown>;
export type ApiRecord = Record<string, unknown>;

const OMIT = Symbol('omit');
type Choice = unknown | typeof OMIT;

function pick(values: Choice[], i: number, step: number): Choice {
  return values[(i * step + step) % values.length];
}

/**
 * Donation number `i` for `email`: every field varies (present, omitted, null, empty, long,
 * non-ASCII, string or number amounts, dates or none), each with its own period so the
 * combinations differ from one request to the next.
 */
export function variedDonation(email: string, i: number): Body {
  const fields: Record<string, Choice> = {
    donor_first_name: pick(['Zoë', null, '', 'Jean-Luc', OMIT, 'A'.repeat(255), `First ${i}`], i, 1),
    donor_last_name: pick(['Doe', "O'Brien", OMIT, '李', null], i, 3),
    donor_email: email,
    donor_phone: pick(['07700 900123', null, OMIT, '', '+44 20 7946 0958'], i, 2),
    donor_address: pick(['12 High Street', `Flat ${i}\n2 Long Road`, OMIT, 'x'.repeat(1000), null], i, 7),
    donor_city: pick(['London', 'Île-de-France', OMIT, null, ''], i, 11),
    donor_postcode: pick(['SW1A 1AA', OMIT, '', 'EH1 1YZ'], i, 5),
    donor_ip: pick(['203.0.113.7', '', '2001:db8::1', OMIT, null], i, 13),
    gift_aid: i % 2 === 0 ? 'yes' : 'no',
    amount: pick([`${(i % 997) + 1}.${String(i % 100).padStart(2, '0')}`, (i % 500) + 0.25, '020.50', i + 1, '0.01'], i, 17),
    payment_method: pick(['cash', 'card', OMIT, null, 'direct debit'], i, 19),
    payment_confirmation_number: pick([`PAY-${i}`, '', OMIT, null], i, 23),
    donation_type: pick(['one-time', 'recurring', 'renewal'], i, 1),
    donation_date: pick([`${String((i % 28) + 1).padStart(2, '0')}-${String((i % 12) + 1).padStart(2, '0')}-20${String(i % 30).padStart(2, '0')}`, OMIT, null, '29-02-2024'], i, 29),
    zakat_donation: pick(['yes', 'no', true, false, OMIT, null], i, 31),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== OMIT));
}

/** Checks that `record` is exactly what the interface answers for `body`, id and 16 keys included. */
export function assertRecordFor(record: ApiRecord, body: Body, what: string): void {
  assert.deepEqual(Object.keys(record), RECORD_KEYS, `${what}: the record's keys`);
  assert.ok(Number.isSafeInteger(record.id) && (record.id as number) > 0, `${what}: id ${String(record.id)}`);
  const asSent = (key: string) => (body[key] === undefined ? null : body[key]);
  for (const key of ['donor_first_name', 'donor_last_name', 'donor_email', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'payment_method', 'payment_confirmation_number', 'donation_type', 'gift_aid']) {
    assert.equal(record[key], asSent(key), `${what}: ${key}`);
  }
  assert.equal(record.donor_ip, body.donor_ip === '' ? null : asSent('donor_ip'), `${what}: donor_ip`);
  assert.equal(record.amount, String(body.amount), `${what}: amount`);
  const date = body.donation_date;
  if (typeof date === 'string') {
    const [dd, mm, yyyy] = date.split('-');
    assert.equal(record.donation_date, `${yyyy}-${mm}-${dd}T00:00:00.000000Z`, `${what}: donation_date`);
  } else {
    assert.match(String(record.donation_date), TIMESTAMP, `${what}: donation_date`);
  }
  const zakat = body.zakat_donation;
  assert.equal(record.zakat_donation, zakat === 'yes' || zakat === true, `${what}: zakat_donation`);
}

export type Outcome =
  | { kind: 'answered'; status: number; body: unknown; at: number }
  /** The status arrived but the body did not (the connection died while it was read). */
  | { kind: 'status-only'; status: number; error: string; at: number }
  | { kind: 'no-answer'; error: string; at: number };

function describeError(err: unknown): string {
  const e = err as { message?: string; code?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.code ?? e.cause?.message ?? e.message ?? String(err);
}

/** POST /api/v1/donation/create over fetch; never throws: a failed connection is an outcome. */
export async function create(baseUrl: string, authorization: string, body: Body, timeoutMs = 15_000): Promise<Outcome> {
  let res: Response;
  try {
    res = await fetch(`${baseUrl}/api/v1/donation/create`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    return { kind: 'no-answer', error: describeError(err), at: Date.now() };
  }
  try {
    const text = await res.text();
    return { kind: 'answered', status: res.status, body: JSON.parse(text) as unknown, at: Date.now() };
  } catch (err) {
    return { kind: 'status-only', status: res.status, error: describeError(err), at: Date.now() };
  }
}

export interface StoredRow {
  record: ApiRecord;
  row: ExportedDonation;
}

/** Every stored donation, read back through a Store of its own (opened, read, closed). */
export async function storedDonations(location: DatabaseLocation): Promise<StoredRow[]> {
  const store = await openStore(location);
  try {
    const rows: StoredRow[] = [];
    for await (const d of store.exportDonations({})) {
      const record: ApiRecord = toDonationRecord(d);
      rows.push({ record, row: d });
    }
    return rows;
  } finally {
    await store.close();
  }
}

/** Exact pence of a decimal amount string ("020.5" → 2050), without floating point. */
export function pence(amount: string): number {
  const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(amount);
  assert.ok(m, `not a plain decimal amount: ${amount}`);
  return Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'));
}

/** A stored row that is whole: the record equals what its request sent, and the internal columns agree. */
export function assertCompleteRow(stored: StoredRow, body: Body, charity: string, what: string): void {
  assertRecordFor(stored.record, body, what);
  assert.equal(stored.row.charity, charity, `${what}: charity`);
  assert.equal(stored.row.amount_minor, pence(stored.row.amount), `${what}: amount_minor`);
  assert.match(stored.row.recorded_at, TIMESTAMP, `${what}: recorded_at`);
}

/**
 * A charity with `count` donations of 2015 recorded then, all due for erasure (`retention apply`):
 * enough, at 1,500, that a dry run's lines fill a pipe no one reads, and the command waits for its reader.
 */
export async function donationsDueForErasure(database: TestDatabase, count: number): Promise<void> {
  const store = await openStore(database.location);
  try {
    const { charity } = await signUpCharity(store, { name: 'Old', email: 'o@example.org' });
    const valid = validateDonation(exampleDonation({ gift_aid: 'no', donation_date: '15-03-2015' }));
    assert.ok(valid.ok);
    for (let i = 0; i < count; i += 100) await Promise.all(Array.from({ length: Math.min(100, count - i) }, () => store.recordDonation(charity.id, valid.donation)));
  } finally {
    await store.close();
  }
  await rawSql(database.url, 'update donations set recorded_at = donation_date');
}
