// JSON Schemas of what the API returns, generated from the field table: Fastify compiles them into
// fast serialisers, and the OpenAPI document can be built from the same objects.
import { DONATION_FIELDS, type FieldSpec } from './fields.js';

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

/** 422: `message` and, for each failing field, its messages. */
export const VALIDATION_ERROR_SCHEMA = {
  type: 'object',
  required: ['message', 'errors'],
  properties: {
    message: { type: 'string' },
    errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
  },
} as const;
