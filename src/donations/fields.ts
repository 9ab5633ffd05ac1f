// The donation's fields as data: the one place a field is named (besides facts of past releases:
// the keys Almoner 0.1 fingerprinted, http/idempotency.ts). Everything else is derived from
// this table: the request's and the record's types and JSON Schemas (schema.ts, and so the OpenAPI
// document), validation and its messages (validate.ts), the record's JSON (donation.ts), the stored
// row and its column types (store/schema.ts, store/rows.ts) and the idempotency fingerprint (the
// validated donation, in this order). A new field is a line here and a migration adding its column
// (a file in store/migrations/, named in its index.ts); the tests, which state the interface for
// themselves, then want its key in test/support/app.ts (RECORD_KEYS, EXAMPLE_RECORD), as the README says.

/**
 * What a field holds. Each kind fixes the field's checks, its messages, what a request may send,
 * what is kept and what the record returns (see KindTypes).
 */
export type FieldKind =
  | 'text' // optional free text: null, "" or a string
  | 'email'
  | 'ip'
  | 'choice' // one of `choices`, exactly, kept and returned as sent
  | 'yes_no' // "yes" or "no": kept as a boolean, returned as "yes" or "no"
  | 'amount' // kept as sent and, exactly, in minor units (`<name>_minor`)
  | 'date' // DD-MM-YYYY in a request; the moment it was recorded if omitted
  | 'flag'; // yes/no or true/false, returned as a boolean

export interface FieldSpec {
  readonly name: string;
  /** The field named in words, as Laravel's messages do: donor_email -> "donor email". */
  readonly label: string;
  readonly kind: FieldKind;
  readonly required: boolean;
  readonly maxLength?: number;
  readonly choices?: readonly string[];
  readonly description: string;
  readonly example: string;
  /**
   * Whether the field is a donor's personal data, and what erasing it does (donations/erasure.ts):
   * `now` goes at once; `gift-aid` is kept while HMRC may still ask about a gift-aided donation;
   * `house` is cut down to the house name or number for that time; `none`, not personal data, stays.
   * Said of every field, so that a new one is a choice: a personal field left without it was kept by
   * `donor erase` and written in the log (server.ts blanks the personal fields), and nothing said so
   * (a scratch field, 2026-12-01).
   */
  readonly erasure: 'now' | 'gift-aid' | 'house' | 'none';
  /**
   * In a form post, an empty value is no value: PHP and HTML send a blank input as an empty string
   * (Laravel's ConvertEmptyStringsToNull does the same). JSON keeps the field's own rules.
   */
  readonly blankInFormIsAbsent?: true;
}

export const AMOUNT_MIN = '0.01';
/** donation_date in a request: DD-MM-YYYY (and then a real calendar date). */
export const DAY_MONTH_YEAR = /^([0-9]{2})-([0-9]{2})-([0-9]{4})$/;
export const AMOUNT_MAX = '999999999.99';
const TEXT_MAX = 255;

// `const` type parameters keep each field's name, kind and choices as literal types, for the types below.
function field<const N extends string, const K extends FieldKind, const R extends Omit<FieldSpec, 'name' | 'label' | 'kind'>>(
  name: N,
  kind: K,
  rest: R,
): { readonly name: N; readonly label: string; readonly kind: K } & R {
  return { name, label: name.replaceAll('_', ' '), kind, ...rest };
}

/** The interface's fields, in the interface's order (the record's order after `id`). */
export const DONATION_FIELDS = [
  field('donor_first_name', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's first name.", example: 'Jane', erasure: 'gift-aid' }),
  field('donor_last_name', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's last name.", example: 'Doe', erasure: 'gift-aid' }),
  field('donor_email', 'email', { required: true, maxLength: 254, description: "Donor's e-mail address.", example: 'jane.doe@example.com', erasure: 'now' }),
  field('donor_phone', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's phone number.", example: '07700 900123', erasure: 'now' }),
  field('donor_address', 'text', { required: false, maxLength: 1000, description: "Donor's street address, house name or number first.", example: '12 High Street', erasure: 'house' }),
  field('donor_city', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's town or city.", example: 'London', erasure: 'now' }),
  field('donor_postcode', 'text', { required: false, maxLength: TEXT_MAX, description: "Donor's postcode.", example: 'SW1A 1AA', erasure: 'gift-aid' }),
  field('donor_ip', 'ip', { required: false, maxLength: TEXT_MAX, description: "Donor's IPv4 or IPv6 address; an empty string is stored and returned as null.", example: '203.0.113.7', erasure: 'now' }),
  field('gift_aid', 'yes_no', { required: true, description: 'Whether the donor made a Gift Aid declaration.', example: 'yes', erasure: 'none' }),
  // At most 32 characters as text: leading zeros are allowed, and until 2026-11-29 without end (a review stored a 1 MB amount).
  field('amount', 'amount', { required: true, maxLength: 32, description: `Amount in plain decimal notation, at most two decimals, from ${AMOUNT_MIN} to ${AMOUNT_MAX}; a string is echoed exactly as sent.`, example: '25.00', erasure: 'none' }),
  field('payment_method', 'text', { required: false, maxLength: TEXT_MAX, description: 'How the donation was paid, for example `cash` or `card`.', example: 'cash', blankInFormIsAbsent: true, erasure: 'none' }),
  field('payment_confirmation_number', 'text', { required: false, maxLength: TEXT_MAX, description: "The payment provider's reference; returned as given.", example: 'PAY-123456', erasure: 'none' }),
  field('donation_type', 'choice', { required: true, choices: ['one-time', 'recurring', 'renewal'], description: 'Kind of donation.', example: 'one-time', erasure: 'none' }),
  field('donation_date', 'date', { required: false, description: 'Day of the donation as DD-MM-YYYY; returned as midnight UTC of that day. Omitted: the moment it was recorded.', example: '25-02-2021', blankInFormIsAbsent: true, erasure: 'none' }),
  field('zakat_donation', 'flag', { required: false, description: '`yes`/`no`, `true`/`false` (a string in any case, or a JSON boolean), `1`/`0`, or `on` (a checked HTML checkbox); returned as a boolean; omitted means false.', example: 'yes', blankInFormIsAbsent: true, erasure: 'none' }),
] as const satisfies readonly FieldSpec[];

type DonationField = (typeof DONATION_FIELDS)[number];

/** A `flag` field's words for true and false, taken in any case (and JSON's true/false, 1/0): as PHP, HTML checkboxes and Laravel's `boolean` rule send them. */
export const FLAG_WORDS = { true: ['yes', 'true', '1', 'on'], false: ['no', 'false', '0'] } as const;

/** A `flag` field's words as a type, in lower case (the server takes them in any case). */
type FlagWord = (typeof FLAG_WORDS)[keyof typeof FLAG_WORDS][number];

/** The yes/no choices of a `yes_no` field. */
export const YES_NO = ['yes', 'no'] as const;

type ChoiceOf<F> = F extends { readonly choices: readonly (infer C)[] } ? C : never;

/**
 * Each kind's types: what a request may send (`input`), what validation makes of it (`value`, and
 * so the fingerprint), what is kept (`stored`: the donation as the rest of Almoner reads it),
 * its database column (`column`) and what the record returns (`record`).
 */
interface KindTypes<F> {
  text: { input: string | null; value: string | null; stored: string | null; column: string | null; record: string | null };
  email: { input: string; value: string; stored: string; column: string; record: string };
  ip: { input: string | null; value: string | null; stored: string | null; column: string | null; record: string | null };
  choice: { input: ChoiceOf<F>; value: ChoiceOf<F>; stored: ChoiceOf<F>; column: string; record: ChoiceOf<F> };
  yes_no: { input: (typeof YES_NO)[number]; value: boolean; stored: boolean; column: number; record: (typeof YES_NO)[number] };
  amount: { input: string | number; value: string; stored: string; column: string; record: string };
  date: { input: string | null; value: string | null; stored: string; column: string; record: string };
  flag: { input: FlagWord | boolean | 0 | 1 | null; value: boolean; stored: boolean; column: number; record: boolean };
}

type Of<F extends DonationField, P extends keyof KindTypes<F>['text']> = KindTypes<F>[F['kind']][P];
type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** An amount field's exact value in minor units (pence) sits next to it as `<name>_minor`. */
type MinorUnitsOf<N extends string> = `${N}_minor`;
export const minorUnitsOf = <N extends string>(name: N): MinorUnitsOf<N> => `${name}_minor`;
type MinorUnits = { [F in DonationField as F['kind'] extends 'amount' ? MinorUnitsOf<F['name']> : never]: number };

/** A validated donation's keys, in the table's order, an amount's minor units right after it. */
export const DONATION_KEYS: readonly string[] = DONATION_FIELDS.flatMap((f) => (f.kind === 'amount' ? [f.name, minorUnitsOf(f.name)] : [f.name]));

/**
 * A function that makes an object with these keys, in this order, each the value of its JavaScript
 * expression over the function's parameters: what a loop over the field table writing `out[f.name]`
 * would make, compiled once from the table. Such a loop reads and writes by a name that changes from
 * one field to the next, which sends every access through V8's slowest, megamorphic lookup (about
 * 600 ns a donation each way, against 30 for the compiled function; docs/performance.md), and an
 * object given more than a dozen keys one at a time becomes a hash table. Keys and expressions come
 * from the table, never from a request.
 */
export function compiledObject<Args extends unknown[], Out>(parameters: readonly string[], entries: readonly Entry[]): (...args: Args) => Out {
  // In an object literal `"__proto__": x` sets the prototype rather than making a key (a loop's `out[key] = x` made one).
  if (entries.some(([key]) => key === '__proto__')) throw new Error('compiledObject: "__proto__" cannot be a key of an object literal');
  const properties = entries.map(([key, expression]) => `${JSON.stringify(key)}: ${expression}`);
  return new Function(...parameters, `return {\n  ${properties.join(',\n  ')}\n};`) as (...args: Args) => Out;
}

/** A key of compiledObject's objects and the expression that gives its value. */
export type Entry = readonly [key: string, expression: string];

/** The expression reading `key` of the object named `object`, for compiledObject: by name, as V8 reads `o.key`. */
export const read = (object: string, key: string): string => `${object}[${JSON.stringify(key)}]`;

/**
 * A donation as a charity sends it: the required fields required, the others optional. An optional
 * field may be `undefined` too, which JSON leaves out, as it does an omitted one: without it, a project
 * with `exactOptionalPropertyTypes` (in the tsconfig `tsc --init` writes) could not pass an optional
 * value it may not have (`donor_phone: form.phone`) though the client sends it correctly (a review).
 */
export type DonationInput = Simplify<
  { [F in DonationField as F['required'] extends true ? F['name'] : never]: Of<F, 'input'> } & {
    [F in DonationField as F['required'] extends true ? never : F['name']]?: Of<F, 'input'> | undefined;
  }
>;

/** A donation that passed validation, normalised and ready to store (its JSON is the fingerprint). */
export type NewDonation = Simplify<{ [F in DonationField as F['name']]: Of<F, 'value'> } & MinorUnits>;

/** A stored donation, as the rest of Almoner reads it. */
export type StoredDonation = Simplify<
  { id: number; charity_id: number } & { [F in DonationField as F['name']]: Of<F, 'stored'> } & MinorUnits & { recorded_at: string }
>;

/** The donation's columns in the database (store/schema.ts adds the row's own). */
export type DonationColumns = Simplify<{ [F in DonationField as F['name']]: Of<F, 'column'> } & MinorUnits>;

/** The donation record of the interface: `id`, then the fields in the table's order. */
export type DonationRecord = Simplify<{ id: number } & { [F in DonationField as F['name']]: Of<F, 'record'> }>;
