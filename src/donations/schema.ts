// JSON Schemas of what the API takes and returns, generated from the field table. Fastify compiles
// the response schemas into fast serialisers; the OpenAPI document (http/openapi.ts) is built from
// the same objects. The request schema describes what validate.ts accepts, which the same table drives.
import { AMOUNT_MAX, AMOUNT_MIN, DONATION_FIELDS, type FieldSpec } from './fields.js';

/**
 * An amount as text: plain decimal notation, at most 9 whole digits after any leading zeros and at
 * most 2 decimals, with a non-zero digit somewhere (the minimum, 0.01).
 */
const AMOUNT_PATTERN = '^(?=[0-9.]*[1-9])0*[0-9]{1,9}(\\.[0-9]{1,2})?$';

function inputProperty(f: FieldSpec): Record<string, unknown> {
  const base = { description: f.description, examples: [f.example] };
  const maxLength = f.maxLength === undefined ? {} : { maxLength: f.maxLength };
  switch (f.kind) {
    case 'text':
      return { ...base, type: ['string', 'null'], ...maxLength };
    case 'email':
      // idn-email, not email: an address may have non-ASCII characters (RFC 6531), as validator's isEmail allows.
      return { ...base, type: 'string', format: 'idn-email', ...maxLength };
    case 'ip':
      // "" and null are both "no address"; anything else is an IPv4 or IPv6 address.
      return { ...base, type: ['string', 'null'], ...maxLength, anyOf: [{ const: '' }, { format: 'ipv4' }, { format: 'ipv6' }] };
    case 'choice':
      return { ...base, type: 'string', enum: f.choices };
    case 'amount':
      return {
        ...base,
        oneOf: [
          { type: 'string', pattern: AMOUNT_PATTERN },
          { type: 'number', minimum: Number(AMOUNT_MIN), maximum: Number(AMOUNT_MAX) },
        ],
      };
    case 'date':
      return { ...base, type: ['string', 'null'], pattern: '^[0-9]{2}-[0-9]{2}-[0-9]{4}$' };
    case 'flag':
      return { ...base, type: ['string', 'boolean', 'null'], enum: ['yes', 'no', true, false, null] };
  }
}

/**
 * A create request: the interface's fields, the required ones required. Other properties are
 * allowed and ignored. (Rules a schema cannot say, such as a real calendar date or the e-mail rule
 * validate.ts applies, are in the descriptions; a 422 names them.)
 */
export const DONATION_INPUT_SCHEMA = {
  type: 'object',
  required: DONATION_FIELDS.filter((f) => f.required).map((f) => f.name),
  properties: Object.fromEntries(DONATION_FIELDS.map((f) => [f.name, inputProperty(f)])),
} as const;

/** The interface's example request: each field's example. */
export const EXAMPLE_DONATION_INPUT: Readonly<Record<string, string>> = Object.fromEntries(DONATION_FIELDS.map((f) => [f.name, f.example]));

function recordProperty(f: FieldSpec): Record<string, unknown> {
  const base = { description: f.description };
  switch (f.kind) {
    case 'flag':
      return { ...base, type: 'boolean' };
    case 'choice':
      return { ...base, type: 'string', enum: f.choices };
    case 'date':
      return { ...base, type: 'string', format: 'date-time', description: 'ISO 8601 UTC with microseconds, e.g. 2021-02-25T00:00:00.000000Z.' };
    case 'amount':
    case 'email':
      return { ...base, type: 'string' };
    default:
      return { ...base, type: ['string', 'null'] };
  }
}

/** The donation record: 16 fields, in the interface's order, every one always present. */
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
