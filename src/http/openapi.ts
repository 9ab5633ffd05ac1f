// The OpenAPI 3.1 document of the charity-facing interface, served at GET /api/v1/openapi.json and
// read by the /docs page. It is assembled from the schema objects the server itself uses
// (donations/schema.ts, from the field table) and the server's own limits and messages, so it
// cannot describe a different API from the one that answers.
import { validateDonation } from '../donations/validate.js';
import { toDonationRecord } from '../donations/donation.js';
import {
  CREATE_RESPONSE_SCHEMA,
  DONATION_FORM_SCHEMA,
  DONATION_INPUT_SCHEMA,
  DONATION_RECORD_SCHEMA,
  ERROR_SCHEMA,
  EXAMPLE_DONATION_INPUT,
  ME_RESPONSE_SCHEMA,
  VALIDATION_ERROR_SCHEMA,
} from '../donations/schema.js';
import { ANOTHER_SITE_MESSAGE, SCRIPT_WWW_AUTHENTICATE, WWW_AUTHENTICATE } from './auth.js';
import { MAX_HEADER_LINES_TEXT, NOT_A_MEDIA_TYPE } from './errors.js';
import { codeSamples } from './code-samples.js';
import { BLANK_IS_ABSENT, BODY_LIMIT_TEXT, TOO_LARGE_MESSAGE } from './body.js';
import { IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY } from './idempotency.js';
import { REQUEST_ID } from './request-id.js';

/** The fields a form may leave blank for absent (body.ts), in words: "`a`, `b` or `c`". */
const BLANK_IN_FORM_IS_ABSENT = BLANK_IS_ABSENT.map((name) => `\`${name}\``)
  .join(', ')
  .replace(/, ([^,]*)$/, ' or $1');

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });

/** The example response: the example request as the server turns it into a record. */
function exampleRecord() {
  const result = validateDonation(EXAMPLE_DONATION_INPUT);
  if (!result.ok) throw new Error(`The field table's examples do not validate: ${JSON.stringify(result.errors)}`);
  const { donation } = result;
  return toDonationRecord({ ...donation, id: 1, charity_id: 1, donation_date: donation.donation_date ?? '', recorded_at: '' });
}

const json = (schema: unknown, example?: unknown) => ({
  'application/json': { schema, ...(example === undefined ? {} : { example }) },
});

function errorResponse(description: string, example: string, headers: Record<string, unknown> = {}) {
  return { description, headers: { 'X-Request-Id': ref('headers', 'X-Request-Id'), ...headers }, content: json(ref('schemas', 'Error'), { message: example }) };
}

/** An answer sent before there is a request to name: the HTTP parser's, or Node's own (no X-Request-Id). */
function beforeRequestResponse(description: string, example: string) {
  return { description: `${description} Sent before the request is read, so without an X-Request-Id.`, content: json(ref('schemas', 'Error'), { message: example }) };
}

/** What makes any request a 400, whatever its operation reads; the last is answered before there is a request to name. */
const UNREADABLE_REQUEST =
  'An HTTP/1.1 request has no Host header, which HTTP/1.1 requires (every HTTP client sends one). Or it has more than one Host, Authorization or Content-Type header. Or the request is not valid HTTP (a malformed header line or chunked body), answered before it could be read.';

/** A 400's X-Request-Id: absent when the request was not valid HTTP. */
const REQUEST_ID_UNLESS_UNREADABLE = {
  'X-Request-Id': {
    description: 'Identifies the request in the logs; absent on the 400 for a request that is not valid HTTP, answered before it was read.',
    schema: { type: 'string' },
  },
};

/** Answers every operation can give, whatever it does. */
const COMMON_RESPONSES = {
  '400': ref('responses', 'BadRequest'),
  '401': ref('responses', 'Unauthorized'),
  '403': ref('responses', 'Forbidden'),
  '405': ref('responses', 'MethodNotAllowed'),
  // Declared for each operation since 2026-11-29 (only the document's description named them; a review).
  '408': ref('responses', 'RequestTimeout'),
  '413': ref('responses', 'PayloadTooLarge'),
  '415': ref('responses', 'UnsupportedMediaType'),
  '417': ref('responses', 'ExpectationFailed'),
  '429': ref('responses', 'TooManyRequests'),
  '431': ref('responses', 'HeadersTooLarge'),
  '500': ref('responses', 'InternalServerError'),
  '502': ref('responses', 'BadGateway'),
  '503': ref('responses', 'Unavailable'),
  '504': ref('responses', 'GatewayTimeout'),
};

/**
 * The answers of a gateway in front when Almoner cannot answer: the shipped deploy/nginx.conf's, word
 * for word (test/http/openapi.test.ts holds the two together). Documented since 2026-11-30: a client
 * generated from the document had no schema for them, though the typed client handled them.
 */
export const GATEWAY_MESSAGES = {
  '502': 'The service is unavailable. A create that reached it may have been recorded: send it again shortly with the same Idempotency-Key, or, sent without one, check first.',
  '504': 'The service did not answer in time, so a create may have been recorded: send it again shortly with the same Idempotency-Key, or, sent without one, check first.',
} as const;

/** A gateway's answer: its X-Request-Id is the gateway's own. */
function gatewayResponse(description: string, example: string) {
  return {
    description: `${description} Sent by a gateway in front of the service (the shipped nginx), never by the service itself. A create answered so was not acknowledged but may have been recorded: send it again with the same Idempotency-Key after Retry-After seconds; without one, check whether it was recorded first.`,
    headers: {
      'X-Request-Id': { description: "The gateway's own request id (the shipped nginx logs it).", schema: { type: 'string' } },
      'Retry-After': ref('headers', 'Retry-After'),
    },
    content: json(ref('schemas', 'Error'), { message: example }),
  };
}

/**
 * /me reads no body: only a Content-Type header that is no media type at all is refused, and nothing
 * it reads can be a 400 (a body or an Idempotency-Key is ignored; the document said otherwise until
 * 2026-11-29), only what any request can be (UNREADABLE_REQUEST: until 2026-11-29 the document named a
 * missing Host alone, and an X-Request-Id the unreadable request's 400 does not carry; a review).
 */
const ME_RESPONSES = {
  ...COMMON_RESPONSES,
  '400': errorResponse(UNREADABLE_REQUEST, 'The request has no Host header, which HTTP/1.1 requires.', REQUEST_ID_UNLESS_UNREADABLE),
  '415': errorResponse(
    'The Content-Type header is not a media type (such as `text plain`). A body of any valid type is ignored.',
    NOT_A_MEDIA_TYPE,
  ),
};

const CALLING = `Every request carries \`Authorization: Basic base64(username:password)\` with the charity's
credentials (from \`bin/almoner charity create\`) and \`Accept: application/json\`. Every answer is JSON:
errors are \`{ "message": ... }\`, and a 422 adds \`errors\`, one list of messages per failing field.
Every answer carries an \`X-Request-Id\`: yours if you sent one of 1 to 200 printable ASCII characters
without spaces, else a generated UUID; quote it when asking for help. (A request too malformed for the
HTTP parser gets a 400, 408 or 431, one with an \`Expect\` other than \`100-continue\` a 417, and a
connection over the server's limit per address a 429, with the same JSON body but no request id:
each is sent before there is a request to name.)`;

/** Who serves the document: what makes it absolute, and whom to write to. */
export interface DocumentSite {
  /** `scheme://host[:port]` of the server the document was asked of; without it the server URL is relative. */
  origin?: string | undefined;
  /** The operator's address for integrators (API_CONTACT_EMAIL). */
  contactEmail?: string | undefined;
}

/** A UUID, as the Idempotency-Key's example: the docs page sends a fresh one in its place. */
export const IDEMPOTENCY_KEY_EXAMPLE = '5f0c6a9e-3b7d-4c1e-9f2a-8d4b6e1a7c30';
/** The X-Request-Id parameter's example, which the /docs page does not send (routes/docs.ts). */
export const REQUEST_ID_EXAMPLE = 'order-20261124-0042';

export function buildOpenApiDocument(version: string, { origin, contactEmail }: DocumentSite = {}) {
  const maxIdempotencyHours = IDEMPOTENCY.ttlMicros / 3_600_000_000;
  return {
    openapi: '3.1.0',
    info: {
      title: 'Almoner',
      version,
      summary: 'Record donations for a charity.',
      description: CALLING,
      contact: { name: 'The operator of this Almoner server', ...(contactEmail === undefined ? {} : { email: contactEmail }) },
      // Almoner is not open source: an SPDX reference to a licence of its own (package.json says UNLICENSED).
      license: { name: 'Proprietary', identifier: 'LicenseRef-Almoner-Proprietary' },
    },
    servers: [
      // Absolute, so that generated clients work outside a browser too; relative only when the request named no usable host.
      { url: `${origin ?? ''}/api/v1`, description: 'This server' },
      {
        url: '{scheme}://{host}/api/v1',
        // The variables' help is in the server's description: @apidevtools/swagger-parser 13.0.0's
        // schema of OpenAPI 3.1 refuses a variable's description (its own typo of the keyword).
        description: "Another Almoner server: `host` is its host name, with `:port` when not the scheme's own.",
        variables: {
          scheme: { enum: ['https', 'http'], default: 'https' },
          host: { default: 'almoner.example.org' },
        },
      },
    ],
    security: [{ basicAuth: [] }],
    tags: [{ name: 'Charity', description: 'The two operations a charity has.' }],
    paths: {
      '/me': {
        post: {
          operationId: 'testConnection',
          summary: 'Test Connection',
          description: `Checks the credentials and names the charity they belong to. Takes no body: one sent anyway, of any type, is ignored (up to the ${BODY_LIMIT_TEXT} limit).`,
          tags: ['Charity'],
          'x-codeSamples': codeSamples('testConnection'),
          parameters: [ref('parameters', 'X-Request-Id')],
          responses: {
            '200': {
              description: 'The credentials are valid.',
              headers: { 'X-Request-Id': ref('headers', 'X-Request-Id') },
              content: json(ref('schemas', 'Identity'), {
                success: true,
                message: 'Authenticated',
                data: { name: 'Helping Hands', email: 'info@helpinghands.example' },
              }),
            },
            ...ME_RESPONSES,
          },
        },
      },
      '/donation/create': {
        post: {
          operationId: 'createDonation',
          summary: 'Create Donation',
          description: `Validates the donation, stores it durably and returns the record. A 200 means it is stored.
Send an \`Idempotency-Key\` to make retries safe: a retry with the same key and the same body gets the
first answer again (with \`Idempotent-Replayed: true\`) instead of a second donation, for ${maxIdempotencyHours} hours.`,
          tags: ['Charity'],
          'x-codeSamples': codeSamples('createDonation'),
          parameters: [
            ref('parameters', 'X-Request-Id'),
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              description:
                'Any 1 to 255 printable ASCII characters, no space at either end (HTTP would drop it), unique per donation: a fresh UUID for each new donation, the same one when retrying it. (The docs page sends a fresh UUID in place of this example.)',
              schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
              example: IDEMPOTENCY_KEY_EXAMPLE,
            },
          ],
          requestBody: {
            required: true,
            description:
              `The donation. JSON is the norm; an HTML form post (application/x-www-form-urlencoded) is taken too, where a blank ${BLANK_IN_FORM_IS_ABSENT} is the same as leaving it out. The fields go in the body alone: one named in the URL's query string is a 422.`,
            content: {
              'application/json': { schema: ref('schemas', 'DonationInput'), example: EXAMPLE_DONATION_INPUT },
              // The same example: every value in it is a string, as a form's are (tools that send examples would send empty fields without one).
              'application/x-www-form-urlencoded': { schema: ref('schemas', 'DonationForm'), example: EXAMPLE_DONATION_INPUT },
            },
          },
          responses: {
            '200': {
              description: 'Recorded (or, with a repeated Idempotency-Key, recorded before).',
              headers: {
                'X-Request-Id': ref('headers', 'X-Request-Id'),
                'Idempotent-Replayed': {
                  description: '`true` when this answer is the replay of an earlier request with the same Idempotency-Key; absent otherwise.',
                  required: false,
                  schema: { type: 'string', enum: ['true'] },
                },
              },
              content: json(ref('schemas', 'CreateDonationResponse'), { data: exampleRecord() }),
            },
            '409': errorResponse(
              'An earlier request with this Idempotency-Key is still being processed. Retry in a moment.',
              'A request with this Idempotency-Key is still in progress. Retry it in a moment.',
            ),
            '422': {
              description: 'The donation is invalid (every failing field is named), or the Idempotency-Key was used for a different donation.',
              headers: { 'X-Request-Id': ref('headers', 'X-Request-Id') },
              content: json(ref('schemas', 'ValidationError'), {
                message: 'The given data was invalid.',
                errors: { donor_email: ['The donor email is required.'], amount: ['The amount must be at least 0.01.'] },
              }),
            },
            ...COMMON_RESPONSES,
          },
        },
      },
    },
    components: {
      securitySchemes: {
        basicAuth: { type: 'http', scheme: 'basic', description: "The charity's username and password." },
      },
      schemas: {
        DonationInput: DONATION_INPUT_SCHEMA,
        DonationForm: DONATION_FORM_SCHEMA,
        Donation: DONATION_RECORD_SCHEMA,
        CreateDonationResponse: { ...CREATE_RESPONSE_SCHEMA, properties: { data: ref('schemas', 'Donation') } },
        Identity: ME_RESPONSE_SCHEMA,
        ValidationError: VALIDATION_ERROR_SCHEMA,
        Error: ERROR_SCHEMA,
      },
      parameters: {
        'X-Request-Id': {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          // Any value is taken (one that is not an id is replaced), so the schema limits nothing: the rule is in words.
          description: `Your own id for the request, to find it in the logs: 1 to 200 printable ASCII characters, no space (\`${REQUEST_ID.source}\`). Echoed in the answer; any other value is replaced by a fresh UUID, as is none.`,
          schema: { type: 'string' },
          example: REQUEST_ID_EXAMPLE,
        },
      },
      headers: {
        // Examples, so that a mock server (Prism's) sends a value a client can read: without them it sent the word "string".
        'X-Request-Id': { description: 'Identifies the request in the logs.', schema: { type: 'string' }, required: true, example: '7d4f9a3e-52c1-4b8e-9f0a-2c6e1b3d5a77' },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'string', pattern: '^[0-9]+$' }, required: true, example: '1' },
      },
      responses: {
        BadRequest: errorResponse(
          `The request could not be read: the body is not valid JSON, not UTF-8, or not a JSON object; a form whose percent-escapes are not UTF-8 (a Latin-1 page sends é as %E9) or escape nothing (a bare %); or the Idempotency-Key header is not 1 to 255 printable ASCII characters. ${UNREADABLE_REQUEST}`,
          'The request body is not valid JSON.',
          REQUEST_ID_UNLESS_UNREADABLE,
        ),
        Unauthorized: errorResponse('The credentials are missing or invalid.', 'Unauthorized', {
          'WWW-Authenticate': {
            description: `\`${WWW_AUTHENTICATE}\`; \`${SCRIPT_WWW_AUTHENTICATE}\` when the request has \`X-Requested-With: XMLHttpRequest\`, so that a browser shows the page's own error instead of its login dialog.`,
            schema: { type: 'string', enum: [WWW_AUTHENTICATE, SCRIPT_WWW_AUTHENTICATE] },
            required: true,
          },
        }),
        Forbidden: errorResponse(
          "A browser sent the request for a page of another site (its `Sec-Fetch-Site` header is `cross-site` or `same-site`; or, where the browser sends no `Sec-Fetch-Site` (plain HTTP to a host name, an older browser), its `Origin` names another host, or `null`): a form posted from another site's page would carry the credentials the browser holds for this server. Refused before the credentials are looked at. Clients that are not browsers never get it; this server's own /docs page does not either.",
          ANOTHER_SITE_MESSAGE,
        ),
        MethodNotAllowed: errorResponse(
          'The path was called with a method other than POST (this answer is given for any other method).',
          'The GET method is not supported for this route. Supported methods: POST.',
          { Allow: { description: 'The methods the path takes.', schema: { type: 'string', const: 'POST' }, required: true } },
        ),
        RequestTimeout: beforeRequestResponse(
          'The request (its headers, or its whole body) did not arrive in time; the connection is closed.',
          'The request took too long to arrive.',
        ),
        ExpectationFailed: beforeRequestResponse(
          'The request has an `Expect` header other than `100-continue`; the connection is closed.',
          'Only "Expect: 100-continue" is supported: send the request without this Expect header.',
        ),
        HeadersTooLarge: {
          description: `The request's headers are larger than the server takes (16 KiB), or more than ${MAX_HEADER_LINES_TEXT} lines; the connection is closed. Over 16 KiB, it is sent before the request is read, so without an X-Request-Id.`,
          headers: { 'X-Request-Id': { description: 'Identifies the request in the logs; absent on the 431 for headers over 16 KiB, sent before the request was read.', schema: { type: 'string' } } },
          content: json(ref('schemas', 'Error'), { message: 'The request headers are too large.' }),
        },
        PayloadTooLarge: errorResponse(`The body is larger than ${BODY_LIMIT_TEXT}.`, TOO_LARGE_MESSAGE),
        UnsupportedMediaType: errorResponse(
          'The body is neither application/json nor application/x-www-form-urlencoded, or names a charset other than UTF-8 (or more than one charset), or is JSON sent as a form, or has a Content-Encoding (such as gzip) or a Transfer-Encoding other than chunked: send it uncompressed.',
          'Unsupported media type: send the body as application/json or application/x-www-form-urlencoded.',
        ),
        TooManyRequests: errorResponse(
          'Too many failed authentication attempts from this address, too many creates sent too quickly by this charity (every create counts, whatever its answer), too many of its creates in flight at once ("Too many donations are being sent at once: at most 100 at a time. Try again in 1 second."), or too many open connections from this address (sent as the connection opens, which is then closed).',
          'Too many donations sent too quickly. Try again in 1 second.',
          {
            'Retry-After': ref('headers', 'Retry-After'),
            'X-Request-Id': {
              description: 'Identifies the request in the logs; absent on the 429 for too many open connections, sent before any request was read.',
              schema: { type: 'string' },
            },
          },
        ),
        InternalServerError: errorResponse('An unexpected fault; nothing about it is shown. Quote the X-Request-Id.', 'Internal Server Error'),
        BadGateway: gatewayResponse('The service is stopped or restarting.', GATEWAY_MESSAGES['502']),
        GatewayTimeout: gatewayResponse('The service did not answer within 30 s.', GATEWAY_MESSAGES['504']),
        Unavailable: errorResponse(
          'The database is unavailable, so the request was not acknowledged. A create whose commit the database did not confirm may have been stored, and its message says so ("The database did not confirm whether this donation was stored…"): retry it only with the same Idempotency-Key, after Retry-After seconds; without one, check whether it was recorded first. Any other 503 stored nothing.',
          'The database is unavailable. Please try again shortly.',
          { 'Retry-After': ref('headers', 'Retry-After') },
        ),
      },
    },
  };
}
