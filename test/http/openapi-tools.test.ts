// The OpenAPI document as integrators' tools read it, served by a live server: swagger-parser
// validates it; openapi-typescript generates types that compile what the API takes and refuse what it does not; Redocly's and
// Spectral's default rulesets find nothing to warn about; Prism's validation proxy, in front of the
// server, forwards valid JSON and form posts (PHP's habits included) and stops invalid ones, and
// finds every answer the server gives as the document says. The tools' versions are pinned in
// package.json and named in the README.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { exampleDonation, startTestApp, tempDir, type TestContext } from '../support/app.js';
import { freePort } from '../support/daemon.js';

const require = createRequire(import.meta.url);
const binOf = (pkg: string, name: string) => {
  const manifest = require(`${pkg}/package.json`) as { bin: string | Record<string, string> };
  return join(dirname(require.resolve(`${pkg}/package.json`)), typeof manifest.bin === 'string' ? manifest.bin : manifest.bin[name]!);
};
const TOOL_TIMEOUT_MS = 60_000;

/** Runs a tool's command-line script with this Node; its output, whatever its exit code. */
async function runTool(script: string, args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [script, ...args], {
      cwd,
      timeout: TOOL_TIMEOUT_MS,
      maxBuffer: 16 * 1024 * 1024,
      // No update checks or telemetry: this machine has no network beyond the registry.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string; killed?: boolean };
    if (e.killed) throw new Error(`${script} did not finish within ${TOOL_TIMEOUT_MS} ms`);
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('the served OpenAPI document, read by integrators\' tools', () => {
  let t: TestContext;
  let dir: string;
  let base: string;
  let documentFile: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let document: any;

  before(async () => {
    t = await startTestApp();
    base = await t.baseUrl(); // 127.0.0.1: Redocly warns of a server URL naming localhost
    dir = tempDir();
    const res = await fetch(`${base}/api/v1/openapi.json`);
    assert.equal(res.status, 200);
    document = await res.json();
    documentFile = join(dir, 'openapi.json');
    await writeFile(documentFile, JSON.stringify(document, null, 2));
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('its server URL is absolute: a client outside a browser calls the operations at it', async () => {
    const server = document.servers[0].url as string;
    assert.equal(server, `${base}/api/v1`);
    const res = await fetch(`${server}/me`, { method: 'POST', headers: { authorization: t.charity.authorization, accept: 'application/json' } });
    assert.equal(res.status, 200);
  });

  test('openapi-typescript generates types that take every valid request and refuse invalid ones (donor_ip: 12345 included)', async () => {
    const generated = astToString(await openapiTS(document));
    await writeFile(join(dir, 'almoner.ts'), generated);
    const prelude = `import type { components } from './almoner.js';
type DonationInput = components['schemas']['DonationInput'];
type DonationForm = components['schemas']['DonationForm'];
type Donation = components['schemas']['Donation'];
const example: DonationInput = ${JSON.stringify(exampleDonation())};
const formExample: DonationForm = ${JSON.stringify(exampleDonation())};
`;
    // Each case in a file of its own: the valid one must compile, each invalid one must fail for its own reason.
    const cases: Record<string, { code: string; error?: RegExp }> = {
      valid: {
        code: `const ips: DonationInput['donor_ip'][] = ['', '192.0.2.1', '2001:db8::1', null];
const amounts: DonationInput['amount'][] = ['25.00', 25, 0.01];
const zakat: DonationInput['zakat_donation'][] = ['yes', 'No', true, 1, 0, null];
const required: DonationInput = { donor_first_name: 'Jane', donor_last_name: 'Doe', donor_email: 'jane@example.com', gift_aid: 'no', amount: 5, donation_type: 'recurring' };
const blank: DonationForm = { ...formExample, donation_date: '', zakat_donation: '', payment_method: '' };
const record = {} as Donation;
const id: number = record.id;
const flag: boolean = record.zakat_donation;
const ip: string | null = record.donor_ip;
export { ips, amounts, zakat, required, blank, id, flag, ip };`,
      },
      donorIpNumber: { code: `export const bad: DonationInput = { ...example, donor_ip: 12345 };`, error: /donor_ip|number/ },
      giftAidMaybe: { code: `export const bad: DonationInput = { ...example, gift_aid: 'maybe' };`, error: /"maybe"/ },
      donationTypeOther: { code: `export const bad: DonationInput = { ...example, donation_type: 'weekly' };`, error: /"weekly"/ },
      emailMissing: {
        code: `export const bad: DonationInput = { donor_first_name: 'Jane', donor_last_name: 'Doe', gift_aid: 'no', amount: 5, donation_type: 'one-time' };`,
        error: /donor_email/,
      },
      // (A string flag's words are a pattern, which no TypeScript type states: 'maybe' compiles, and the server refuses it.)
      zakatTwo: { code: `export const bad: DonationInput = { ...example, zakat_donation: 2 };`, error: /zakat_donation|2/ },
      // A form sends text only: Swagger UI and generated clients then send what was typed.
      formAmountNumber: { code: `export const bad: DonationForm = { ...formExample, amount: 25 };`, error: /amount|number/ },
      formFlagBoolean: { code: `export const bad: DonationForm = { ...formExample, zakat_donation: true };`, error: /zakat_donation|boolean/ },
      recordFlagIsBoolean: { code: `export const bad: Donation['zakat_donation'] = 'yes';`, error: /not assignable to type 'boolean'/ },
    };
    const files = Object.fromEntries(Object.keys(cases).map((name) => [name, join(dir, `${name}.ts`)]));
    for (const [name, { code }] of Object.entries(cases)) await writeFile(files[name]!, prelude + code + '\n');
    const program = ts.createProgram(Object.values(files), {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
      types: [],
    });
    const diagnostics = ts.getPreEmitDiagnostics(program);
    const errorsIn = (file: string) =>
      diagnostics.filter((d) => d.file?.fileName === file).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    assert.deepEqual(diagnostics.filter((d) => !d.file || !Object.values(files).includes(d.file.fileName)).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')), [], 'the generated types compile');
    assert.deepEqual(errorsIn(files.valid!), [], 'every valid value type-checks');
    for (const [name, { error }] of Object.entries(cases)) {
      if (!error) continue;
      const errors = errorsIn(files[name]!);
      assert.ok(errors.length > 0, `${name} must not type-check`);
      assert.match(errors.join('\n'), error, name);
    }
  });

  test('@apidevtools/swagger-parser, the validator most tools build on, finds it valid', async () => {
    await SwaggerParser.validate(structuredClone(document));
  });

  test("Redocly's recommended ruleset: no error, no warning", async () => {
    const { code, stdout } = await runTool(binOf('@redocly/cli', 'redocly'), ['lint', documentFile, '--format=json'], dir);
    const report = JSON.parse(stdout) as { version: string; totals: Record<string, number>; problems: { ruleId: string; message: string }[] };
    assert.deepEqual(report.problems.map((p) => `${p.ruleId}: ${p.message}`), []);
    assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
    assert.equal(code, 0);
  });

  test("Spectral's spectral:oas ruleset: nothing at all, hints included", async () => {
    const ruleset = join(dir, '.spectral.yaml');
    await writeFile(ruleset, 'extends: ["spectral:oas"]\n');
    const { code, stdout, stderr } = await runTool(binOf('@stoplight/spectral-cli', 'spectral'), ['lint', documentFile, '--ruleset', ruleset, '--format', 'json', '--fail-severity', 'hint', '--quiet'], dir);
    assert.equal(stderr.trim(), '', 'Spectral had nothing to complain of about its own run');
    const results = JSON.parse(stdout) as { code: string; message: string; path: string[] }[];
    assert.deepEqual(results.map((r) => `${r.code} at ${r.path.join('.')}: ${r.message}`), []);
    assert.equal(code, 0);
  });

  describe("through Prism's validation proxy (prism proxy --errors)", () => {
    let prism: ChildProcess;
    let proxy: string;
    let output = '';

    before(async () => {
      const port = await freePort();
      prism = spawn(process.execPath, [binOf('@stoplight/prism-cli', 'prism'), 'proxy', documentFile, `${base}/api/v1`, '--errors', '--host', '127.0.0.1', '--port', String(port)], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, NO_COLOR: '1' },
      });
      prism.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      prism.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      proxy = `http://127.0.0.1:${port}`;
      const deadline = Date.now() + TOOL_TIMEOUT_MS;
      while (!/Prism is listening/.test(output)) {
        if (prism.exitCode !== null) throw new Error(`Prism exited (${prism.exitCode}):\n${output}`);
        if (Date.now() > deadline) throw new Error(`Prism did not start within ${TOOL_TIMEOUT_MS} ms:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
    after(async () => {
      if (prism.exitCode === null) {
        prism.kill();
        await once(prism, 'exit');
      }
    });

    const post = (path: string, body?: string, headers: Record<string, string> = {}) =>
      fetch(`${proxy}${path}`, { method: 'POST', headers: { authorization: t.charity.authorization, accept: 'application/json', ...headers }, ...(body === undefined ? {} : { body }) });
    const json = { 'content-type': 'application/json' };
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    /** The server's own answer, forwarded, with nothing Prism found wrong in the exchange. */
    async function forwarded(res: Response, status: number) {
      const text = await res.text();
      assert.equal(res.status, status, text);
      assert.equal(res.headers.get('sl-violations'), null, `Prism found the exchange does not match the document: ${res.headers.get('sl-violations')}`);
      assert.ok(res.headers.get('x-request-id'), "the server's answer, not Prism's");
      return JSON.parse(text);
    }
    /** Prism's own 422: the document says the request is invalid, and it went no further. */
    async function stopped(res: Response, field: string) {
      const problem = (await res.json()) as { validation: { location: string[] }[] };
      assert.equal(res.status, 422);
      assert.equal(res.headers.get('content-type'), 'application/problem+json');
      assert.ok(problem.validation.some((v) => v.location.includes(field)), JSON.stringify(problem.validation));
    }

    test('Test Connection, with good and bad credentials', async () => {
      assert.equal((await forwarded(await post('/me'), 200)).message, 'Authenticated');
      const wrong = await fetch(`${proxy}/me`, { method: 'POST', headers: { authorization: 'Basic bm9ib2R5Om5vcGU=', accept: 'application/json' } });
      assert.deepEqual(await forwarded(wrong, 401), { message: 'Unauthorized' });
    });

    test('valid JSON creates are forwarded and recorded: the example, a numeric amount, a retry with an Idempotency-Key', async () => {
      const before = (await t.donations()).length;
      await forwarded(await post('/donation/create', JSON.stringify(exampleDonation()), json), 200);
      await forwarded(await post('/donation/create', JSON.stringify({ ...exampleDonation(), amount: 20, zakat_donation: true, donor_ip: null }), json), 200);
      const keyed = { ...json, 'idempotency-key': crypto.randomUUID() };
      const first = await forwarded(await post('/donation/create', JSON.stringify(exampleDonation()), keyed), 200);
      const again = await post('/donation/create', JSON.stringify(exampleDonation()), keyed);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await forwarded(again, 200), first);
      assert.equal((await t.donations()).length, before + 3);
    });

    test('form posts as PHP sends them are forwarded and recorded: 1 and on for the flag, blank optional fields', async () => {
      const php = new URLSearchParams({ ...exampleDonation(), amount: '20', zakat_donation: '1', donation_date: '', payment_method: '', donor_ip: '' });
      const record = (await forwarded(await post('/donation/create', php.toString(), form), 200)).data;
      assert.equal(record.zakat_donation, true);
      assert.equal(record.payment_method, null);
      assert.equal(record.amount, '20');
      const checkbox = new URLSearchParams({ ...exampleDonation(), zakat_donation: 'on' });
      assert.equal((await forwarded(await post('/donation/create', checkbox.toString(), form), 200)).data.zakat_donation, true);
    });

    test('invalid JSON and form creates are stopped by the proxy, naming the field; a rule stated in words reaches the server, whose 422 is as documented', async () => {
      const before = (await t.donations()).length;
      await stopped(await post('/donation/create', JSON.stringify({ ...exampleDonation(), donor_ip: 12345 }), json), 'donor_ip');
      await stopped(await post('/donation/create', JSON.stringify({ ...exampleDonation(), donor_email: undefined }), json), 'body');
      await stopped(await post('/donation/create', new URLSearchParams({ ...exampleDonation(), gift_aid: 'maybe' }).toString(), form), 'gift_aid');
      await stopped(await post('/donation/create', new URLSearchParams({ ...exampleDonation(), amount: '' }).toString(), form), 'amount');
      const impossibleDay = await forwarded(await post('/donation/create', JSON.stringify({ ...exampleDonation(), donation_date: '31-04-2021' }), json), 422);
      assert.deepEqual(impossibleDay.errors, { donation_date: ['The donation date is not a valid date.'] });
      assert.equal((await t.donations()).length, before);
    });
  });
});

