// JSON Schemas of what the API takes and returns, generated from the field table. Fastify compiles
// the response schemas into fast serialisers; the OpenAPI document (http/openapi.ts) is built from
// the same objects. The request schema is documentation only: it never validates a request.
// validate.ts, driven by the same table, is the one validator (it reports every failing field at
// once, in Laravel's words). The schema says what JSON Schema can say as keywords and the rest in
// each field's description (DESCRIBED_ONLY); test/http/openapi.test.ts checks the document tells
// the truth on random requests.
import { AMOUNT_MAX, AMOUNT_MIN, DAY_MONTH_YEAR, DONATION_FIELDS, FLAG_WORDS, YES_NO, type FieldSpec } from './fields.js';

/**
 * An amount as text: plain decimal notation, at most 9 whole digits after any leading zeros and at
 * most 2 decimals, with a non-zero digit somewhere (the minimum, 0.01): a whole part from 1 on, or
 * 0 and a fraction from .01 on. No lookahead, which RE2 (Go's and Rust's regular expressions, and
 * the OpenAPI tools built on them) cannot compile: until 2026-11-28 it was
 * `^(?=[0-9.]*[1-9])0*[0-9]{1,9}(\.[0-9]{1,2})?$`, which takes the same strings.
 */
const AMOUNT_PATTERN = '^0*([1-9][0-9]{0,8}(\\.[0-9]{1,2})?|0\\.(0[1-9]|[1-9][0-9]?))$';
/** A flag's string values (validate.ts), in any case, spelled out for JSON Schema's regular expressions, which have no flags. */
const FLAG_PATTERN = `^(${[...FLAG_WORDS.true, ...FLAG_WORDS.false].map((w) => [...w].map((c) => (c === c.toUpperCase() ? c : `[${c}${c.toUpperCase()}]`)).join('')).join('|')})$`;

/** The rules of each kind of field that no JSON Schema keyword here expresses, in words. */
function rulesInWords(f: FieldSpec): string {
  const text = 'No NUL characters or unpaired surrogates; lengths count characters (code points).';
  switch (f.kind) {
    case 'text':
      return text;
    case 'email':
      return `${text} A valid address by validator.js's isEmail with its defaults: a local part (before the @) of at most 64 bytes of UTF-8, as the mail standards count it (a character outside ASCII takes two to four), and a domain name with a top-level domain (no IP address) of at most 254 bytes of UTF-8 and labels of at most 63 characters, with no character that shows as nothing (a zero-width space, a soft hyphen: Unicode's default-ignorable code points); the whole address at most 254 UTF-16 code units (a character beyond U+FFFF counts two).`;
    case 'ip':
      return `${text} No IPv6 zone (such as %eth0).`;
    case 'amount':
      return 'A string holds the amount alone: no sign, space or line break (a regular expression engine whose $ matches before a final line break, as Python\'s does, would take "25.00\\n"; Almoner does not). A JSON number is read by its value, as every JSON parser reads it (1e3 is 1000, 1.000 is 1, 0.010 is 0.01), and its value may have at most two decimals.';
    case 'date':
      return 'A real calendar date, years 0001 to 9999.';
    case 'flag':
      return 'A string is one of these words alone, in any case: no space or line break.';
    default:
      return '';
  }
}

function inputProperty(f: FieldSpec): Record<string, unknown> {
  const base = { description: `${f.description} ${rulesInWords(f)}`.trim(), examples: [f.example] };
  const maxLength = f.maxLength === undefined ? {} : { maxLength: f.maxLength };
  switch (f.kind) {
    case 'text':
      return { ...base, type: ['string', 'null'], ...maxLength };
    case 'email':
      // idn-email, not email: an address may have non-ASCII characters (RFC 6531), as validator's isEmail allows.
      // minLength: a validator that takes format as a note only (JSON Schema 2020-12's default) still refuses "".
      return { ...base, type: 'string', minLength: 1, format: 'idn-email', ...maxLength };
    case 'ip':
      // "" and null are both "no address"; anything else is an IPv4 or IPv6 address. Every branch
      // has its type, so generated clients type the field exactly ("" | string | null), not unknown.
      return {
        ...base,
        anyOf: [{ type: 'string', const: '' }, { type: 'string', format: 'ipv4', ...maxLength }, { type: 'string', format: 'ipv6', ...maxLength }, { type: 'null' }],
      };
    case 'choice':
      return { ...base, type: 'string', enum: f.choices };
    case 'yes_no':
      return { ...base, type: 'string', enum: YES_NO };
    case 'amount':
      // anyOf, not oneOf: a string such as "20" that a validating proxy (Prism) may also read as a
      // number would match both branches and fail oneOf.
      return {
        ...base,
        anyOf: [
          { type: 'string', pattern: AMOUNT_PATTERN, ...maxLength },
          { type: 'number', minimum: Number(AMOUNT_MIN), maximum: Number(AMOUNT_MAX) },
        ],
      };
    case 'date':
      // Its length too, so that an engine whose $ matches before a final line break (Python's) refuses "25-02-2021\n".
      return { ...base, type: ['string', 'null'], minLength: 10, maxLength: 10, pattern: DAY_MONTH_YEAR.source };
    case 'flag':
      return {
        ...base,
        anyOf: [
          { type: 'string', pattern: FLAG_PATTERN },
          { type: 'boolean' },
          { type: 'integer', enum: [0, 1] },
          { type: 'null' },
        ],
      };
  }
}

/**
 * The messages of the rules that DONATION_INPUT_SCHEMA states only in words (rulesInWords): a
 * request the schema allows may still get a 422, but only with these.
 */
export const DESCRIBED_ONLY: readonly RegExp[] = [
  /must not contain null characters\.$/,
  /must be valid Unicode text\.$/,
  /must be a valid email address\.$/,
  /is not a valid date\.$/,
  /must not have more than 2 decimal places\.$/,
];

/**
 * A create request: the interface's fields, the required ones required. Other properties are
 * allowed and ignored. Rules no keyword expresses are in the descriptions (DESCRIBED_ONLY).
 */
export const DONATION_INPUT_SCHEMA = {
  type: 'object',
  required: DONATION_FIELDS.filter((f) => f.required).map((f) => f.name),
  properties: Object.fromEntries(DONATION_FIELDS.map((f) => [f.name, inputProperty(f)])),
} as const;

/** A field's input property that a form may also leave blank (FieldSpec.blankInFormIsAbsent). */
function blankInForm(property: Record<string, unknown>): Record<string, unknown> {
  const { description, examples, ...rules } = property;
  return { description: `${String(description)} Left blank in a form, it is absent.`, examples, anyOf: [{ type: 'string', const: '' }, rules] };
}

/**
 * A field's input property as a form sends it: text, its only branches (a form has no numbers,
 * booleans or null). A form-filling tool then sends what was typed: with a number branch, Swagger
 * UI's form sent an amount of 10.50 as 10.5, which the record then echoed.
 */
function asText(property: Record<string, unknown>): Record<string, unknown> {
  const { description, examples, anyOf, type, ...rules } = property as { anyOf?: Array<Record<string, unknown>>; type?: unknown } & Record<string, unknown>;
  if (anyOf !== undefined) {
    const texts = anyOf.filter((branch) => branch['type'] === 'string');
    return texts.length === 1 ? { description, examples, ...texts[0] } : { description, examples, anyOf: texts };
  }
  return { description, examples, ...rules, type: 'string' };
}

/**
 * A create request sent as a form (application/x-www-form-urlencoded): as DONATION_INPUT_SCHEMA,
 * but every value text, and the fields a form may leave blank (an empty date, flag or payment
 * method) also take "".
 */
export const DONATION_FORM_SCHEMA = {
  ...DONATION_INPUT_SCHEMA,
  description: 'A donation as an HTML form or PHP sends it: each field as text; a field sent more than once takes its last value (a hidden "no" before a checkbox\'s "on" gives "on").',
  properties: Object.fromEntries(DONATION_FIELDS.map((f) => [f.name, 'blankInFormIsAbsent' in f ? blankInForm(asText(inputProperty(f))) : asText(inputProperty(f))])),
} as const;

/** The example request (the OpenAPI document's, the /docs page's): each field's example (the interface gives none). */
export const EXAMPLE_DONATION_INPUT: Readonly<Record<string, string>> = Object.fromEntries(DONATION_FIELDS.map((f) => [f.name, f.example]));

function recordProperty(f: FieldSpec): Record<string, unknown> {
  const base = { description: f.description };
  switch (f.kind) {
    case 'flag':
      return { ...base, type: 'boolean' };
    case 'choice':
      return { ...base, type: 'string', enum: f.choices };
    case 'yes_no':
      return { ...base, type: 'string', enum: YES_NO };
    case 'date':
      return { ...base, type: 'string', format: 'date-time', description: 'ISO 8601 UTC with microseconds, e.g. 2021-02-25T00:00:00.000000Z.' };
    case 'amount':
    case 'email':
      return { ...base, type: 'string' };
    default:
      return { ...base, type: ['string', 'null'] };
  }
}

/** The donation record: its fields, in the interface's order, every one always present. */
export const DONATION_RECORD_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', ...DONATION_FIELDS.map((f) => f.name)],
  properties: {
    id: { type: 'integer', description: 'Identifier assigned by the service.' },
    ...Object.fromEntries(DONATION_FIELDS.map((f) => [f.name, recordProperty(f)])),
  },
} as const;

export const CREATE_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['data'],
  properties: { data: DONATION_RECORD_SCHEMA },
} as const;

export const ME_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['success', 'message', 'data'],
  properties: {
    success: { type: 'boolean' },
    message: { type: 'string' },
    data: {
      type: 'object',
      required: ['name', 'email'],
      properties: { name: { type: 'string' }, email: { type: 'string' } },
    },
  },
} as const;

/** Every error but a 422: `{ "message": ... }`. */
export const ERROR_SCHEMA = {
  type: 'object',
  required: ['message'],
  properties: { message: { type: 'string', description: 'What went wrong and, where there is something to do, what to do.' } },
} as const;

/** 422: `message` and, for each failing field, its messages. */
export const VALIDATION_ERROR_SCHEMA = {
  type: 'object',
  required: ['message', 'errors'],
  properties: {
    message: { type: 'string' },
    errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
  },
} as const;
