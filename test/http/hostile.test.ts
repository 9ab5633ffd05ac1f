// Hostile input (issue 4, item 8): property-based tests with fast-check that throw random JSON
// bodies, random types for every donation field, huge and deeply nested JSON, odd headers and odd
// encodings at both operations, authenticated and not, on every backend. For every request:
//
// - the status is one of 200, 400, 401, 404, 405, 413, 415, 422 (never a 5xx), or a 429 from the
//   per-charity create rate limit (README: 100 creates per second by default) on an authenticated
//   create, with Retry-After;
// - the body is JSON; an error body is an object with a string `message` and no stack trace;
// - a response that went through the app carries Cache-Control: no-store and nosniff, and an
//   X-Request-Id that is the client's own when that is 1 to 200 printable characters, else a UUID;
// - a request without valid credentials is a 401 {"message":"Unauthorized"}, whatever its body;
// - anything but a 200 on create stores nothing; a 200 on create stores exactly one record (none
//   for an Idempotent-Replayed answer), and the row read back through a separate database
//   connection equals the response (and the response echoes what was sent); a retry with the same
//   Idempotency-Key replays the same record;
// - afterwards the server still records a normal donation.
//
// Requests go in-process (app.inject, header values limited to what Node's HTTP parser lets
// through) and, for raw header bytes and duplicated headers, over a real socket.
//
// Every generated request comes from its own client address (inject's remoteAddress, or a socket
// bound to its own 127.x.y.z), so the failed-authentication throttle, which counts per address,
// never answers for the property under test: it has its own tests.
//
// Seeds are random: on a failure fast-check prints the seed, the path and the shrunk
// counterexample. HOSTILE_SEED=<seed> replays a run; HOSTILE_SCALE=<n> multiplies every numRuns
// (e.g. HOSTILE_SCALE=20 for a long local fuzzing session).
import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import pg from 'pg';
import { parse as parseQueryString } from 'fast-querystring';
import { parseDatabaseUrl } from '../../src/config.js';
import { DONATION_FIELDS } from '../../src/donations/fields.js';
import { basic, exampleDonation, NO_FAILURE_DELAY, RECORD_KEYS, startTestApp, TIMESTAMP, type TestCharity, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';

import { BODY_LIMIT } from '../../src/http/body.js';
const SCALE = Math.max(0.01, Number(process.env.HOSTILE_SCALE ?? 1) || 1);
const SEED = process.env.HOSTILE_SEED ? Number(process.env.HOSTILE_SEED) : undefined;
/**
 * fast-check options. `examples` run first on every run: they are shrunk counterexamples this file
 * has found (see the comments where they are given), so a regression fails every time, not only
 * when the random search happens upon it again.
 */
const runs = (n: number) => ({ numRuns: Math.max(1, Math.round(n * SCALE)), includeErrorInReport: true, ...(SEED !== undefined ? { seed: SEED } : {}) });

const ALLOWED = new Set([200, 400, 401, 404, 405, 413, 415, 422]);
const URLS = { me: '/api/v1/me', create: '/api/v1/donation/create' } as const;
type Op = keyof typeof URLS;

const FIELDS = RECORD_KEYS.filter((k) => k !== 'id');
const TEXT_FIELDS = [
  'donor_first_name',
  'donor_last_name',
  'donor_phone',
  'donor_address',
  'donor_city',
  'donor_postcode',
  'payment_method',
  'payment_confirmation_number',
];

// ---------------------------------------------------------------------------------------------
// An independent reader of the database: what is really committed, not what the app says.

interface Probe {
  count(): Promise<number>;
  row(id: number): Promise<Record<string, unknown> | undefined>;
  close(): Promise<void>;
}

async function openProbe(databaseUrl: string): Promise<Probe> {
  const location = parseDatabaseUrl(databaseUrl);
  if (location.dialect === 'sqlite') {
    const db = new Database(location.path, { readonly: true, fileMustExist: true });
    const count = db.prepare('select count(*) as n from donations');
    const row = db.prepare('select * from donations where id = ?');
    return {
      count: async () => Number((count.get() as { n: number }).n),
      row: async (id) => row.get(id) as Record<string, unknown> | undefined,
      close: async () => void db.close(),
    };
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  return {
    count: async () => Number((await client.query('select count(*) as n from donations')).rows[0].n),
    row: async (id) => (await client.query('select * from donations where id = $1', [id])).rows[0],
    close: () => client.end(),
  };
}

// ---------------------------------------------------------------------------------------------
// Arbitraries.

/** A value written into JSON text as is: lets a body carry -0, 1e309, duplicate keys and the like. */
class Raw {
  constructor(readonly text: string) {}
  toString(): string {
    return `Raw(${this.text.length > 80 ? `${this.text.slice(0, 80)}…` : this.text})`;
  }
}

/** A field left out of the body. */
const ABSENT = Symbol('absent');

function toJson(v: unknown): string {
  if (v instanceof Raw) return v.text;
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v)
      .filter(([, x]) => x !== ABSENT)
      .map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));

const nastyString = fc.constantFrom(
  '', ' ', '\u0000', 'a\u0000b', '\uFEFF', '\u202E', '\uFFFE', '\uFFFF', '\u{10FFFF}', '😀', 'e\u0301', '\u00A0',
  'null', 'undefined', 'NaN', '-NaN', 'Infinity', '-Infinity', '-0', '+0', '0', '1e308', '1e309', '-1e308', '1E2', '0x10', '0b1', '1_000',
  ' 5', '5 ', '\t5', '５', '٥', '1,00', '12,50', '1.', '.5', '-1', '0.001', '0.009', '0.01', '0.010', '999999999.99', '999999999.999',
  '1000000000', '00000000000000000001', '1'.repeat(400), '0.' + '0'.repeat(300) + '1',
  'yes', 'no', 'YES', 'Yes ', 'true', 'false', 'on', '1', 'one-time', 'ONE-TIME', 'one_time', 'recurring\u0000', 'renewal ',
  '25-02-2021', '31-02-2021', '29-02-2000', '29-02-1900', '00-00-0000', '01-01-0000', '31-12-9999', '2021-02-25', '25/02/2021', '5-2-2021',
  'a@b.c', 'a@b', '@', 'a@@b.com', 'jane.doe@example.com', 'jane@example.com\u0000', '"a b"@example.com', 'ü@exämple.com', 'a\ud800@example.com', '\udc00',
  '127.0.0.1', '::1', '::ffff:1.2.3.4', '256.0.0.1', '1.2.3', 'fe80::1%eth0',
  '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty',
  "'; drop table donations; --", "' or '1'='1", '${7*7}', '{{7*7}}', '<script>alert(1)</script>', '%00', '%s%n', '\\', '"', '\r\n', '\u2028\u2029',
  'x'.repeat(254), 'x'.repeat(255), 'x'.repeat(256), 'x'.repeat(1000), 'x'.repeat(1001), '😀'.repeat(255), '😀'.repeat(256),
);

const anyString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 3, arbitrary: nastyString },
  {
    weight: 2,
    arbitrary: fc
      .array(fc.oneof(fc.string({ unit: 'binary', maxLength: 4 }), loneSurrogate, fc.constantFrom('\u0000', '\uFEFF', '\uFFFD')), { maxLength: 6 })
      .map((parts) => parts.join('')),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('x', 'é', '😀', '\u0000', ' ', '9'), fc.integer({ min: 200, max: 5000 }))
      .map(([c, n]) => c.repeat(n)),
  },
);

const rawNumber = fc
  .constantFrom('-0', '0', '-0.0', '1e308', '-1e308', '1e309', '-1e309', '5e-324', '1E-2', '0.010', '1.0000000000000000000001', '2.5e1',
    '123456789012345678901234567890', '9007199254740993', '25.00', '0.001', '0.005', '0.015', '999999999.99', '999999999.995', '1000000000', '1e9')
  .map((t) => new Raw(t));

const anyNumber = fc.oneof(
  fc.double(), // NaN and ±Infinity serialise as null
  fc.integer(),
  fc.constantFrom(0, -0, 0.01, 0.005, 0.1 + 0.2, 1e308, -1e308, 5e-324, Number.MAX_SAFE_INTEGER, 2 ** 53 + 1, 999999999.99, 999999999.995, 1e9, 25, 25.5),
  rawNumber,
);

/** Any JSON-serialisable value of any type, for any field. */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: anyString },
  { weight: 3, arbitrary: anyNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.array(fc.oneof(anyString, anyNumber, fc.jsonValue({ maxDepth: 2 })), { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(anyString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

const pad = (n: number, w: number) => String(n).padStart(w, '0');

/** A plausible valid value for each field, so that a good share of generated creates succeed. */
const validField: Record<string, fc.Arbitrary<unknown>> = {
  ...Object.fromEntries(
    TEXT_FIELDS.map((f) => [f, fc.oneof(fc.string({ unit: 'grapheme', maxLength: 30 }), fc.constantFrom('', null, ABSENT, 'Jane', 'cash'))]),
  ),
  donor_email: fc.oneof(fc.emailAddress(), fc.constantFrom('jane.doe@example.com', 'ü@example.com', 'a+b@sub.example.co.uk')),
  donor_ip: fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('', null, ABSENT)),
  gift_aid: fc.constantFrom('yes', 'no'),
  amount: fc.oneof(
    fc.integer({ min: 1, max: 99_999_999_999 }).map((p) => `${Math.floor(p / 100)}.${pad(p % 100, 2)}`),
    fc.integer({ min: 1, max: 999_999_999 }).map(String),
    fc.integer({ min: 1, max: 999_999_999 }),
  ),
  donation_type: fc.constantFrom('one-time', 'recurring', 'renewal'),
  donation_date: fc.oneof(
    fc
      .date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T00:00:00Z'), noInvalidDate: true })
      .map((d) => `${pad(d.getUTCDate(), 2)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCFullYear(), 4)}`),
    fc.constantFrom(ABSENT, null),
  ),
  zakat_donation: fc.constantFrom('yes', 'no', true, false, ABSENT, null),
};

/**
 * A donation body as a list of JSON members: a valid base, some fields replaced by values of any
 * type or left out, unknown keys added, and keys repeated (JSON.parse keeps the last).
 */
const donationMembers = fc
  .tuple(
    fc.record(validField as Record<string, fc.Arbitrary<unknown>>),
    fc.dictionary(fc.constantFrom(...FIELDS), fc.oneof({ weight: 6, arbitrary: anyValue }, { weight: 1, arbitrary: fc.constant(ABSENT) }), { maxKeys: 4 }),
    fc.array(fc.tuple(fc.oneof(anyString, fc.constantFrom('__proto__', 'constructor', 'id', 'charity_id', 'recorded_at', 'amount_minor')), anyValue), { maxLength: 3 }),
    fc.array(fc.tuple(fc.constantFrom(...FIELDS), anyValue), { maxLength: 1 }),
  )
  .map(([base, overrides, extra, repeated]) => {
    const members: Array<[string, unknown]> = [];
    for (const [k, v] of Object.entries({ ...base, ...overrides })) if (v !== ABSENT) members.push([k, v]);
    members.push(...extra, ...repeated);
    return members;
  });

const membersToJson = (members: Array<[string, unknown]>) => `{${members.map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(',')}}`;

/** Any JSON text (valid or not), as a body. */
const anyJsonText = fc.oneof(
  fc.json({ maxDepth: 4 }),
  fc.json({ maxDepth: 3, stringUnit: 'binary' }),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc
    .anything({ maxDepth: 3, withBoxedValues: true, withMap: true, withSet: true, withDate: true, withNullPrototype: true, withObjectString: true, withTypedArray: true, withSparseArray: true })
    .map((v) => JSON.stringify(v) ?? ''),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.json({ maxDepth: 3 }).chain((s) => fc.nat(s.length).map((n) => s.slice(0, n))), // cut short
  donationMembers.map(membersToJson),
  fc.constantFrom('', ' ', '\uFEFF{}', '{}', '[]', 'null', '"{}"', '{"a":1}{"b":2}', '{"a":1,}', "{'a':1}", '{a:1}', 'NaN', '-0', '1e309', '{"__proto__":{"x":1}}', '\u0000', '{"donor_email":"a@b.c"', '\u000b', '\u00a0{}', '\uFEFF\uFEFF{}'),
);

/** An Authorization header value that must never authenticate. */
function invalidAuthorization(charity: { username: string; password: string }): fc.Arbitrary<string | undefined> {
  const { username, password } = charity;
  const b64 = (s: string | Uint8Array) => Buffer.from(s).toString('base64');
  return fc.oneof(
    fc.constant(undefined),
    fc.constantFrom('', ' ', 'Basic', 'Basic ', 'Basic  ', 'basic', 'Basic =', 'Basic ====', 'Basic Og==', 'Basic !!!', 'Bearer abc', 'Digest username="x"',
      'Basic dXNlcg==', 'Basic OnBhc3N3b3Jk', `Basic ${b64(`${username}:`)}`, `Basic ${b64(`:${password}`)}`, `Basic ${b64(`${username}\u0000:${password}`)}`,
      `Basic ${b64(`${username}:${password}\u0000`)}`, `Bearer ${b64(`${username}:${password}`)}`, `Basic ${b64(`${username.toUpperCase()}:${password}`)}`,
      `Basic ${username}:${password}`, `${b64(`${username}:${password}`)}`, `Basic ${b64(`${username} :${password}`)}`),
    fc.string({ unit: 'binary', maxLength: 60 }),
    fc.string({ unit: 'binary', maxLength: 60 }).map((s) => `Basic ${s}`),
    fc.uint8Array({ maxLength: 80 }).map((bytes) => `Basic ${Buffer.from(bytes).toString('latin1')}`),
    fc.uint8Array({ maxLength: 80 }).map((bytes) => `Basic ${b64(bytes)}`),
    fc.tuple(anyString, anyString).map(([u, p]) => `Basic ${b64(`${u}:${p}`)}`),
    fc.tuple(anyString, fc.constantFrom('', ':', '\u0000', '😀')).map(([s, c]) => basic(username, `${password}${c}${s}`)).filter((h) => h !== basic(username, password)),
    fc.nat(password.length - 1).map((n) => basic(username, password.slice(0, n))),
    fc.tuple(anyString, fc.constantFrom('', '-', '\u0000')).map(([s, c]) => basic(`${username}${c}${s}`, password)).filter((h) => h !== basic(username, password)),
    fc.integer({ min: 1_000, max: 200_000 }).map((n) => `Basic ${'A'.repeat(n)}`),
    // usernames around the lengths where a server might cut them (a cut can split a surrogate pair)
    fc.tuple(fc.integer({ min: 0, max: 300 }), fc.constantFrom('😀', '\u{10FFFF}', 'é', '\ud800')).map(([n, c]) => basic(`${'a'.repeat(n)}${c.repeat(8)}`, 'x')),
    fc.integer({ min: 1_000, max: 100_000 }).map((n) => basic('x'.repeat(n), password)),
    fc.integer({ min: 1_000, max: 100_000 }).map((n) => basic(username, '😀'.repeat(n))),
  );
}

/**
 * What a header value can be once Node's HTTP parser has accepted it: bytes read as latin1, only
 * HTAB, visible ASCII, space and obs-text (0x80-0xff), no leading or trailing whitespace. app.inject
 * skips that parser, so the in-process properties keep to what a real client can deliver (the
 * socket property sends raw bytes instead).
 */
const headerSafe = (s: string) =>
  Buffer.from(s, 'utf8')
    .toString('latin1')
    .replace(/[^\t\x20-\x7e\x80-\xff]/g, '')
    .replace(/^[ \t]+|[ \t]+$/g, '');

const contentTypes = fc.oneof(
  fc.constantFrom(
    'application/json', 'Application/JSON', 'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'application/json; charset="utf-8"',
    'application/json; charset=utf8', 'application/json; charset=latin1', 'application/json; charset=utf-16', 'application/json; charset=', 'application/json;',
    'application/json; boundary=x; charset=utf-8; charset=latin1', 'application/json ; charset=utf-8', 'application/jsonx', 'application/json-patch+json',
    'application/vnd.api+json', 'text/json', 'application/x-www-form-urlencoded', 'application/x-www-form-urlencoded; charset=UTF-8',
    'application/x-www-form-urlencoded; charset=latin1', 'multipart/form-data', 'multipart/form-data; boundary=x', 'text/plain', 'text/html',
    'application/xml', 'application/octet-stream', '*/*', 'application/*', '', ' ', ';', '; charset=utf-8', 'application/json, text/plain', 'json', 'application',
    '/json', 'application/', 'application/json\u0000',
  ),
  fc.string({ unit: 'binary-ascii', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }).map((s) => `application/json; charset=${s}`),
);

const ops = fc.constantFrom<Op>('me', 'create');

/** Stands for the credentials of one of the test's charities. */
const VALID = Symbol('valid credentials');
type Credentials = typeof VALID | string | undefined;

/**
 * Idempotency-Key values: a small pool, so that keys come back with the same body (a replay) and
 * with another (a 422), and odd ones (empty, too long, unprintable, unicode).
 */
const idempotencyKeys = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: fc.constantFrom('k1', 'k2', 'k3', 'order-42', 'x'.repeat(255)) },
  {
    weight: 2,
    arbitrary: fc.oneof(
      fc.constantFrom('', ' ', 'x'.repeat(256), 'a\tb', 'é', '😀', '\u0000', 'k1, k2'),
      fc.string({ unit: 'binary-ascii', maxLength: 20 }),
      fc.string({ unit: 'binary', maxLength: 10 }),
    ),
  },
);

// ---------------------------------------------------------------------------------------------
// Requests and the invariants every answer must keep.

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

interface Sent {
  op: Op;
  /** false: credentials that must not authenticate; undefined: not known to the test. */
  authenticated: boolean | undefined;
  /** Whose valid credentials the request carries, if any. */
  charity?: TestCharity | undefined;
  /** The JSON object the server sees, when the test knows it: a 200 must echo it. */
  object?: Record<string, unknown> | undefined;
  /** The x-request-id sent, if any. */
  requestId?: string | undefined;
}

/** What a leaked stack trace or raw exception looks like, in a JSON body (where a newline is `\n`). */
const STACK = [/\bat [^\s()]+ \(?(?:file:\/\/|node:|\/)[^\s)]*:\d+:\d+\)?/, /\n\s+at /, /\\n\s*at /, /\.(?:js|ts|mjs|cjs):\d+:\d+/, /(?:^|\W)(?:[A-Z][A-Za-z]*)?Error: /];

/** What an oracle expects of a body within the limit: `/me` reads none, so whatever it is gets a 200 there (a 400 or 415 before 2026-11-28). */
const unread = (op: Op, status: number) => (op === 'me' ? 200 : status);

/** The status an oracle expects; an authenticated create may also meet the create rate limit (429). */
function assertStatus(a: Answer, op: Op, ...expected: number[]): void {
  if (op === 'create' && a.status === 429) return;
  assert.ok(expected.includes(a.status), `expected ${expected.join(' or ')}, got ${describeAnswer(a)}`);
}

function describeAnswer(a: Answer): string {
  return `${a.status} ${a.body.length > 600 ? `${a.body.slice(0, 600)}…` : a.body}`;
}

/** The JSON object a JSON body gives the server, or why it gives none, by the README's rules. */
function parseLikeServer(text: string): { object: Record<string, unknown> } | { error: 'json' | 'not-object' } {
  // The decoder takes one byte-order mark; then a body of JSON's own whitespace alone (space, tab, LF, CR) is an empty
  // object. Not String.prototype.trim's, which takes a vertical tab, a no-break space or a second mark too: with it, this
  // model expected a body of "\u000b" to be read as empty, where the server rightly answers 400 (a CI run, 2026-11-30).
  const source = text.replace(/^\uFEFF/, '');
  if (/^[ \t\n\r]*$/.test(source)) return { object: {} };
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch {
    return { error: 'json' };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { error: 'not-object' };
  return { object: value as Record<string, unknown> };
}

/** What a 200 must echo, by the README's field table. */
function expectedEcho(sent: Record<string, unknown>, data: Record<string, unknown>): void {
  const given = (f: string) => (Object.hasOwn(sent, f) ? sent[f] : undefined);
  for (const f of TEXT_FIELDS) {
    const v = given(f);
    assert.equal(data[f], typeof v === 'string' ? v : null, `${f} is echoed`);
  }
  assert.equal(data.donor_email, given('donor_email'), 'donor_email is echoed');
  const ip = given('donor_ip');
  assert.equal(data.donor_ip, typeof ip === 'string' && ip !== '' ? ip : null, 'donor_ip is echoed');
  assert.equal(data.gift_aid, given('gift_aid'));
  assert.equal(data.donation_type, given('donation_type'));
  const amount = given('amount');
  assert.equal(data.amount, typeof amount === 'number' ? String(amount) : amount, 'amount is echoed');
  const date = given('donation_date');
  if (typeof date === 'string') {
    const [d, m, y] = date.split('-');
    assert.equal(data.donation_date, `${y}-${m}-${d}T00:00:00.000000Z`);
  } else {
    assert.match(String(data.donation_date), TIMESTAMP);
  }
  // Yes is yes, true, 1 or on, in any case (the form words), or JSON's true or 1; anything else valid is no.
  const zakat = given('zakat_donation');
  const yes = zakat === true || zakat === 1 || (typeof zakat === 'string' && ['yes', 'true', '1', 'on'].includes(zakat.toLowerCase()));
  assert.equal(data.zakat_donation, yes, `zakat_donation ${JSON.stringify(zakat)} is echoed`);
}

for (const backend of BACKENDS) describe(`hostile input [${backend.name}]`, () => {
  let t: TestContext;
  let probe: Probe;
  let port: number;
  let requests = 0;
  let created = 0;
  let replays = 0;
  let throttled = 0;
  let addresses = 0;
  /** A fresh client address for each request: 10.0.0.0/8 in-process, 127.0.0.0/8 (bindable on Linux) over a socket. */
  const nextAddress = (first: 10 | 127) => {
    const n = ++addresses;
    return `${first}.${(n >> 16) & 255}.${(n >> 8) & 255}.${(n & 255) || 1}`;
  };

  before(async () => {
    t = await startTestApp(backend, { failureDelay: NO_FAILURE_DELAY }); // hundreds of 401s, none of them timed
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
    probe = await openProbe(t.databaseUrl);
    charities = [t.charity];
    for (let i = 1; i < 8; i++) charities.push(await t.signUp(`Hostile Test ${i}`, `charity${i}@example.org`));
  });
  after(async () => {
    await probe?.close();
    await t?.close();
  });

  async function check(sent: Sent, a: Answer, countBefore: number): Promise<void> {
    requests++;
    const what = describeAnswer(a);
    assert.ok(a.status < 500, `a server error: ${what}`);
    assert.ok(ALLOWED.has(a.status) || a.status === 429, `an unexpected status: ${what}`);
    assert.match(String(a.headers['content-type']), /^application\/json\b/, `not JSON: ${what}`);
    let body: unknown;
    assert.doesNotThrow(() => (body = JSON.parse(a.body)), `the body is not JSON: ${what}`);

    // Responses that went through the app (not Node's own parser errors) carry the API headers.
    if (a.headers['x-request-id'] !== undefined) {
      assert.equal(a.headers['cache-control'], 'no-store', what);
      assert.equal(a.headers['x-content-type-options'], 'nosniff', what);
      const id = String(a.headers['x-request-id']);
      assert.match(id, /^[\x21-\x7e]{1,200}$/, `the response's X-Request-Id ${JSON.stringify(id.length > 60 ? `${id.slice(0, 60)}… (${id.length} characters)` : id)} is not 1 to 200 printable characters (sent ${JSON.stringify(sent.requestId?.slice(0, 60))})`);
      if (sent.requestId !== undefined && /^[\x21-\x7e]{1,200}$/.test(sent.requestId)) assert.equal(id, sent.requestId, 'a valid request id is echoed');
      else assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `without a valid request id of its own, a request gets a UUID, not ${JSON.stringify(id.slice(0, 60))}`);
    }

    if (a.status !== 200) {
      assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `an error body is an object: ${what}`);
      const message = (body as { message?: unknown }).message;
      assert.equal(typeof message, 'string', `an error body has a string message: ${what}`);
      assert.ok((message as string).length > 0, what);
      // (a 200 echoes what was sent, which may look like anything; an error body must not)
      for (const pattern of STACK) assert.doesNotMatch(a.body, pattern, `a stack trace or raw error: ${what}`);
    }
    if (sent.authenticated === false) {
      assert.equal(a.status, 401, `no valid credentials, yet: ${what}`);
      assert.deepEqual(body, { message: 'Unauthorized' });
    }
    if (a.status === 429) {
      // Only the per-charity create rate may answer 429 here: every request has its own address.
      throttled++;
      assert.equal(sent.op, 'create', `a 429 on /me: ${what}`);
      assert.notEqual(sent.authenticated, false, `a 429 for a request without valid credentials: ${what}`);
      assert.match(String((body as { message: string }).message), /^Too many donations sent too quickly\./, what);
      assert.match(String(a.headers['retry-after']), /^[1-9][0-9]*$/, `a 429 without Retry-After: ${what}`);
    }
    if (a.status === 422) {
      assert.equal(sent.op, 'create', what);
      const errors = (body as { errors?: unknown }).errors;
      assert.ok(errors !== null && typeof errors === 'object' && Object.keys(errors).length > 0, `a 422 names its fields: ${what}`);
      for (const [field, list] of Object.entries(errors as object)) {
        assert.ok(FIELDS.includes(field) || field === 'idempotency_key', `a 422 names a donation field, not ${JSON.stringify(field)}`);
        assert.ok(Array.isArray(list) && list.length > 0 && list.every((m) => typeof m === 'string'), what);
      }
    }

    const countAfter = await probe.count();
    if (sent.op === 'me' || a.status !== 200) {
      assert.equal(countAfter, countBefore, `a ${a.status} on ${sent.op} changed the number of stored donations: ${what}`);
      if (a.status === 200) {
        const charity = sent.charity ?? t.charity;
        assert.deepEqual(body, { success: true, message: 'Authenticated', data: { name: charity.name, email: charity.email } });
      }
      return;
    }

    // A 200 on create: exactly one new record (none for a replay), and it is what the response says.
    const replayed = a.headers['idempotent-replayed'] === 'true';
    if (replayed) replays++;
    else created++;
    assert.equal(countAfter, countBefore + (replayed ? 0 : 1), `a 200 on create (${replayed ? 'replayed' : 'new'}) stored ${countAfter - countBefore} records: ${what}`);
    const data = (body as { data: Record<string, unknown> }).data;
    assert.deepEqual(Object.keys(data), RECORD_KEYS, what);
    assert.equal(typeof data.id, 'number');
    const row = await probe.row(data.id as number);
    assert.ok(row, `record ${String(data.id)} is not in the database`);
    const stored: Record<string, unknown> = { id: Number(row.id) };
    for (const f of DONATION_FIELDS) {
      // A yes/no field and a flag are 1 or 0 in the row, "yes"/"no" and a boolean in the record.
      const value = row[f.name];
      stored[f.name] = f.kind === 'yes_no' ? (Number(value) === 1 ? 'yes' : 'no') : f.kind === 'flag' ? Number(value) === 1 : value;
    }
    assert.deepEqual(stored, data, 'the stored row differs from the response');
    assert.equal(Number(row.charity_id), (sent.charity ?? t.charity).id, 'the record belongs to the charity that sent it');
    assert.equal(Number(row.amount_minor), Math.round(Number(data.amount) * 100), 'amount_minor is the amount in pence');
    if (sent.object) expectedEcho(sent.object, data);
  }

  /** Sends a request in-process (header values as Node's parser would deliver them) and checks every invariant. */
  async function inject(
    sent: Sent,
    request: { headers?: Record<string, string | undefined>; payload?: string | Buffer | undefined; url?: string },
  ): Promise<Answer> {
    const countBefore = await probe.count();
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(request.headers ?? {})) if (v !== undefined) headers[k] = headerSafe(v);
    const res = await t.app.inject({ method: 'POST', url: request.url ?? URLS[sent.op], headers, remoteAddress: nextAddress(10), ...(request.payload !== undefined ? { payload: request.payload } : {}) });
    const answer = { status: res.statusCode, headers: res.headers as Answer['headers'], body: res.body };
    await check(sent, answer, countBefore);
    return answer;
  }

  /** Sends raw bytes over a real socket (Connection: close) and checks every invariant. */
  async function raw(sent: Sent, bytes: Buffer): Promise<Answer> {
    const countBefore = await probe.count();
    const answer = await new Promise<Answer>((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress: nextAddress(127) });
      const received: Buffer[] = [];
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('no answer within 10 s: the server hung'));
      }, 10_000);
      socket.on('data', (d) => received.push(d));
      socket.on('error', () => {}); // a reset after the answer is fine; no answer at all fails below
      socket.on('close', () => {
        clearTimeout(timer);
        const text = Buffer.concat(received);
        const end = text.indexOf('\r\n\r\n');
        if (end < 0) return reject(new Error(`no HTTP answer, got ${JSON.stringify(text.toString('latin1').slice(0, 200))}`));
        const [statusLine, ...lines] = text.subarray(0, end).toString('latin1').split('\r\n');
        const headers: Answer['headers'] = {};
        for (const line of lines) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        let body = text.subarray(end + 4);
        if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
        resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0), headers, body: body.toString('utf8') });
      });
      socket.on('connect', () => socket.write(bytes));
    });
    await check(sent, answer, countBefore);
    return answer;
  }

  /**
   * Valid credentials rotate over several charities: the per-charity create rate limit (100 per
   * second) would otherwise answer most of these fast sequential creates with a 429.
   */
  let charities: TestCharity[] = [];
  let turn = 0;
  const nextCharity = () => charities[turn++ % charities.length]!;
  const authFor = (auth: Credentials): { authenticated: boolean; charity?: TestCharity; authorization: string | undefined } => {
    if (auth !== VALID) return { authenticated: false, authorization: auth };
    const charity = nextCharity();
    return { authenticated: true, charity, authorization: charity.authorization };
  };
  /** Valid credentials (weight `valid`) or an Authorization header that must not authenticate (weight 1). */
  const credentials = (valid: number) =>
    fc.oneof({ weight: valid, arbitrary: fc.constant<Credentials>(VALID) }, { weight: 1, arbitrary: invalidAuthorization(t.charity) });

  test('random JSON values as bodies, to both operations, with and without credentials', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        credentials(3),
        anyJsonText,
        fc.constantFrom('application/json', 'application/json; charset=utf-8'),
        async (op, auth, text, contentType) => {
          const parsed = parseLikeServer(text);
          const { authorization, ...who } = authFor(auth);
          const valid = who.authenticated;
          const sent: Sent = { op, ...who, object: 'object' in parsed ? parsed.object : undefined };
          const res = await inject(sent, { headers: { authorization, 'content-type': contentType, accept: 'application/json' }, payload: text });
          if (valid && 'error' in parsed) assertStatus(res, op, unread(op, 400));
          if (valid && op === 'create' && 'object' in parsed) assertStatus(res, op, 200, 422);
        },
      ),
      {
        ...runs(300),
        examples: [
          // Found: a username whose 100th UTF-16 unit is the first half of an emoji got a 500 before
          // any lookup (the throttle key cut the username at 100 units, then encodeURIComponent threw).
          ['me', basic(`${'a'.repeat(99)}😀`, 'x'), '', 'application/json'],
          ['create', basic(`${'a'.repeat(99)}😀`, 'x'), '{}', 'application/json'],
        ],
      },
    );
  });

  test('every donation field given a random type', async () => {
    await fc.assert(
      fc.asyncProperty(
        credentials(9),
        donationMembers,
        fc.option(fc.constantFrom('k1', 'k2', 'k3'), { nil: undefined, freq: 3 }),
        fc.boolean(),
        async (auth, members, key, retry) => {
          const text = membersToJson(members);
          const parsed = parseLikeServer(text);
          assert.ok('object' in parsed, 'the generator makes JSON objects');
          const { authorization, ...who } = authFor(auth);
          const valid = who.authenticated;
          const sent: Sent = { op: 'create', ...who, object: parsed.object };
          const headers = { authorization, 'content-type': 'application/json', 'idempotency-key': key };
          const res = await inject(sent, { headers, payload: text });
          // A long string of characters JSON escapes six bytes each (NUL as \u0000) can pass the body's limit: a 413 then (a CI run drew one).
          if (valid) assertStatus(res, 'create', ...(Buffer.byteLength(text) > BODY_LIMIT ? [413] : [200, 422]));
          if (retry && key !== undefined && res.status === 200) {
            // The client retries (say, after a timeout): the first answer again, and nothing new stored.
            const again = await inject(sent, { headers, payload: text });
            if (again.status !== 429) {
              assert.equal(again.status, 200, describeAnswer(again));
              assert.equal(again.headers['idempotent-replayed'], 'true');
              assert.deepEqual(JSON.parse(again.body), JSON.parse(res.body));
            }
          }
        },
      ),
      {
        ...runs(300),
        examples: [
          // Found: a lone surrogate (valid JSON, "\ud800") in a text field was acknowledged with a 200
          // echoing it, but stored as U+FFFD (PostgreSQL) or three U+FFFD (SQLite).
          [VALID, Object.entries(exampleDonation({ donor_first_name: '\ud800' })), undefined, false],
          // Found: a lone surrogate in donor_email was a 500 (validator's isEmail threw URIError).
          [VALID, Object.entries(exampleDonation({ donor_email: 'a\ud800@example.com' })), undefined, false],
        ],
      },
    );
  });

  test('deeply nested JSON (1k to 100k levels), balanced or not, at the top or in a field', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        credentials(3),
        fc.integer({ min: 1_000, max: 100_000 }),
        fc.constantFrom('[', '{"a":', '{"__proto__":', '{"constructor":', '{"donor_email":', '[{"x":'),
        fc.constantFrom('top', 'field', 'unbalanced', 'unclosed'),
        fc.constantFrom(...FIELDS),
        async (op, auth, depth, open, where, field) => {
          const close = open === '[' ? ']' : open.startsWith('[') ? '}]' : '}';
          const nest = (inner: string) => open.repeat(depth) + inner + close.repeat(depth);
          const base = toJson(exampleDonation()).slice(1, -1);
          const text =
            where === 'top' ? nest('1')
            : where === 'field' ? `{${base},${JSON.stringify(field)}:${nest('"x"')}}`
            : where === 'unbalanced' ? `{${base},${JSON.stringify(field)}:${open.repeat(depth)}1${close.repeat(depth - 1)}}`
            : open.repeat(depth);
          const parsed = parseLikeServer(text);
          const { authorization, ...who } = authFor(auth);
          const valid = who.authenticated;
          const sent: Sent = { op, ...who, object: 'object' in parsed ? parsed.object : undefined };
          const res = await inject(sent, { headers: { authorization, 'content-type': 'application/json' }, payload: text });
          if (valid && Buffer.byteLength(text) > BODY_LIMIT) return assertStatus(res, op, 413);
          if (valid && where === 'field' && op === 'create') {
            assertStatus(res, op, 422);
            if (res.status === 422) assert.deepEqual(Object.keys(JSON.parse(res.body).errors), [field]);
          }
          if (valid && (where === 'unbalanced' || where === 'unclosed' || (where === 'top' && open === '['))) assertStatus(res, op, unread(op, 400));
        },
      ),
      runs(40),
    );
  });

  test('huge bodies: huge strings, many keys, long arrays, on both sides of the body limit', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        credentials(3),
        fc.constantFrom('field', 'padding', 'keys', 'array', 'form'),
        fc.constantFrom(...FIELDS),
        fc.integer({ min: BODY_LIMIT / 4, max: 3 * BODY_LIMIT }),
        fc.constantFrom('x', 'é', '😀', '\\u0000', '\\ud800'),
        async (op, auth, shape, field, size, unit) => {
          let text: string;
          let contentType = 'application/json';
          const base = toJson(exampleDonation()).slice(1, -1);
          const filler = unit.repeat(Math.ceil(size / Buffer.byteLength(unit)));
          if (shape === 'field') text = `{${base},${JSON.stringify(field)}:"${filler}"}`;
          else if (shape === 'padding') text = `{${base},"padding":"${filler}"}`;
          else if (shape === 'keys') text = `{${base},${Array.from({ length: Math.ceil(size / 12) }, (_, i) => `"k${i}":${i}`).join(',')}}`;
          else if (shape === 'array') text = `{${base},${JSON.stringify(field)}:[${'1,'.repeat(Math.ceil(size / 2))}1]}`;
          else {
            contentType = 'application/x-www-form-urlencoded';
            text = `${new URLSearchParams(exampleDonation() as Record<string, string>).toString()}&${field}=${encodeURIComponent(filler.slice(0, size))}`;
          }
          const bytes = Buffer.byteLength(text);
          const parsed = contentType === 'application/json' ? parseLikeServer(text) : { error: 'form' as const };
          const { authorization, ...who } = authFor(auth);
          const valid = who.authenticated;
          const sent: Sent = { op, ...who, object: 'object' in parsed ? parsed.object : undefined };
          const res = await inject(sent, { headers: { authorization, 'content-type': contentType }, payload: text });
          if (valid && bytes > BODY_LIMIT) assertStatus(res, op, 413);
          if (valid && bytes <= BODY_LIMIT && op === 'create') assertStatus(res, op, shape === 'padding' || shape === 'keys' ? 200 : 422);
        },
      ),
      runs(24),
    );
  });

  test('odd headers: content types, charsets, Authorization values, Accept, request ids, Idempotency-Key, query strings', async () => {
    const bodies = fc.oneof(
      fc.constant(undefined),
      fc.constant(toJson(exampleDonation())),
      donationMembers.map(membersToJson),
      fc.constant(new URLSearchParams(exampleDonation() as Record<string, string>).toString()),
      fc.string({ unit: 'binary', maxLength: 40 }),
    );
    await fc.assert(
      fc.asyncProperty(
        ops,
        credentials(1),
        fc.option(contentTypes, { nil: undefined }),
        fc.option(fc.oneof(fc.constantFrom('application/json', 'text/html', '*/*', 'application/xml', '', 'application/json;q=0'), fc.string({ unit: 'binary', maxLength: 30 })), { nil: undefined }),
        fc.option(fc.oneof(fc.string({ unit: 'binary-ascii', maxLength: 30 }), fc.string({ unit: 'binary', maxLength: 30 }), fc.constantFrom('x'.repeat(200), 'x'.repeat(201), 'a b', '')), { nil: undefined }),
        fc.constantFrom('', '/', '?', '?a=1', '?__proto__[x]=1', '?amount=5&amount=6', '?%', '?%ZZ', '?a=%ED%A0%80', '?constructor[prototype][x]=1', '//', '/?x=1#frag'),
        bodies,
        idempotencyKeys,
        async (op, auth, contentType, accept, requestId, suffix, payload, key) => {
          const { authorization, ...who } = authFor(auth);
          const sent: Sent = { op, ...who, requestId: requestId === undefined ? undefined : headerSafe(requestId) };
          if (suffix === '//') {
            // not the same route: a 404 or 405 is fine, never an error
            sent.authenticated = undefined;
          }
          await inject(sent, {
            url: URLS[op] + suffix,
            headers: {
              authorization,
              'content-type': contentType,
              accept,
              'x-request-id': requestId,
              'idempotency-key': key,
            },
            payload,
          });
        },
      ),
      {
        ...runs(250),
        examples: [
          // Found: X-Request-Id values that are not 1 to 200 printable ASCII characters were echoed
          // (README: "otherwise a generated UUID"): a space, 201 characters, an obs-text byte.
          ['me', VALID, undefined, undefined, 'a b', '', undefined, undefined],
          ['me', VALID, undefined, undefined, 'x'.repeat(201), '', undefined, undefined],
          ['me', VALID, undefined, undefined, 'Â', '', undefined, undefined],
        ],
      },
    );
  });

  test('odd encodings: invalid UTF-8, UTF-16 and UTF-32 bodies, BOMs, raw bytes', async () => {
    const badBytes = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 12 }).map((b) => Buffer.from(b.filter((x) => x !== 0x22 && x !== 0x5c && x >= 0x20))),
      fc.constantFrom(
        [0xff], [0xfe, 0xff], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80],
        [0xc3], [0xe2, 0x82], [0x80], [0xbf], [0xef, 0xbb, 0xbf],
      ).map((b) => Buffer.from(b)),
    );
    await fc.assert(
      fc.asyncProperty(
        ops,
        credentials(3),
        fc.constantFrom('in-field', 'outside', 'utf16le', 'utf16le-bom', 'utf16be-bom', 'utf32', 'bom', 'random'),
        fc.constantFrom(...FIELDS),
        badBytes,
        fc.uint8Array({ maxLength: 200 }),
        fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json; charset=utf-16', 'application/x-www-form-urlencoded'),
        async (op, auth, how, field, bad, random, contentType) => {
          const json = toJson(exampleDonation());
          const [head, tail] = [json.slice(0, -1), '}'];
          let payload: Buffer;
          if (how === 'in-field') payload = Buffer.concat([Buffer.from(`${head},${JSON.stringify(field)}:"a`), bad, Buffer.from(`b"${tail}`)]);
          else if (how === 'outside') payload = Buffer.concat([Buffer.from(`${head},`), bad, Buffer.from(tail)]);
          else if (how === 'utf16le') payload = Buffer.from(json, 'utf16le');
          else if (how === 'utf16le-bom') payload = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json, 'utf16le')]);
          else if (how === 'utf16be-bom') payload = Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(json, 'utf16le').swap16()]);
          else if (how === 'utf32') payload = Buffer.from([...json].flatMap((c) => [c.codePointAt(0)!, 0, 0, 0]));
          else if (how === 'bom') payload = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]);
          else payload = Buffer.from(random);
          const { authorization, ...who } = authFor(auth);
          const valid = who.authenticated;
          const res = await inject({ op, ...who }, { headers: { authorization, 'content-type': contentType }, payload });
          if (valid && how === 'outside' && contentType.startsWith('application/json') && !contentType.includes('16')) assertStatus(res, op, unread(op, 400));
        },
      ),
      runs(150),
    );
  });

  test('form-urlencoded bodies: random keys and values, percent-escapes, bracket keys, repeated keys', async () => {
    const escape = fc.oneof(
      fc.integer({ min: 0, max: 255 }).map((b) => `%${b.toString(16).padStart(2, '0')}`),
      fc.constantFrom('%', '%Z', '%ZZ', '%2', '%E0%A4', '%ED%A0%80', '%C0%AF', '%FF', '%00', '%F0%9F%98%80', '+', '%2B', '%26', '%3D', '&', '=', ';', '[', ']', '[]'),
    );
    const rawText = fc.array(fc.oneof(fc.string({ unit: 'binary', maxLength: 6 }), escape), { maxLength: 6 }).map((p) => p.join(''));
    const key = fc.oneof(
      fc.constantFrom(...FIELDS),
      rawText,
      fc.tuple(fc.constantFrom(...FIELDS), rawText).map(([f, s]) => `${f}[${s}]`),
      fc.constantFrom('a[b]', 'a[]', '[]', '[', ']', '__proto__', 'constructor', '__proto__[amount]', 'constructor[prototype][amount]', 'donor_email[]', 'amount[0]', 'amount[]', '', 'toString', 'hasOwnProperty'),
    );
    const value = fc.oneof(rawText, anyString.map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, ''))), fc.constantFrom('', 'yes', '5', '25.00', 'a@b.co'));
    await fc.assert(
      fc.asyncProperty(
        ops,
        credentials(4),
        fc.boolean(),
        fc.array(fc.tuple(key, value), { maxLength: 6 }),
        fc.constantFrom('&', ';', '&&', '\n'),
        fc.constantFrom('application/x-www-form-urlencoded', 'application/x-www-form-urlencoded; charset=UTF-8', 'application/x-www-form-urlencoded; charset=latin1'),
        async (op, auth, withBase, pairs, separator, contentType) => {
          const base = withBase ? new URLSearchParams(exampleDonation() as Record<string, string>).toString().split('&') : [];
          const payload = [...base, ...pairs.map(([k, v]) => `${k}=${v}`)].join(separator);
          const { authorization, ...who } = authFor(auth);
          const res = await inject({ op, ...who }, { headers: { authorization, 'content-type': contentType }, payload });
          // A form in another charset is a 415, and one whose escapes are not UTF-8 (%FF, %C0%AF, %ED%A0%80) or
          // escape nothing a 400.
          // Any other form parses (to strings, or to arrays for repeated keys): a valid charity gets an answer about
          // its data; unless the form is one key beginning with `{` (say `%7b=`), which is JSON sent as a form: a 415.
          // The keys as the server's form parser reads them (fast-querystring): URLSearchParams differs on invalid
          // escapes and astral characters.
          const latin1 = contentType.endsWith('latin1');
          const bare = /%(?![0-9A-Fa-f]{2})/.test(payload); // a % that escapes nothing (%, %Z, %2): a 400
          const notUtf8 = bare || [...payload.matchAll(/(?:%[0-9A-Fa-f]{2})+/g)].some(([run]) => {
            const bytes = Buffer.from(run.replaceAll('%', ''), 'hex');
            return !Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes); // not UTF-8: decoding replaced something
          });
          const keys = Object.keys(parseQueryString(payload));
          // A body that begins with `{` is told apart by its text, before its escapes are looked at; one that is one
          // key beginning with `{` once decoded (`%7b=`) after.
          const jsonText = payload.trimStart().startsWith('{');
          const jsonAsForm = keys.length === 1 && keys[0]!.trimStart().startsWith('{');
          const expected = op === 'me' ? [200] : latin1 ? [415] : jsonText ? [415] : notUtf8 ? [400] : jsonAsForm ? [415] : [200, 422];
          if (who.authenticated) assertStatus(res, op, ...expected);
        },
      ),
      runs(250),
    );
  });

  test('over a real socket: duplicated and missing headers, raw header bytes, chunked bodies', async () => {
    const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/).filter(
      (n) => !['host', 'content-length', 'transfer-encoding', 'connection', 'expect', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-connection'].includes(n.toLowerCase()),
    );
    // Header bytes: anything but CR and LF (which would end the header and start another).
    const headerBytes = fc.uint8Array({ maxLength: 60 }).map((b) => Buffer.from(b.filter((x) => x !== 0x0d && x !== 0x0a)));
    const authValue = fc.oneof(
      fc.constant('valid' as const),
      invalidAuthorization(t.charity).map((s) => Buffer.from((s ?? '').replace(/[\r\n]/g, '').slice(0, 4000), 'utf8')),
      headerBytes.map((b) => Buffer.concat([Buffer.from('Basic '), b])),
    );
    await fc.assert(
      fc.asyncProperty(
        ops,
        fc.array(authValue, { maxLength: 3 }),
        fc.array(fc.oneof(contentTypes.map((s) => Buffer.from(s.replace(/[\r\n]/g, ''), 'utf8')), headerBytes), { maxLength: 3 }),
        fc.array(fc.tuple(token, headerBytes), { maxLength: 4 }),
        fc.oneof(fc.constant(toJson(exampleDonation())), anyJsonText, donationMembers.map(membersToJson)),
        fc.constantFrom('length', 'chunked', 'none'),
        async (op, auths, contentTypeValues, extra, text, framing) => {
          const lines: Buffer[] = [Buffer.from(`POST ${URLS[op]} HTTP/1.1\r\nHost: x\r\n`)];
          const header = (name: string, value: Buffer) => lines.push(Buffer.from(`${name}: `), value, Buffer.from('\r\n'));
          const charity = nextCharity();
          for (const a of auths) header('Authorization', a === 'valid' ? Buffer.from(charity.authorization) : a);
          for (const c of contentTypeValues) header('Content-Type', c);
          for (const [name, value] of extra) header(name, value);
          const body = Buffer.from(framing === 'none' ? '' : text);
          if (framing === 'length') header('Content-Length', Buffer.from(String(body.length)));
          if (framing === 'chunked') header('Transfer-Encoding', Buffer.from('chunked'));
          lines.push(Buffer.from('Connection: close\r\n\r\n'));
          if (framing === 'length') lines.push(body);
          if (framing === 'chunked') lines.push(Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n'));
          // Without any valid Authorization the answer is a 401, unless Node's own parser refused the
          // request first (a JSON 400 without the app's headers). With several, a 400 (since 2026-11-29:
          // Node kept the first, where a proxy in front may read another), as with several Content-Types (since 2026-11-30).
          const res = await raw({ op, authenticated: undefined, charity }, Buffer.concat(lines));
          const count = (name: string) => extra.filter(([n]) => n.toLowerCase() === name).length;
          const authorizations = auths.length + count('authorization');
          const contentTypes = contentTypeValues.length + count('content-type');
          if (res.headers['x-request-id'] !== undefined) {
            if (authorizations > 1 || contentTypes > 1) assert.equal(res.status, 400, describeAnswer(res));
            else if (!auths.includes('valid')) assert.equal(res.status, 401, describeAnswer(res));
          }
        },
      ),
      runs(150),
    );
  });

  test('a header block beyond what Node accepts (64 KiB Authorization) gets a JSON 431, and the server goes on', async () => {
    const head = `POST ${URLS.me} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${'A'.repeat(64 * 1024)}\r\nConnection: close\r\n\r\n`;
    const countBefore = await probe.count();
    const res = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(head));
      const received: Buffer[] = [];
      socket.on('data', (d) => received.push(d));
      socket.on('error', () => {});
      socket.on('close', () => resolve(Buffer.concat(received).toString('utf8')));
    });
    assert.match(res, /^HTTP\/1\.1 431 /);
    assert.match(res, /\r\n\r\n\{"message":"The request headers are too large\."\}$/);
    assert.match(res, /\r\nCache-Control: no-store\r\n/i);
    assert.match(res, /\r\nX-Content-Type-Options: nosniff\r\n/i);
    assert.equal(await probe.count(), countBefore);
  });

  test('afterwards the server still answers normally, in-process and over a socket', async () => {
    // The charities above may have used up this second's creates: one that sent none creates here.
    const quiet = await t.signUp('Hostile Afterwards', 'afterwards@example.org');
    const countBefore = await probe.count();
    const res = await inject(
      { op: 'create', authenticated: true, charity: quiet, object: exampleDonation() },
      { headers: { authorization: quiet.authorization, 'content-type': 'application/json', accept: 'application/json' }, payload: JSON.stringify(exampleDonation()) },
    );
    assert.equal(res.status, 200, describeAnswer(res));
    const me = await fetch(`http://127.0.0.1:${port}${URLS.me}`, { method: 'POST', headers: { authorization: t.charity.authorization, accept: 'application/json' } });
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { message: string }).message, 'Authenticated');
    const socketCreate = await fetch(`http://127.0.0.1:${port}${URLS.create}`, {
      method: 'POST',
      headers: { authorization: quiet.authorization, 'content-type': 'application/json' },
      body: JSON.stringify(exampleDonation({ amount: '1.00' })),
    });
    assert.equal(socketCreate.status, 200);
    assert.equal(await probe.count(), countBefore + 2);
    // How much of the run reached the database, for whoever reads the log.
    console.log(`hostile input [${backend.name}]: ${requests} requests checked; ${created} donations created, ${replays} idempotent replays, ${throttled} create-rate 429s`);
    assert.ok(created >= Math.floor(10 * SCALE), `the generators should produce a good share of valid creates (got ${created})`);
  });
});
