// GET /api/v1/openapi.json: a valid OpenAPI 3.1 document, built from the field table, whose
// examples and messages are what the live server does. (That every exchange of the HTTP suite
// conforms to it is checked by test/support/app.ts, for every test that uses startTestApp.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import fc from 'fast-check';
import { ValidationError } from '../../src/client/index.js';
import { DONATION_FIELDS, YES_NO, type FieldSpec } from '../../src/donations/fields.js';
import { DESCRIBED_ONLY } from '../../src/donations/schema.js';
import { validateDonation } from '../../src/donations/validate.js';
import { codeSampleFiles } from '../../src/http/code-samples.js';
import { buildOpenApiDocument, GATEWAY_MESSAGES } from '../../src/http/openapi.js';
import { exampleDonation, startTestApp, type TestContext } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { rejection } from '../support/client.js';
import { OpenApiConformance } from '../support/openapi.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

// 408, 417 and 431 declared for each operation since 2026-11-29 (a review: they were only in the description).
const ERROR_STATUSES = ['400', '401', '403', '405', '408', '413', '415', '417', '429', '431', '500', '502', '503', '504'];

describe('the OpenAPI document', () => {
  const document: Json = buildOpenApiDocument(version);
  const checker = new OpenApiConformance(document);
  const op = (path: string): Json => document.paths[path].post;

  test('is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator, the official schemas)', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    assert.deepEqual(result.errors, undefined);
    assert.equal(result.valid, true);
    assert.equal(validator.version, '3.1');
  });

  test('every schema in it compiles as JSON Schema 2020-12 in Ajv strict mode', () => {
    for (const [name, schema] of Object.entries<Json>(document.components.schemas)) {
      assert.doesNotThrow(() => checker.compile(schema), name);
    }
    assert.throws(() => checker.compile({ type: 'strin' }), /schema is invalid/);
  });

  test("every pattern is one RE2 compiles (Go's and Rust's regular expressions, and the tools on them): no lookaround, no backreference", () => {
    const patterns: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) return v.forEach(walk);
      if (v === null || typeof v !== 'object') return;
      for (const [k, child] of Object.entries(v)) {
        if (k === 'pattern' && typeof child === 'string') patterns.push(child);
        else walk(child);
      }
    };
    walk(document);
    assert.ok(patterns.length >= 4, `patterns found: ${patterns.length}`);
    // The amount's had a lookahead until 2026-11-28; RE2 refused it ("invalid or unsupported Perl syntax: `(?=`").
    for (const p of patterns) assert.doesNotMatch(p, /\(\?[=!]|\(\?<[=!]|\\[1-9]/, p);
  });

  test("no pattern takes a final line break where $ matches before one (Python's re, which its JSON Schema validators use): each such value is refused by another keyword or said in words", () => {
    // Python's $ is JavaScript's (?=\n?$): "25-02-2021\n" matched the date's pattern there, and the server refused it (a review).
    const pythonLike = (pattern: string) => new RegExp(pattern.replace(/\$$/, '(?=\n?$)'));
    const input = document.components.schemas.DonationInput.properties;
    const date = input.donation_date;
    assert.ok(pythonLike(date.pattern).test('25-02-2021\n') && !new RegExp(date.pattern).test('25-02-2021\n'), 'the engines differ here');
    assert.equal(date.maxLength, 10, 'the date is refused by its length');
    for (const name of ['amount', 'zakat_donation']) assert.match(input[name].description, /line break/, `${name} says so in words`);
    assert.equal(input.donor_email.minLength, 1, 'an empty address is refused where format is a note only');
  });

  test('X-Request-Id: either operation takes one, and an answer says it is absent where it can be (a 400 for a request that is not HTTP, a 429 as a connection opens)', () => {
    for (const path of ['/me', '/donation/create']) assert.deepEqual(op(path).parameters[0], { $ref: '#/components/parameters/X-Request-Id' }, path);
    const param = document.components.parameters['X-Request-Id'];
    assert.deepEqual([param.in, param.required, param.schema], ['header', false, { type: 'string' }]); // any value is taken: one that is no id is replaced
    for (const response of ['BadRequest', 'TooManyRequests']) assert.notEqual(document.components.responses[response].headers['X-Request-Id'].required, true, response);
  });

  test('has exactly the two operations of the interface, under the /api/v1 server, behind Basic auth', () => {
    assert.deepEqual(document.servers[0], { url: '/api/v1', description: 'This server' }); // built without an origin
    assert.deepEqual(new URL(document.servers[1].url.replace('{scheme}', 'https').replace('{host}', 'h.example')).pathname, '/api/v1');
    assert.deepEqual(Object.keys(document.paths), ['/me', '/donation/create']);
    assert.deepEqual(Object.keys(document.paths['/me']), ['post']);
    assert.deepEqual(Object.keys(document.paths['/donation/create']), ['post']);
    assert.equal(op('/me').summary, 'Test Connection');
    assert.equal(op('/donation/create').summary, 'Create Donation');
    assert.deepEqual(document.components.securitySchemes, {
      basicAuth: { type: 'http', scheme: 'basic', description: "The charity's username and password." },
    });
    assert.deepEqual(document.security, [{ basicAuth: [] }]);
  });

  test('lists every answer each operation can give, with its body shape (the conformance check fails the suite on any other)', () => {
    // /me reads neither a body nor an Idempotency-Key: its one 400 is a missing Host (until 2026-11-29 it listed
    // the create's 400s, and then none while Node answered a missing Host with no body).
    assert.deepEqual(Object.keys(op('/me').responses).sort(), ['200', ...ERROR_STATUSES].sort());
    const meBadRequest = checker.deref(op('/me').responses['400']);
    assert.match(meBadRequest.description, /^An HTTP\/1\.1 request has no Host header.* more than one Host, Authorization or Content-Type header\..* not valid HTTP/);
    // The 400 for a request that is not valid HTTP is sent before there is a request to name: it has no X-Request-Id
    // (until 2026-11-29 /me's 400 required one, and named a missing Host alone; an integrator's review).
    assert.notEqual(checker.deref(meBadRequest.headers['X-Request-Id']).required, true);
    assert.deepEqual(Object.keys(op('/donation/create').responses).sort(), ['200', '409', '422', ...ERROR_STATUSES].sort());
    for (const path of ['/me', '/donation/create']) {
      for (const [status, spec] of Object.entries<Json>(op(path).responses)) {
        const response = checker.deref(spec);
        assert.ok(response.description, `${path} ${status} has a description`);
        const schema = response.content?.['application/json']?.schema;
        assert.ok(schema, `${path} ${status} has a JSON body schema`);
        assert.ok(schema.required?.length, `${path} ${status}'s body has required properties`);
      }
    }
    const headerOf = (path: string, status: string, name: string) => checker.deref(op(path).responses[status]).headers?.[name];
    assert.deepEqual(headerOf('/me', '401', 'WWW-Authenticate').schema.enum, ['Basic realm="Almoner", charset="UTF-8"', 'XBasic realm="Almoner"']);
    assert.ok(headerOf('/me', '401', 'WWW-Authenticate').required);
    assert.ok(headerOf('/donation/create', '429', 'Retry-After').required);
    assert.ok(headerOf('/donation/create', '503', 'Retry-After').required);
    // A gateway's 502 and 504 (the shipped nginx's, while the service is down or slow): documented, word for word
    // as deploy/nginx.conf sends them, where until 2026-11-30 a client generated from the document had no schema for them.
    const nginx = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');
    for (const status of ['502', '504'] as const) {
      const response = checker.deref(op('/donation/create').responses[status]);
      assert.match(response.description, /never by the service itself.*same Idempotency-Key/);
      assert.ok(checker.deref(response.headers['Retry-After']));
      const sent = new RegExp(`return ${status} '(.*)';`).exec(nginx)?.[1];
      assert.equal(sent, JSON.stringify({ message: GATEWAY_MESSAGES[status] }), `nginx's ${status} body`);
      assert.deepEqual(response.content['application/json'].example, { message: GATEWAY_MESSAGES[status] });
    }
    assert.ok(headerOf('/me', '405', 'Allow').required);
    assert.ok(headerOf('/donation/create', '200', 'Idempotent-Replayed'));
  });

  test('describes every field of the field table: type, format, limits, example, and which are required', () => {
    const input = document.components.schemas.DonationInput;
    const record = document.components.schemas.Donation;
    assert.deepEqual(Object.keys(input.properties), DONATION_FIELDS.map((f) => f.name));
    assert.deepEqual(Object.keys(record.properties), ['id', ...DONATION_FIELDS.map((f) => f.name)]);
    assert.deepEqual(input.required, ['donor_email', 'gift_aid', 'amount', 'donation_type']);
    for (const f of DONATION_FIELDS as readonly FieldSpec[]) {
      const p = input.properties[f.name];
      assert.ok(p.description, f.name);
      assert.deepEqual(p.examples, [f.example], f.name);
      assert.ok(p.type || (p.anyOf as { type?: unknown }[] | undefined)?.every((b) => b.type), `${f.name} has a type (in every branch)`);
      const maxLengths = [p.maxLength, ...((p.anyOf as { maxLength?: number }[] | undefined) ?? []).map((b) => b.maxLength)].filter((m) => m !== undefined);
      if (f.maxLength !== undefined) assert.deepEqual([...new Set(maxLengths)], [f.maxLength], `${f.name} maxLength`);
      if (f.choices) assert.deepEqual(p.enum, f.choices, `${f.name} enum`);
      if (f.kind === 'yes_no') assert.deepEqual(p.enum, YES_NO, `${f.name} enum`);
      assert.ok(record.properties[f.name].type, `${f.name} has a type in the record`);
    }
    assert.equal(input.properties.donor_email.format, 'idn-email');
    assert.equal(record.properties.donation_date.format, 'date-time');
    assert.equal(input.properties.amount.anyOf[1].minimum, 0.01);
    const create = document.paths['/donation/create'].post.requestBody.content;
    assert.deepEqual(create['application/x-www-form-urlencoded'].example, create['application/json'].example, 'the form body has the example too');
    assert.ok(Object.values(create['application/x-www-form-urlencoded'].example).every((v) => typeof v === 'string'), "a form's values are strings");
    assert.deepEqual(record.required, ['id', ...DONATION_FIELDS.map((f) => f.name)]);
  });

  test('a form may leave the date, the flag and the payment method blank, as PHP sends them; JSON may not, and no other field may', () => {
    const form = checker.compile(document.components.schemas.DonationForm);
    const json = checker.compile(document.components.schemas.DonationInput);
    const blanked = (names: string[]) => ({ ...exampleDonation(), ...Object.fromEntries(names.map((n) => [n, ''])) });
    const mayBeBlank = DONATION_FIELDS.filter((f) => 'blankInFormIsAbsent' in f).map((f) => f.name);
    for (const name of ['payment_method', 'donation_date', 'zakat_donation']) assert.ok((mayBeBlank as readonly string[]).includes(name), name); // the interface's; a later field may add itself
    assert.ok(form(blanked(mayBeBlank)), checker.errorsOf(form));
    assert.ok(!json(blanked(['donation_date'])) && !json(blanked(['zakat_donation'])));
    assert.ok(form({ ...exampleDonation(), zakat_donation: '1' }) && form({ ...exampleDonation(), zakat_donation: 'on' }));
    for (const name of ['gift_aid', 'donation_type', 'amount', 'donor_email']) assert.ok(!form(blanked([name])), `${name} may not be blank`);
  });

  test('each operation carries its code samples (x-codeSamples): curl, PHP, Python, Node fetch and the typed client, each a file under examples/', () => {
    for (const [path, id] of [['/me', 'testConnection'], ['/donation/create', 'createDonation']] as const) {
      const files = codeSampleFiles(id);
      assert.deepEqual(files.map((f) => f.lang), ['Shell', 'PHP', 'Python', 'JavaScript', 'TypeScript']);
      assert.deepEqual(op(path)['x-codeSamples'], files.map((f) => ({ lang: f.lang, label: f.label, source: readFileSync(f.path, 'utf8') })));
    }
  });

  test("the example request is the interface's own, and the example response is what the server makes of it", () => {
    // The document's example is the field table's; every field of the tests' own example is in it,
    // the same (a field added later may bring an example the tests' does not have).
    const example = op('/donation/create').requestBody.content['application/json'].example;
    for (const [name, value] of Object.entries(exampleDonation())) assert.equal(example[name], value, name);
    const response = op('/donation/create').responses['200'].content['application/json'].example;
    assert.equal(response.data.donation_date, '2021-02-25T00:00:00.000000Z');
    assert.equal(response.data.zakat_donation, true);
  });

  test('the request schema and the validator agree: what the server accepts the schema allows, and what the schema allows the server refuses only for a rule in words', (t) => {
    const validate = checker.compile(document.components.schemas.DonationInput);
    const junk = fc.oneof(fc.string(), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 2 }), fc.object({ maxDepth: 1 }));
    const text = (max: number) =>
      fc.oneof(fc.string({ unit: 'binary', maxLength: 20 }), fc.constantFrom('', 'x'.repeat(max), 'x'.repeat(max + 1), '\ud800', 'a\u0000b', '😀'.repeat(max)), junk);
    const byKind: Record<string, fc.Arbitrary<unknown>> = {
      email: fc.oneof(
        fc.emailAddress(),
        fc.constantFrom('a@example.c', 'a@[1.2.3.4]', 'a..b@example.com', `${'x'.repeat(65)}@example.com`, 'ü@example.com', '"a b"@example.com', ''),
        text(254),
      ),
      ip: fc.oneof(fc.ipV4(), fc.ipV6(), fc.ipV4Extended(), fc.constantFrom('', 'fe80::1%eth0', '::ffff:1.2.3.4', '1.2.3'), text(255)),
      amount: fc.oneof(
        fc.double({ min: -10, max: 1e10 }),
        fc.integer(),
        fc.stringMatching(/^-?0{0,3}[0-9]{0,11}(\.[0-9]{0,4})?$/),
        fc.constantFrom('0', '0.00', '0.001', '0.01', '999999999.99', '999999999.991', '1000000000', '1e3', ' 1'),
        junk,
      ),
      date: fc.oneof(
        fc.stringMatching(/^[0-9]{2}-[0-9]{2}-[0-9]{4}$/),
        fc.constantFrom('29-02-2024', '29-02-2023', '31-04-2021', '00-01-2020', '01-01-0000', '2021-02-25'),
        junk,
      ),
      flag: fc.oneof(fc.constantFrom('yes', 'no', true, false, null, 'YES', 1, 0, ''), junk),
    };
    const fieldArbitrary = (f: FieldSpec): fc.Arbitrary<unknown> =>
      f.kind === 'choice' || f.kind === 'yes_no'
        ? fc.oneof(fc.constantFrom(...(f.choices ?? YES_NO)), fc.constantFrom('', 'YES', 'one time'), junk)
        : (byKind[f.kind] ?? text(f.maxLength ?? 255));
    // Mostly the example's value, so that many bodies are valid but for a field or two; sometimes none.
    const example = exampleDonation();
    const bodies = fc
      .record(
        Object.fromEntries(
          DONATION_FIELDS.map((f) => [
            f.name,
            fc.oneof({ weight: 6, arbitrary: fc.constant(example[f.name]) }, { weight: 2, arbitrary: fieldArbitrary(f) }, { weight: 1, arbitrary: fc.constant(undefined) }),
          ]),
        ),
      )
      .map((body) => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined)));
    let accepted = 0;
    let refusedInWords = 0;
    fc.assert(
      fc.property(bodies, (body) => {
        const server = validateDonation(body as Record<string, unknown>);
        const allowed = validate(body);
        if (server.ok) {
          accepted++;
          assert.ok(allowed, `accepted by the server but not by the schema: ${checker.errorsOf(validate)}`);
        } else if (allowed) {
          refusedInWords++;
          const unstated = Object.values(server.errors).flat().filter((m) => !DESCRIBED_ONLY.some((rule) => rule.test(m)));
          assert.deepEqual(unstated, [], 'allowed by the schema, refused for a rule it does not state');
        }
      }),
      { numRuns: 20_000 },
    );
    t.diagnostic(`${accepted} accepted by both; ${refusedInWords} allowed by the schema and refused for a rule in words`);
    assert.ok(accepted > 100 && refusedInWords > 100, `${accepted} accepted, ${refusedInWords} refused for a rule in words: both directions were tried`);
  });

  test('the conformance check can fail: it rejects answers and requests the document does not allow', () => {
    const ok = { method: 'POST', url: '/api/v1/me', requestHeaders: {}, requestBody: undefined };
    const json = { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'r' };
    const me = JSON.stringify({ success: true, message: 'Authenticated', data: { name: 'n', email: 'e' } });
    assert.deepEqual(checker.check({ ...ok, status: 200, responseHeaders: json, responseBody: me }), []);
    const problems = (x: Partial<Parameters<OpenApiConformance['check']>[0]>) =>
      checker.check({ ...ok, status: 200, responseHeaders: json, responseBody: me, ...x }).join('\n');
    assert.match(problems({ responseBody: JSON.stringify({ success: true, message: 'Authenticated' }) }), /required property 'data'/);
    assert.match(problems({ status: 418 }), /status 418 is not documented/);
    assert.match(problems({ status: 429, responseBody: '{"message":"Slow down"}' }), /Retry-After is missing/);
    assert.match(problems({ status: 401, responseBody: '{"message":"Unauthorized"}' }), /WWW-Authenticate is missing/);
    assert.match(problems({ status: 405, responseBody: '{"message":"No"}', responseHeaders: { ...json, allow: 'POST' } }), /a 405 for a method the document lists/);
    assert.match(problems({ responseHeaders: { ...json, 'content-type': 'text/plain' } }), /content type "text\/plain"/);
    assert.match(problems({ method: 'GET' }), /not documented for the path, yet not a 405/);
    assert.match(problems({ url: '/api/v1/nowhere' }), /not a documented path, yet not a 404/);
    const record = { ...op('/donation/create').responses['200'].content['application/json'].example };
    const created = {
      url: '/api/v1/donation/create',
      requestHeaders: { 'content-type': 'application/json' },
      requestBody: { donor_email: 'a@example.com', gift_aid: 'yes', amount: 'ten', donation_type: 'one-time' },
      responseBody: JSON.stringify(record),
    };
    assert.match(problems(created), /accepted a body the document does not allow: \/amount/);
    assert.match(problems({ ...created, requestBody: { ...created.requestBody, amount: '0.00' } }), /\/amount/);
    assert.match(problems({ ...created, requestHeaders: { ...created.requestHeaders, 'idempotency-key': 'é' } }), /Idempotency-Key/);
  });
});

for (const backend of BACKENDS) describe(`GET /api/v1/openapi.json and the live server [${backend.name}]`, () => {
  let t: TestContext;
  before(async () => {
    t = await startTestApp(backend);
  });
  after(() => t.close());

  test('is served without credentials, as JSON, and is the document built from the field table', async () => {
    const res = await fetch(`${await t.baseUrl()}/api/v1/openapi.json`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
    const base = await t.baseUrl();
    assert.deepEqual(await res.json(), JSON.parse(JSON.stringify(buildOpenApiDocument(version, { origin: base }))));
  });

  test('names this server by an absolute URL: the Host the client used, and a second server with variables for others', async () => {
    const servers = async (headers: Record<string, string>) => (await t.app.inject({ url: '/api/v1/openapi.json', headers })).json().servers;
    const [here, other] = await servers({ host: 'Almoner.Example.org:8443' });
    assert.deepEqual(here, { url: 'http://almoner.example.org:8443/api/v1', description: 'This server' });
    assert.equal(other.url, '{scheme}://{host}/api/v1');
    assert.deepEqual(Object.keys(other.variables), ['scheme', 'host']);
    assert.equal((await servers({ host: '[::1]:3000' }))[0].url, 'http://[::1]:3000/api/v1');
    // An untrusted peer's X-Forwarded-* is not believed (TRUST_PROXY is off here).
    assert.equal((await servers({ host: 'a.example', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example' }))[0].url, 'http://a.example/api/v1');
    // A Host that is no host name is not written into the document: the URL is relative then.
    for (const host of ['a b', 'a.example/evil', '<script>', 'x'.repeat(300), 'example.org:99999', 'example.org:65536']) assert.equal((await servers({ host }))[0].url, '/api/v1', host);
    assert.equal((await servers({ host: 'example.org:65535' }))[0].url, 'http://example.org:65535/api/v1');
  });

  test('the example request, sent with the client, gets the example response', async () => {
    const document: Json = buildOpenApiDocument(version);
    const media = document.paths['/donation/create'].post;
    const client = await t.client();
    const { record } = await client.createDonation(media.requestBody.content['application/json'].example);
    const expected = media.responses['200'].content['application/json'].example.data;
    assert.deepEqual(record, { ...expected, id: record.id });
    const identity = await client.me();
    assert.deepEqual(Object.keys(identity), Object.keys(document.paths['/me'].post.responses['200'].content['application/json'].example.data));
  });

  test("the documented messages are the server's: 400, 401, 405, 413, 415, 422", async () => {
    const document: Json = buildOpenApiDocument(version);
    const checker = new OpenApiConformance(document);
    const example = (name: string) => checker.deref({ $ref: `#/components/responses/${name}` }).content['application/json'].example;
    const send = (overrides: { method?: 'POST' | 'GET'; headers?: Record<string, string>; payload?: string }) =>
      t.app.inject({
        method: overrides.method ?? 'POST',
        url: '/api/v1/donation/create',
        headers: { accept: 'application/json', authorization: t.charity.authorization, 'content-type': 'application/json', ...overrides.headers },
        ...(overrides.payload === undefined ? {} : { payload: overrides.payload }),
      });
    assert.deepEqual((await send({ payload: '{' })).json(), example('BadRequest'));
    assert.deepEqual((await send({ headers: { authorization: 'Basic eDp5' }, payload: '{}' })).json(), example('Unauthorized'));
    assert.deepEqual((await send({ method: 'GET' })).json(), example('MethodNotAllowed'));
    assert.deepEqual((await send({ payload: `"${'x'.repeat(1024 * 1024)}"` })).json(), example('PayloadTooLarge'));
    assert.deepEqual((await send({ headers: { 'content-type': 'text/plain' }, payload: 'hello' })).json(), example('UnsupportedMediaType'));

    const invalid = document.paths['/donation/create'].post.responses['422'].content['application/json'].example;
    const input = { ...document.paths['/donation/create'].post.requestBody.content['application/json'].example, amount: '0' };
    delete input.donor_email;
    const error = await rejection((await t.client()).createDonation(input), ValidationError);
    assert.deepEqual({ message: error.message, errors: error.errors }, invalid);
  });
});

describe('GET /api/v1/openapi.json behind a proxy TRUST_PROXY trusts', () => {
  let t: TestContext;
  before(async () => {
    t = await startTestApp(undefined, { trustProxy: '127.0.0.1', docs: { contactEmail: 'api@helpinghands.example' } });
  });
  after(() => t.close());

  test("names the server by the proxy's X-Forwarded-Proto and X-Forwarded-Host, and gives the operator's contact", async () => {
    const get = async (headers: Record<string, string>) => (await t.app.inject({ url: '/api/v1/openapi.json', remoteAddress: '127.0.0.1', headers })).json();
    const document = await get({ host: '127.0.0.1:3000', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.helpinghands.example' });
    assert.equal(document.servers[0].url, 'https://api.helpinghands.example/api/v1');
    assert.deepEqual(document.info.contact, { name: 'The operator of this Almoner server', email: 'api@helpinghands.example' });
    // A proxy that says some other scheme: the connection's own is used.
    assert.equal((await get({ host: 'a.example', 'x-forwarded-proto': 'gopher' })).servers[0].url, 'http://a.example/api/v1');
    // A scheme in capitals is the same scheme (it gave http://: an integrator's review).
    assert.equal((await get({ host: 'a.example', 'x-forwarded-proto': 'HTTPS' })).servers[0].url, 'https://a.example/api/v1');
  });
});
