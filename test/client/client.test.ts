// almoner/client against the real service: an in-process app listening on a real socket, on
// every backend. Only what no live server can produce on demand (a 503, a hang) is simulated.
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import {
  AlmonerClient,
  AlmonerError,
  AuthenticationError,
  ConflictError,
  NetworkError,
  MAX_RETRY_AFTER_SECONDS,
  RateLimitError,
  TimeoutError,
  UnavailableError,
  ValidationError,
  type DonationInput,
} from '../../src/client/index.js';
import { Throttle } from '../../src/http/throttle.js';
import { EXAMPLE_DONATION, EXAMPLE_RECORD, RECORD_KEYS, TIMESTAMP, startTestApp, type TestContext } from '../support/app.js';
import { BACKENDS, tempDir } from '../support/backends.js';
import { rejection, urlOf } from '../support/client.js';
import { watchConformance } from '../support/openapi.js';
import { ROOT } from '../support/root.js';

const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

for (const backend of BACKENDS) {
  describe(`almoner/client [${backend.name}]`, () => {
    let t: TestContext;
    let baseUrl: string;
    let client: AlmonerClient;
    before(async () => {
      t = await startTestApp(backend);
      baseUrl = await t.baseUrl();
      client = await t.client();
    });
    after(() => t.close());

    let n = 0;
    const uniqueKey = () => `client-${backend.name}-${++n}-${Date.now()}`;
    const count = async () => (await t.donations()).length;

    test('me(): the charity name and e-mail', async () => {
      assert.deepEqual(await client.me(), { name: 'Helping Hands', email: 'info@helpinghands.example' });
    });

    test('baseUrl may end in /api/v1 or a slash', async () => {
      for (const url of [`${baseUrl}/`, `${baseUrl}/api/v1`, `${baseUrl}/api/v1/`, new URL(baseUrl)]) {
        const c = new AlmonerClient({ baseUrl: url, username: t.charity.username, password: t.charity.password });
        assert.equal(c.apiUrl, `${baseUrl}/api/v1`);
        assert.equal((await c.me()).name, 'Helping Hands');
      }
    });

    test('every request sends Accept: application/json and the Basic credentials', async () => {
      const seen: Headers[] = [];
      const recording = new AlmonerClient({
        baseUrl,
        username: t.charity.username,
        password: t.charity.password,
        fetch: (input, init) => {
          seen.push(new Headers(init?.headers));
          return fetch(input, init);
        },
      });
      const key = uniqueKey();
      await recording.me();
      await recording.createDonation(EXAMPLE_DONATION, { idempotencyKey: key });
      await rejection(recording.createDonation({ ...EXAMPLE_DONATION, gift_aid: 'maybe' as 'yes' }), ValidationError);
      assert.equal(seen.length, 3);
      for (const h of seen) {
        assert.equal(h.get('accept'), 'application/json');
        assert.equal(h.get('authorization'), t.charity.authorization);
        // So that a browser leaves a 401 to the caller rather than showing its login dialog.
        assert.equal(h.get('x-requested-with'), 'XMLHttpRequest');
      }
      assert.equal(seen[0]?.get('content-type'), null);
      assert.equal(seen[1]?.get('content-type'), 'application/json');
      assert.equal(seen[1]?.get('idempotency-key'), key);
      assert.equal(seen[2]?.get('idempotency-key'), null);
    });

    test('createDonation: the interface example gives the whole record, stored', async () => {
      const before = await count();
      const { record, replayed } = await client.createDonation(EXAMPLE_DONATION);
      assert.equal(replayed, false);
      assert.deepEqual(Object.keys(record), RECORD_KEYS);
      assert.equal(typeof record.id, 'number');
      assert.deepEqual(record, { id: record.id, ...EXAMPLE_RECORD });
      const stored = await t.donations();
      assert.equal(stored.length, before + 1);
      assert.equal(stored.find((d) => d.id === record.id)?.charity, t.charity.username);
    });

    test('createDonation: the required fields only, a numeric amount and a boolean zakat', async () => {
      const { record } = await client.createDonation({
        donor_email: 'min@example.org',
        gift_aid: 'no',
        amount: 20.5,
        donation_type: 'recurring',
        zakat_donation: true,
      });
      assert.equal(record.amount, '20.5');
      assert.equal(record.gift_aid, 'no');
      assert.equal(record.zakat_donation, true);
      assert.equal(record.donor_first_name, null);
      assert.match(record.donation_date, TIMESTAMP);
    });

    test("createDonation takes a flag as the server does, typed: a checkbox's on, 0, false in words", async () => {
      // No cast: DonationInput's flag is what the server takes (a form's words, in lower case, 0, 1, booleans).
      for (const [zakat_donation, expected] of [['on', true], [0, false], ['false', false], ['1', true]] as const) {
        const { record } = await client.createDonation({ donor_email: 'flag@example.org', gift_aid: 'no', amount: '5', donation_type: 'one-time', zakat_donation });
        assert.equal(record.zakat_donation, expected, String(zakat_donation));
      }
    });

    test('idempotencyKey: a retry replays the first answer (replayed: true, same id), nothing new stored', async () => {
      const key = uniqueKey();
      const first = await client.createDonation(EXAMPLE_DONATION, { idempotencyKey: key });
      assert.equal(first.replayed, false);
      const before = await count();
      const again = await client.createDonation(EXAMPLE_DONATION, { idempotencyKey: key });
      assert.equal(again.replayed, true);
      assert.equal(again.record.id, first.record.id);
      assert.deepEqual(again.record, first.record);
      assert.equal(await count(), before);
    });

    test('ValidationError: 422 with the per-field messages, nothing stored', async () => {
      const before = await count();
      // Deliberately wrong, as an untyped caller (a form, JavaScript) might send it.
      const bad = { amount: '12,50', gift_aid: 'maybe' } as unknown as DonationInput;
      const err = await rejection(client.createDonation(bad), ValidationError);
      assert.ok(err instanceof AlmonerError);
      assert.equal(err.name, 'ValidationError');
      assert.equal(err.status, 422);
      assert.equal(err.message, 'The given data was invalid.');
      assert.deepEqual(err.errors, {
        donor_email: ['The donor email is required.'],
        gift_aid: ['The selected gift aid is invalid: it must be yes or no, in lower case.'],
        amount: ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.'],
        donation_type: ['The donation type is required.'],
      });
      assert.deepEqual(err.body, { message: err.message, errors: err.errors });
      assert.equal(typeof err.requestId, 'string');
      assert.equal(await count(), before);
    });

    test('ValidationError: an idempotencyKey reused for another donation names idempotency_key', async () => {
      const key = uniqueKey();
      await client.createDonation(EXAMPLE_DONATION, { idempotencyKey: key });
      const err = await rejection(client.createDonation({ ...EXAMPLE_DONATION, amount: '99.00' }, { idempotencyKey: key }), ValidationError);
      assert.ok(err.errors.idempotency_key?.[0]);
    });

    test('AuthenticationError: 401 for a wrong password, on both operations', async () => {
      const wrong = new AlmonerClient({ baseUrl, username: t.charity.username, password: `${t.charity.password}x` });
      const before = await count();
      for (const call of [() => wrong.me(), () => wrong.createDonation(EXAMPLE_DONATION)]) {
        const err = await rejection(call(), AuthenticationError);
        assert.equal(err.status, 401);
        assert.equal(err.message, 'Unauthorized');
      }
      assert.equal(await count(), before);
    });

    test('ConflictError: 409 while the first request with the key is in progress', async () => {
      const key = uniqueKey();
      const before = await count();
      const release = await t.holdDonationWrites();
      let first: Promise<unknown>;
      try {
        first = client.createDonation(EXAMPLE_DONATION, { idempotencyKey: key }); // waits for the lock, in flight
        await new Promise((r) => setTimeout(r, 100));
        const err = await rejection(client.createDonation(EXAMPLE_DONATION, { idempotencyKey: key }), ConflictError);
        assert.equal(err.status, 409);
        assert.match(err.message, /in progress/);
      } finally {
        await release();
      }
      await first;
      assert.equal(await count(), before + 1);
    });

    test('RateLimitError: 429 with retryAfterSeconds, for creates and for failed authentications', async () => {
      const app = await buildApp({ store: t.store, throttle: new Throttle({ createsPerSecond: 1 }) });
      watchConformance(app);
      try {
        const url = await urlOf(app);
        const limited = new AlmonerClient({ baseUrl: url, username: t.charity.username, password: t.charity.password });
        await limited.createDonation(EXAMPLE_DONATION);
        const err = await rejection(limited.createDonation(EXAMPLE_DONATION), RateLimitError);
        assert.equal(err.status, 429);
        assert.equal(err.retryAfterSeconds, 1);
        assert.match(err.message, /Try again in 1 second\./);

        const guesser = new AlmonerClient({ baseUrl: url, username: t.charity.username, password: 'guess' });
        for (let i = 0; i < 10; i++) await rejection(guesser.me(), AuthenticationError);
        const blocked = await rejection(guesser.me(), RateLimitError);
        assert.ok(Number.isInteger(blocked.retryAfterSeconds) && blocked.retryAfterSeconds >= 1 && blocked.retryAfterSeconds <= 60, String(blocked.retryAfterSeconds));
      } finally {
        await app.close();
      }
    });

    test('other statuses are a plain AlmonerError with the server message: 404 (wrong baseUrl), 413', async () => {
      const lost = new AlmonerClient({ baseUrl: `${baseUrl}/elsewhere`, username: t.charity.username, password: t.charity.password });
      const notFound = await rejection(lost.me(), AlmonerError);
      assert.equal(notFound.constructor, AlmonerError);
      assert.equal(notFound.status, 404);
      assert.equal(notFound.message, 'Not Found');

      const tooLarge = await rejection(client.createDonation({ ...EXAMPLE_DONATION, donor_address: 'x'.repeat(1_100_000) }), AlmonerError);
      assert.equal(tooLarge.constructor, AlmonerError);
      assert.equal(tooLarge.status, 413);
      assert.match(tooLarge.message, /64 KiB/);
    });

    test("import through the package name: 'almoner/client' resolves to dist/ and works", async () => {
      // Through a variable, so that tsc checks against src/ rather than needing dist/ built.
      const specifier = 'almoner/client';
      const resolved = fileURLToPath(import.meta.resolve(specifier));
      assert.match(resolved, /[/\\]dist[/\\]client[/\\]index\.js$/);
      assert.ok(existsSync(resolved.replace(/\.js$/, '.d.ts')), 'the exported types exist');
      const pkg: typeof import('../../src/client/index.js') = await import(specifier);
      const c = new pkg.AlmonerClient({ baseUrl, username: t.charity.username, password: t.charity.password });
      assert.deepEqual(await c.me(), { name: 'Helping Hands', email: 'info@helpinghands.example' });
      const { record } = await c.createDonation(EXAMPLE_DONATION);
      assert.deepEqual(record, { id: record.id, ...EXAMPLE_RECORD });
      const err = await rejection(c.createDonation({} as DonationInput), pkg.ValidationError);
      assert.ok(err instanceof pkg.AlmonerError);
      assert.deepEqual(Object.keys(err.errors).sort(), ['amount', 'donation_type', 'donor_email', 'gift_aid']);
    });
  });
}

describe('almoner/client without a live service', () => {
  const credentials = { username: 'helping-hands-k3x9q2', password: 'secret' };

  /** A client whose fetch answers with `response` and records what it was asked. */
  const answering = (response: () => Response) => {
    const calls: { url: string; init: RequestInit | undefined }[] = [];
    const client = new AlmonerClient({
      baseUrl: 'http://almoner.invalid',
      ...credentials,
      fetch: async (input, init) => {
        calls.push({ url: String(input), init });
        return response();
      },
    });
    return { client, calls };
  };
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) => () =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

  test("a client written to a log shows no credential: console.log's inspection and JSON.stringify alike", () => {
    const { client } = answering(json(200, {}));
    const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
    for (const shown of [inspect(client, { showHidden: true, depth: Infinity }), JSON.stringify(client)]) {
      assert.ok(!shown.includes(credentials.password) && !shown.includes(basic), shown);
    }
  });

  test('UnavailableError: 503 with retryAfterSeconds from Retry-After', async () => {
    const { client } = answering(json(503, { message: 'The database is unavailable. Please try again shortly.' }, { 'retry-after': '1', 'x-request-id': 'req-1' }));
    const err = await rejection(client.createDonation(EXAMPLE_DONATION), UnavailableError);
    assert.equal(err.status, 503);
    assert.equal(err.retryAfterSeconds, 1);
    assert.equal(err.requestId, 'req-1');
    assert.match(err.message, /database is unavailable/);
  });

  test('Retry-After as an HTTP date, or missing', async () => {
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    const dated = await rejection(answering(json(429, { message: 'slow down' }, { 'retry-after': inTenSeconds })).client.me(), RateLimitError);
    assert.ok(dated.retryAfterSeconds >= 9 && dated.retryAfterSeconds <= 10, String(dated.retryAfterSeconds));
    const missing = await rejection(answering(json(429, { message: 'slow down' })).client.me(), RateLimitError);
    assert.equal(missing.retryAfterSeconds, 1);
    // At most an hour: a proxy's or a jumped clock's larger ask was passed on whole, 99999… as 1e23 (a review).
    for (const huge of ['99999999999999999999999', '86400', new Date(Date.now() + 7 * 24 * 3600_000).toUTCString()]) {
      const capped = await rejection(answering(json(503, { message: 'later' }, { 'retry-after': huge })).client.me(), UnavailableError);
      assert.equal(capped.retryAfterSeconds, MAX_RETRY_AFTER_SECONDS, huge);
    }
  });

  test("the shipped nginx's 502 and 504 are UnavailableErrors with its Retry-After, and a create's says it may have been recorded", async () => {
    // Until 2026-11-29 a plain AlmonerError: a caller retrying UnavailableErrors took the gateway's answer for a failure for good.
    const gateway = (status: number, message: string) => json(status, { message }, { 'retry-after': '1' });
    const keyed = await rejection(answering(gateway(502, 'The service is unavailable. Please try again shortly.')).client.createDonation(EXAMPLE_DONATION, { idempotencyKey: 'k-502' }), UnavailableError);
    assert.equal(keyed.status, 502);
    assert.equal(keyed.retryAfterSeconds, 1);
    assert.match(keyed.message, /^The service is unavailable\. Please try again shortly\. The donation may or may not have been recorded: retry with the same idempotencyKey\.$/);
    const unkeyed = await rejection(answering(gateway(504, 'The service did not answer in time. Please try again shortly.')).client.createDonation(EXAMPLE_DONATION), UnavailableError);
    assert.equal(unkeyed.status, 504);
    assert.match(unkeyed.message, /without an idempotencyKey: a retry may record it twice/);
    const me = await rejection(answering(gateway(502, 'The service is unavailable. Please try again shortly.')).client.me(), UnavailableError);
    assert.equal(me.message, 'The service is unavailable. Please try again shortly.');
  });

  test("a call with the caller's long-lived signal leaves nothing on it once answered (AbortSignal.any held each call's signal on Node 20)", async () => {
    const app = new AbortController();
    const { client } = answering(json(200, { success: true, message: 'Authenticated', data: { name: 'n', email: 'e' } }));
    for (let i = 0; i < 50; i++) await client.me({ signal: app.signal });
    await rejection(answering(json(503, { message: 'down' })).client.me({ signal: app.signal }), UnavailableError);
    assert.equal(getEventListeners(app.signal, 'abort').length, 0);
  });

  test("the types of 'almoner/client' are found under every moduleResolution TypeScript offers, node10's included", () => {
    // node10 reads no "exports": until 2026-11-29 it found no types (TS2307), typesVersions now points it at them.
    const project = tempDir();
    mkdirSync(join(project, 'node_modules'));
    symlinkSync(ROOT, join(project, 'node_modules', 'almoner'), 'dir');
    writeFileSync(join(project, 'package.json'), '{"type":"module"}\n'); // as the README says a project using the client is
    writeFileSync(join(project, 'app.ts'), "import { AlmonerClient, type DonationRecord } from 'almoner/client';\nexport const client: AlmonerClient = new AlmonerClient({ baseUrl: 'http://x', username: 'u', password: 'p' });\nexport type R = DonationRecord['id'];\n");
    for (const [module, resolution] of [['commonjs', 'node10'], ['node16', 'node16'], ['nodenext', 'nodenext'], ['esnext', 'bundler']]) {
      const run = spawnSync(process.execPath, [TSC, '--noEmit', '--strict', '--skipLibCheck', '--module', module!, '--moduleResolution', resolution!, 'app.ts'], { cwd: project, encoding: 'utf8' });
      assert.equal(run.status, 0, `${resolution}: ${run.stdout}${run.stderr}`);
    }
  });

  test("the types take an optional value that may be undefined under exactOptionalPropertyTypes (in the tsconfig tsc --init writes), as the client does", async () => {
    // Until 2026-11-30 `donor_phone: form.phone` (string | undefined) and `{ idempotencyKey: maybeKey }`
    // failed to compile there (TS2375, TS2379), though the client sends both correctly (an integrator's review).
    const project = tempDir();
    mkdirSync(join(project, 'node_modules'));
    symlinkSync(ROOT, join(project, 'node_modules', 'almoner'), 'dir');
    writeFileSync(join(project, 'package.json'), '{"type":"module"}\n');
    writeFileSync(
      join(project, 'app.ts'),
      [
        "import { AlmonerClient, type DonationInput } from 'almoner/client';",
        'export function send(phone: string | undefined, key: string | undefined, signal: AbortSignal | undefined, timeoutMs: number | undefined) {',
        "  const client = new AlmonerClient({ baseUrl: 'http://x', username: 'u', password: 'p', timeoutMs, fetch: undefined });",
        "  const donation: DonationInput = { donor_email: 'a@example.com', gift_aid: 'yes', amount: '1', donation_type: 'one-time', donor_phone: phone, zakat_donation: undefined };",
        '  return [client.createDonation(donation, { idempotencyKey: key, signal }), client.me({ signal })];',
        '}',
        '',
      ].join('\n'),
    );
    const run = spawnSync(process.execPath, [TSC, '--noEmit', '--strict', '--exactOptionalPropertyTypes', '--module', 'nodenext', '--target', 'es2022', 'app.ts'], { cwd: project, encoding: 'utf8' });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
    // And undefined is sent as nothing: no Idempotency-Key header, no donor_phone key.
    const { client, calls } = answering(json(200, { data: { id: 1 } }));
    await client.createDonation({ ...EXAMPLE_DONATION, donor_phone: undefined }, { idempotencyKey: undefined, signal: undefined });
    assert.equal(new Headers(calls[0]?.init?.headers).get('idempotency-key'), null);
    assert.ok(!('donor_phone' in JSON.parse(String(calls[0]?.init?.body))));
  });

  test('a non-JSON error page (a proxy 502) is an UnavailableError with the status and the text', async () => {
    const { client } = answering(() => new Response('<html>Bad Gateway</html>', { status: 502, statusText: 'Bad Gateway', headers: { 'content-type': 'text/html' } }));
    const err = await rejection(client.me(), UnavailableError);
    assert.equal(err.status, 502);
    assert.equal(err.body, '<html>Bad Gateway</html>');
    assert.equal(err.message, 'http://almoner.invalid/api/v1/me answered HTTP 502 Bad Gateway.');
  });

  test('a 200 that is not Almoner\'s answer is an AlmonerError, not a malformed record', async () => {
    const err = await rejection(answering(json(200, { hello: 'world' })).client.createDonation(EXAMPLE_DONATION), AlmonerError);
    assert.equal(err.status, 200);
    assert.match(err.message, /is baseUrl right/);
  });

  test('a redirect is reported, not followed', async () => {
    const { client, calls } = answering(() => new Response(null, { status: 308, headers: { location: 'https://almoner.example/api/v1/me' } }));
    const err = await rejection(client.me(), AlmonerError);
    assert.equal(err.status, 308);
    assert.match(err.message, /redirect to https:\/\/almoner\.example/);
    assert.equal(calls[0]?.init?.redirect, 'manual');
  });

  test('POSTs JSON to the API root, UTF-8 credentials encoded as RFC 7617 says', async () => {
    const { client, calls } = answering(json(200, { data: { id: 1, ...EXAMPLE_RECORD } }));
    await client.createDonation(EXAMPLE_DONATION);
    assert.equal(calls[0]?.url, 'http://almoner.invalid/api/v1/donation/create');
    assert.equal(calls[0]?.init?.method, 'POST');
    assert.deepEqual(JSON.parse(String(calls[0]?.init?.body)), EXAMPLE_DONATION);

    const unicode = new AlmonerClient({ baseUrl: 'http://x.invalid', username: 'zoë', password: 'pässwörd', fetch: async (_input, init) => {
      assert.equal(new Headers(init?.headers).get('authorization'), `Basic ${Buffer.from('zoë:pässwörd', 'utf8').toString('base64')}`);
      return json(200, { success: true, message: 'Authenticated', data: { name: 'n', email: 'e' } })();
    } });
    assert.deepEqual(await unicode.me(), { name: 'n', email: 'e' });
  });

  test('NetworkError: nothing listens there', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const client = new AlmonerClient({ baseUrl: `http://127.0.0.1:${port}`, ...credentials });
    const err = await rejection(client.me(), NetworkError);
    assert.ok(err instanceof AlmonerError);
    assert.equal(err.status, 0);
    assert.match(err.message, /ECONNREFUSED/);
    assert.ok(err.cause instanceof Error);
  });

  describe('a server that never answers', () => {
    let server: Server;
    let baseUrl: string;
    before(async () => {
      server = createServer(() => {}); // reads the request, never answers
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    test('TimeoutError after timeoutMs; a create says to retry with the same idempotencyKey', async () => {
      const client = new AlmonerClient({ baseUrl, ...credentials, timeoutMs: 200 });
      const started = Date.now();
      const err = await rejection(client.createDonation(EXAMPLE_DONATION, { idempotencyKey: 'k-1' }), TimeoutError);
      assert.ok(err instanceof NetworkError);
      assert.ok(Date.now() - started >= 190);
      assert.equal(err.status, 0);
      assert.match(err.message, /within 200 ms.*same idempotencyKey/);
    });

    test('TimeoutError on a create sent without an idempotencyKey does not tell the caller to retry with a key it never sent', async () => {
      // Retrying a keyless create whose answer never came may record the donation twice: the
      // message must say so, not advise a retry "with the same idempotencyKey" there is none of.
      const client = new AlmonerClient({ baseUrl, ...credentials, timeoutMs: 200 });
      const err = await rejection(client.createDonation(EXAMPLE_DONATION), TimeoutError);
      assert.doesNotMatch(err.message, /same idempotencyKey/);
      assert.match(err.message, /without an idempotencyKey/);
    });

    test("the caller's own AbortSignal rejects with its reason, not an AlmonerError", async () => {
      const client = new AlmonerClient({ baseUrl, ...credentials });
      const controller = new AbortController();
      const call = client.me({ signal: controller.signal });
      setTimeout(() => controller.abort(), 50);
      await assert.rejects(call, (err: unknown) => err instanceof Error && err.name === 'AbortError' && !(err instanceof AlmonerError));
    });
  });

  test('programming mistakes are TypeErrors, thrown before any request', async () => {
    const { client, calls } = answering(json(200, {}));
    for (const key of ['', 'k'.repeat(256), 'clé', 'a\nb', ' ', ' key', 'key ']) { // HTTP would drop a space at either end
      await assert.rejects(client.createDonation(EXAMPLE_DONATION, { idempotencyKey: key }), TypeError);
    }
    assert.equal(calls.length, 0);
    for (const options of [
      { baseUrl: 'not a url', ...credentials },
      { baseUrl: 'ftp://x.example', ...credentials },
      { baseUrl: 'http://user:pw@x.example', ...credentials },
      { baseUrl: 'http://x.example', username: 'a:b', password: 'p' },
      { baseUrl: 'http://x.example', ...credentials, timeoutMs: 0 },
      { baseUrl: 'http://x.example', ...credentials, timeoutMs: 2 ** 31 },
    ]) {
      assert.throws(() => new AlmonerClient(options), TypeError, JSON.stringify(options));
    }
  });

  test('the password never shows when the client is logged', async () => {
    const { inspect } = await import('node:util');
    const client = new AlmonerClient({ baseUrl: 'http://x.example', username: 'u', password: 'hunter2' });
    assert.doesNotMatch(inspect(client, { showHidden: true, depth: 5 }) + JSON.stringify(client), /hunter2|aHVudGVyMg|dTpodW50ZXIy/);
  });
});
