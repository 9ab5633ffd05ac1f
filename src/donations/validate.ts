// Validation of a create request, driven by the field table. Every failing field is
// reported at once, with messages in Laravel's style that name the field in words.
// One module each rather than validator's index, which loads all hundred of its checks at start-up.
// (At run time the default import is the function; its `.default` is the function again, as typed.)
import isEmailModule from 'validator/lib/isEmail.js';
import isIPModule from 'validator/lib/isIP.js';
import { AMOUNT_MAX, AMOUNT_MIN, compiledObject, DAY_MONTH_YEAR, DONATION_FIELDS, DONATION_KEYS, FLAG_WORDS, YES_NO, type FieldSpec, type NewDonation } from './fields.js';
import { isRealDate, startOfDayIso } from '../time.js';

export type ValidationErrors = Record<string, string[]>;
export type ValidationResult = { ok: true; donation: NewDonation } | { ok: false; errors: ValidationErrors };

const isIP = isIPModule.default;

/**
 * The one e-mail rule, for donors and for charities alike: validator's isEmail with its defaults.
 * Its length limits are checked here, the same limits, and the rest by validator with
 * `ignore_max_length`: validator counts a string's UTF-8 bytes by splitting its encodeURI() into a
 * string per byte, 0.73 of the 1.79 µs isEmail took for the benchmark's addresses (1.06 without).
 * test/donations/validate.test.ts holds the two to the same answers at and around each limit.
 */
export function isEmail(address: string): boolean {
  const at = address.lastIndexOf('@'); // validator's domain: what follows the last @
  const domain = address.slice(at + 1);
  return (
    address.length <= 254 && // the whole address, in UTF-16 units
    // A character that shows as nothing (a zero-width space pasted with the address, a soft hyphen):
    // validator takes it, and a donor's request naming the address as it looks then missed it.
    !INVISIBLE.test(address) &&
    at >= 0 &&
    Buffer.byteLength(address.slice(0, at)) <= 64 && // the local part, in UTF-8 bytes
    Buffer.byteLength(domain) <= 254 &&
    !LABEL_TOO_LONG.test(domain) && // isFQDN's labels: 63 at most
    isEmailModule.default(address, { ignore_max_length: true })
  );
}

const INVISIBLE = /\p{Default_Ignorable_Code_Point}/u;
/** A label of a domain over 63 UTF-16 units: 64 in a row without a dot (a regular expression, not a split: 30 ns, not 240). */
const LABEL_TOO_LONG = /[^.]{64}/;

type Check = { value: unknown; errors?: undefined } | { value?: undefined; errors: string[] };

const msg = {
  required: (f: FieldSpec) => `The ${f.label} is required.`,
  string: (f: FieldSpec) => `The ${f.label} must be a string.`,
  nul: (f: FieldSpec) => `The ${f.label} must not contain null characters.`,
  unicode: (f: FieldSpec) => `The ${f.label} must be valid Unicode text.`,
  maxLength: (f: FieldSpec) => `The ${f.label} must not be greater than ${f.maxLength} characters.`,
  email: (f: FieldSpec) => `The ${f.label} must be a valid email address.`,
  ip: (f: FieldSpec) => `The ${f.label} must be a valid IP address.`,
  // Both say what would do, for a person mapping fields in an automation tool (Zapier, Make), who sends
  // a form's "Yes" or a shop's "£10" and could not tell from "is invalid" what to change (a review, 2026-11-30).
  choice: (f: FieldSpec, choices: readonly string[]) => `The selected ${f.label} is invalid: it must be ${alternatives(choices)}, in lower case.`,
  number: (f: FieldSpec) => `The ${f.label} must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.`,
  min: (f: FieldSpec) => `The ${f.label} must be at least ${AMOUNT_MIN}.`,
  max: (f: FieldSpec) => `The ${f.label} must not be greater than ${AMOUNT_MAX}.`,
  decimals: (f: FieldSpec) => `The ${f.label} must not have more than 2 decimal places.`,
  dateFormat: (f: FieldSpec) => `The ${f.label} does not match the format DD-MM-YYYY.`,
  dateReal: (f: FieldSpec) => `The ${f.label} is not a valid date.`,
  flag: (f: FieldSpec) => `The ${f.label} must be yes or no (or true, false, 1, 0 or on).`,
  inQuery: (f: FieldSpec) => `The ${f.label} must be sent in the request body, not in the URL's query string (a URL is kept in logs).`,
};

/** `a or b`, `a, b or c`. */
const alternatives = (words: readonly string[]): string => (words.length > 1 ? `${words.slice(0, -1).join(', ')} or ${words.at(-1)}` : (words[0] ?? ''));

const isAbsent = (v: unknown) => v === undefined || v === null;

/** A string's length as a person counts it: code points, not UTF-16 units. */
function length(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * The checks every string field shares: type; well-formed Unicode (a lone surrogate from a JSON
 * \ud800 escape cannot be stored as sent: each database would quietly replace it differently);
 * NUL characters (PostgreSQL's text cannot hold them); length.
 */
function checkString(f: FieldSpec, v: unknown): string[] {
  if (typeof v !== 'string') return [msg.string(f)];
  if (!v.isWellFormed()) return [msg.unicode(f)];
  const errors: string[] = [];
  if (v.includes('\u0000')) errors.push(msg.nul(f));
  if (f.maxLength !== undefined && v.length > f.maxLength && length(v) > f.maxLength) errors.push(msg.maxLength(f));
  return errors;
}

function checkText(f: FieldSpec, v: unknown): Check {
  if (isAbsent(v)) return { value: null };
  const errors = checkString(f, v);
  return errors.length ? { errors } : { value: v };
}

function checkEmail(f: FieldSpec, v: unknown): Check {
  if (isAbsent(v) || v === '') return { errors: [msg.required(f)] };
  const errors = checkString(f, v);
  if (errors.length) return { errors };
  return isEmail(v as string) ? { value: v } : { errors: [msg.email(f)] };
}

function checkIp(f: FieldSpec, v: unknown): Check {
  if (isAbsent(v) || v === '') return { value: null };
  const errors = checkString(f, v);
  if (errors.length) return { errors };
  // No IPv6 zone (fe80::1%eth0): it names an interface of the machine that saw the address, and
  // means nothing of a donor's; RFC 4291's text form, which the OpenAPI document's ipv6 names, has none.
  return isIP(v as string) && !(v as string).includes('%') ? { value: v } : { errors: [msg.ip(f)] };
}

function checkChoice(f: FieldSpec, v: unknown, choices: readonly string[] = f.choices ?? []): Check {
  if (isAbsent(v) || v === '') return f.required ? { errors: [msg.required(f)] } : { value: null };
  return typeof v === 'string' && choices.includes(v) ? { value: v } : { errors: [msg.choice(f, choices)] };
}

function checkYesNo(f: FieldSpec, v: unknown): Check {
  const checked = checkChoice(f, v, YES_NO);
  return checked.errors ? checked : { value: checked.value === 'yes' }; // absent (if optional): no
}

const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?$/;

/**
 * Amounts are checked and converted as text, never through a float: a string is echoed
 * exactly as sent, a JSON number as its shortest decimal string.
 */
function checkAmount(f: FieldSpec, v: unknown): Check {
  if (isAbsent(v) || v === '') return { errors: [msg.required(f)] };
  let text: string;
  if (typeof v === 'number') {
    // JSON has no Infinity: one is a number too large for a double (1e309, or 400 digits), told it is too large, as 1e10 is.
    if (!Number.isFinite(v)) return { errors: [v === Infinity ? msg.max(f) : v === -Infinity ? msg.min(f) : msg.number(f)] };
    // Outside this range String() would switch to exponent notation.
    if (v < 0.01) return { errors: [msg.min(f)] };
    if (v > 999999999.99) return { errors: [msg.max(f)] };
    text = String(v);
  } else if (typeof v === 'string') {
    text = v;
  } else {
    return { errors: [msg.number(f)] };
  }
  const m = DECIMAL.exec(text);
  if (!m) return { errors: [msg.number(f)] };
  const negative = m[1] === '-';
  const whole = m[2]!.replace(/^0+/, '');
  const fraction = m[3] ?? '';
  const errors: string[] = [];
  const belowMin = negative || (whole === '' && !/[1-9]/.test(fraction.slice(0, 2)));
  if (belowMin) errors.push(msg.min(f));
  if (fraction.length > 2) errors.push(msg.decimals(f));
  const aboveMax = whole.length > 9 || (whole === '999999999' && /[1-9]/.test(fraction.slice(2)));
  if (!negative && aboveMax) errors.push(msg.max(f));
  // A value in range that is still too long can only be leading zeros: stored and echoed as sent, so bounded.
  if (errors.length === 0 && f.maxLength !== undefined && text.length > f.maxLength) errors.push(msg.maxLength(f));
  if (errors.length) return { errors };
  const minor = Number(whole || '0') * 100 + Number(fraction.padEnd(2, '0'));
  return { value: { text, minor } };
}

function checkDate(f: FieldSpec, v: unknown): Check {
  if (isAbsent(v)) return { value: null };
  if (typeof v !== 'string') return { errors: [msg.dateFormat(f)] };
  const m = DAY_MONTH_YEAR.exec(v);
  if (!m) return { errors: [msg.dateFormat(f)] };
  const [day, month, year] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (!isRealDate(year, month, day)) return { errors: [msg.dateReal(f)] };
  return { value: startOfDayIso(year, month, day) };
}

const FLAG_TRUE = new Set<unknown>([true, 1, ...FLAG_WORDS.true]);
const FLAG_FALSE = new Set<unknown>([false, 0, ...FLAG_WORDS.false]);

function checkFlag(f: FieldSpec, v: unknown): Check {
  if (isAbsent(v)) return { value: false };
  const given = typeof v === 'string' ? v.toLowerCase() : v;
  if (FLAG_TRUE.has(given)) return { value: true };
  if (FLAG_FALSE.has(given)) return { value: false };
  return { errors: [msg.flag(f)] };
}

const CHECKS: Record<FieldSpec['kind'], (f: FieldSpec, v: unknown) => Check> = {
  text: checkText,
  email: checkEmail,
  ip: checkIp,
  choice: checkChoice,
  yes_no: checkYesNo,
  amount: checkAmount,
  date: checkDate,
  flag: checkFlag,
};

/** The validated donation from its values, in DONATION_KEYS' order. */
const donationOf = compiledObject<[values: unknown[]], NewDonation>(['values'], DONATION_KEYS.map((key, i) => [key, `values[${i}]`]));

/**
 * What validation makes of each optional field that is not sent (null; false for a flag or an
 * optional yes/no): the idempotency fingerprint leaves such values out, so a field added to the
 * table later, whatever its kind, does not change the fingerprint of a body that does not send it.
 */
export const VALUE_WHEN_ABSENT: ReadonlyMap<string, unknown> = new Map(
  DONATION_FIELDS.flatMap((f) => {
    const absent = CHECKS[f.kind](f, undefined);
    return absent.errors ? [] : [[f.name, absent.value]];
  }),
);

/**
 * The donation's fields among the names a request's query string gives (as a form's are read, PHP's
 * way), each with its error, or undefined when it names none. Laravel would merge them into the
 * input; taken, a donor's details would sit in every log of the URL on the way (a proxy's, a load
 * balancer's), and ignored, the 422 said "is required" of fields that were sent (an integrator's review).
 */
export function fieldsInQuery(names: readonly string[]): ValidationErrors | undefined {
  let errors: ValidationErrors | undefined;
  for (const f of DONATION_FIELDS) if (names.includes(f.name)) (errors ??= {})[f.name] = [msg.inQuery(f)];
  return errors;
}

/**
 * Validates a request body (already known to be a plain object); unknown fields are ignored. The
 * donation's keys come in the table's order, an amount's minor units right after it: its JSON is
 * the idempotency fingerprint, so the order must not change.
 */
export function validateDonation(body: Record<string, unknown>): ValidationResult {
  const values: unknown[] = [];
  const errors: ValidationErrors = {};
  for (const f of DONATION_FIELDS) {
    const raw = Object.hasOwn(body, f.name) ? body[f.name] : undefined;
    const result = CHECKS[f.kind](f, raw);
    if (result.errors) {
      errors[f.name] = result.errors;
    } else if (f.kind === 'amount') {
      const amount = result.value as { text: string; minor: number };
      values.push(amount.text, amount.minor); // the amount's minor units right after it
    } else {
      values.push(result.value);
    }
  }
  if (Object.keys(errors).length > 0) return { ok: false, errors };
  return { ok: true, donation: donationOf(values) };
}
