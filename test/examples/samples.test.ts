// examples/: the code samples integrators copy (README, /docs), each run as it is shown, as a child
// process in its own language, against a live app with a charity's credentials in the environment.
// bash and Node are always here; PHP (with curl) and Python (with requests) are Debian's, which CI
// installs (.ci/run): elsewhere a language that is missing is skipped with the reason, in CI it fails.
// The typed client's samples import almoner/client, which is dist/client: npm test builds it first.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { basename, join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { codeSampleFiles, EXAMPLES_DIR, type OperationId } from '../../src/http/code-samples.js';
import { EXAMPLE_RECORD, startTestApp, type TestContext } from '../support/app.js';
import { tempDir } from '../support/backends.js';
import { ROOT } from '../support/root.js';

const EXAMPLES = EXAMPLES_DIR;
const PHP = process.env.PHP_PATH ?? '/usr/bin/php';
const PYTHON = process.env.PYTHON_PATH ?? '/usr/bin/python3'; // not the first python3 on PATH, which may lack requests

/** Why a command cannot run here (it fails, or its output lacks `expect`), or undefined when it can. */
function unavailable(command: string, args: string[], expect: RegExp, why: string): string | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 30_000 });
  return result.status === 0 && expect.test(result.stdout) ? undefined : why;
}

interface Sample {
  language: string;
  /** The command that runs a sample file. */
  command: (file: string) => [string, string[]];
  /** The two files, in examples/, as the OpenAPI document and the docs page name them. */
  files: { me: string; create: string };
  /** The typed client prints what it returns (the identity, the record); the others print the answer's body. */
  printsBody: boolean;
  /** Why it cannot run here, or undefined. */
  missing: () => string | undefined;
}

/** A language's two samples, by the list the OpenAPI document and the docs page show. */
function filesOf(lang: string): Sample['files'] {
  const file = (operation: OperationId) => basename(codeSampleFiles(operation).find((f) => f.lang === lang)!.path);
  return { me: file('testConnection'), create: file('createDonation') };
}

const SAMPLES: Sample[] = [
  {
    language: 'curl (bash)',
    command: (file) => ['bash', [file]],
    files: filesOf('Shell'),
    printsBody: true,
    missing: () => unavailable('curl', ['--version'], /^curl /, 'no curl on PATH (apt-get install -y curl)'),
  },
  {
    language: 'PHP (curl extension)',
    command: (file) => [PHP, [file]],
    files: filesOf('PHP'),
    printsBody: true,
    missing: () =>
      unavailable(PHP, ['-m'], /^curl$/m, `no PHP with its curl extension at ${PHP} (apt-get install -y php-cli php-curl, or set PHP_PATH)`),
  },
  {
    language: 'Python (requests)',
    command: (file) => [PYTHON, [file]],
    files: filesOf('Python'),
    printsBody: true,
    missing: () =>
      unavailable(PYTHON, ['-c', 'import requests; print("ok")'], /^ok$/m, `no Python with requests at ${PYTHON} (apt-get install -y python3-requests, or set PYTHON_PATH)`),
  },
  {
    language: 'Node.js (fetch)',
    command: (file) => [process.execPath, [file]],
    files: filesOf('JavaScript'),
    printsBody: true,
    missing: () => undefined,
  },
  {
    language: 'TypeScript (almoner/client)',
    command: (file) => [process.execPath, ['--import', 'tsx', file]],
    files: filesOf('TypeScript'),
    printsBody: false,
    missing: () => (existsSync(join(ROOT, 'dist/client/index.js')) ? undefined : 'no dist/client: run npm run build (npm test does)'),
  },
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a sample as an integrator would, from Almoner's folder, with only the environment it needs (no
 * proxy settings, no IDEMPOTENCY_KEY from outside). Resolves however it exits; a run over 60 s is killed.
 */
function run(sample: Sample, file: string, env: Record<string, string>): Promise<Run> {
  const [command, args] = sample.command(join(EXAMPLES, file));
  const base: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'LANG', 'TMPDIR']) if (process.env[name] !== undefined) base[name] = process.env[name]!;
  return new Promise((resolve) => {
    execFile(command, args, { cwd: ROOT, env: { ...base, ...env }, timeout: 60_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null; // null: killed, or it never started
      resolve({ code, stdout, stderr: err && code === null ? `${stderr}\n${err.message}` : stderr });
    });
  });
}

/** Fails, showing everything it printed, unless the run exited 0. */
function assertSucceeded(result: Run): void {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
}

/** The one JSON value a run printed on stdout. */
function printedJson(result: Run): Record<string, unknown> {
  try {
    return JSON.parse(result.stdout) as Record<string, unknown>;
  } catch {
    assert.fail(`stdout is not one JSON value: ${JSON.stringify(result.stdout)}`);
  }
}


/** What the create samples send: the donation of the README's walkthrough with curl. */
const SAMPLE_DONATION = {
  donor_first_name: 'Jane',
  donor_last_name: 'Doe',
  donor_email: 'jane.doe@example.com',
  donor_address: '12 High Street',
  donor_city: 'London',
  donor_postcode: 'SW1A 1AA',
  donor_ip: '',
  gift_aid: 'yes',
  amount: '25.00',
  payment_method: 'cash',
  payment_confirmation_number: '',
  donation_type: 'one-time',
  donation_date: '25-02-2021',
  zakat_donation: 'yes',
};

/** The record that donation is stored as (all but its id): the tests' example record, but for what it leaves out or sends empty. */
const EXPECTED_RECORD = { ...EXAMPLE_RECORD, donor_phone: null, donor_ip: null, payment_confirmation_number: '' };

/** An address on 127.0.0.1 where nothing listens: a port that was free a moment ago. */
async function closedUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An HTTP proxy in front of the app that keeps every request it passes on, to check what the samples send. */
async function recordingProxy(target: string): Promise<{ url: string; take(): SeenRequest[]; close(): Promise<void> }> {
  let seen: SeenRequest[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: body.toString('utf8') });
      const upstream = httpRequest(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** The requests passed on since the last call. */
    take() {
      const taken = seen;
      seen = [];
      return taken;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\b/i;
const REPLAYED = /replayed/i;

describe('examples/: every code sample, run against a live server', () => {
  let t: TestContext;
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let credentials: Record<string, string>;
  before(async () => {
    t = await startTestApp();
    proxy = await recordingProxy(await t.baseUrl());
    credentials = { ALMONER_URL: proxy.url, ALMONER_USERNAME: t.charity.username, ALMONER_PASSWORD: t.charity.password };
  });
  after(async () => {
    await proxy?.close();
    await t?.close();
  });

  /** The one request a run sent: a POST to `path` with Accept: application/json and the charity's Basic credentials. */
  const sentRequest = (path: string): SeenRequest => {
    const requests = proxy.take();
    assert.equal(requests.length, 1, 'one request');
    const [request] = requests as [SeenRequest];
    assert.equal(request.method, 'POST');
    assert.equal(request.path, path);
    assert.equal(request.headers.accept, 'application/json');
    assert.equal(request.headers.authorization, t.charity.authorization, 'HTTP Basic, with the credentials from the environment');
    return request;
  };

  /** The ids of the donations stored so far. */
  const storedIds = async () => (await t.donations()).map((d) => d.id);

  test('every sample the docs page and the OpenAPI document show is run here', () => {
    for (const operation of ['testConnection', 'createDonation'] as const) {
      const shown = codeSampleFiles(operation).map((f) => basename(f.path));
      assert.deepEqual(SAMPLES.map((sample) => sample.files[operation === 'testConnection' ? 'me' : 'create']), shown);
      for (const file of shown) assert.ok(existsSync(join(EXAMPLES, file)), file);
    }
  });

  for (const sample of SAMPLES) {
    const missing = sample.missing();
    // Skipped where the language is missing, but never in CI, which installs them all: there the tests fail, saying why.
    describe(sample.language, { skip: process.env.CI ? false : missing }, () => {
      before(() => {
        if (missing) assert.fail(`${missing}; CI must have it (.ci/run installs it)`);
      });

      /** The record a create sample printed: the answer's `data`, or (the typed client) the record itself. */
      const printedRecord = (result: Run) => {
        const printed = printedJson(result);
        if (!sample.printsBody) return printed;
        assert.deepEqual(Object.keys(printed), ['data'], 'the answer as the server sent it');
        return printed.data as Record<string, unknown>;
      };

      test(`${sample.files.me}: exits 0 and prints who the credentials belong to`, async () => {
        proxy.take();
        const result = await run(sample, sample.files.me, credentials);
        assertSucceeded(result);
        sentRequest('/api/v1/me');
        const identity = { name: t.charity.name, email: t.charity.email };
        assert.deepEqual(printedJson(result), sample.printsBody ? { success: true, message: 'Authenticated', data: identity } : identity);
        assert.equal(result.stderr, '');
        // ALMONER_URL as the OpenAPI document's server gives it, with /api/v1 (and a slash): the same (it was a 404).
        proxy.take();
        const withApi = await run(sample, sample.files.me, { ...credentials, ALMONER_URL: `${credentials.ALMONER_URL}/api/v1/` });
        assertSucceeded(withApi);
        sentRequest('/api/v1/me');
      });

      test(`${sample.files.create}: records the README's example donation, prints the record, and the key it used on stderr`, async () => {
        const stored = await storedIds();
        proxy.take();
        const result = await run(sample, sample.files.create, credentials);
        assertSucceeded(result);
        const request = sentRequest('/api/v1/donation/create');
        assert.match(request.headers['content-type'] ?? '', /^application\/json(;|$)/);
        assert.deepEqual(JSON.parse(request.body), SAMPLE_DONATION);
        const key = String(request.headers['idempotency-key']);
        assert.match(key, new RegExp(`^${UUID.source}$`, 'i'), 'a fresh UUID as its Idempotency-Key');
        assert.ok(result.stderr.includes(key), 'the key it used, on stderr, for a retry');
        const { id, ...record } = printedRecord(result);
        assert.equal(typeof id, 'number');
        assert.deepEqual(record, EXPECTED_RECORD);
        assert.deepEqual(await storedIds(), [...stored, id], 'one donation recorded, the one printed');
        assert.doesNotMatch(result.stderr, REPLAYED);
      });

      test(`${sample.files.create}, twice with the same IDEMPOTENCY_KEY: one donation, and the second run says it was a replay`, async () => {
        const stored = await storedIds();
        const key = randomUUID();
        proxy.take();
        const first = await run(sample, sample.files.create, { ...credentials, IDEMPOTENCY_KEY: key });
        assertSucceeded(first);
        assert.equal(sentRequest('/api/v1/donation/create').headers['idempotency-key'], key);
        assert.ok(first.stderr.includes(key), 'the key it used, on stderr');
        assert.doesNotMatch(first.stderr, REPLAYED);
        const second = await run(sample, sample.files.create, { ...credentials, IDEMPOTENCY_KEY: key });
        assertSucceeded(second);
        assert.match(second.stderr, REPLAYED);
        const id = printedRecord(first).id;
        assert.equal(printedRecord(second).id, id, 'the same record');
        assert.deepEqual(await storedIds(), [...stored, id], 'one donation only');
      });

      test(`${sample.files.create}, with an IDEMPOTENCY_KEY used for another donation: a 422, with its message and field errors on stderr`, async () => {
        const key = randomUUID();
        const res = await fetch(`${credentials.ALMONER_URL}/api/v1/donation/create`, {
          method: 'POST',
          headers: { authorization: t.charity.authorization, accept: 'application/json', 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ donor_email: 'someone.else@example.com', gift_aid: 'no', amount: '1.00', donation_type: 'one-time' }),
        });
        assert.equal(res.status, 200);
        const stored = await storedIds();
        const result = await run(sample, sample.files.create, { ...credentials, IDEMPOTENCY_KEY: key });
        assert.notEqual(result.code, 0, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
        assert.match(result.stderr, /422/);
        assert.match(result.stderr, /already used for a different donation/, "the server's message");
        assert.match(result.stderr, /idempotency_key.*Use a new key for a new donation/, 'the field and its message');
        assert.equal(result.stdout, '');
        assert.deepEqual(await storedIds(), stored);
      });

      for (const operation of ['me', 'create'] as const) {
        test(`${sample.files[operation]}, with a wrong password: exits non-zero with the server's "Unauthorized" on stderr`, async () => {
          const stored = await storedIds();
          const result = await run(sample, sample.files[operation], { ...credentials, ALMONER_PASSWORD: `${t.charity.password}x` });
          assert.notEqual(result.code, 0, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
          assert.match(result.stderr, /401/);
          assert.match(result.stderr, /Unauthorized/);
          assert.equal(result.stdout, '');
          assert.deepEqual(await storedIds(), stored);
        });

        test(`${sample.files[operation]}, without ALMONER_PASSWORD: exits non-zero, naming it`, async () => {
          const { ALMONER_PASSWORD: _, ...rest } = credentials;
          const result = await run(sample, sample.files[operation], rest);
          assert.notEqual(result.code, 0);
          assert.match(result.stderr, /ALMONER_PASSWORD/);
          assert.equal(result.stdout, '');
        });
      }

      test(`${sample.files.me}, with nothing listening at ALMONER_URL: exits non-zero with the reason on stderr`, async () => {
        const result = await run(sample, sample.files.me, { ...credentials, ALMONER_URL: await closedUrl() });
        assert.notEqual(result.code, 0);
        assert.notEqual(result.code, null, 'it exits by itself');
        assert.match(result.stderr, /refused|connect/i);
        assert.equal(result.stdout, '');
      });
    });
  }
});

describe("examples/: the typed client's samples in an integrator's own project", () => {
  // README: "The code samples of the docs page and the OpenAPI document say the same" (that the
  // project must be an ES module). They did not, and copied into a project `npm init -y` made
  // (CommonJS), tsx stopped on their top-level await (an integrator's review, 2026-11-30).
  const TSX = join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
  const typed = SAMPLES.find((s) => s.language.startsWith('TypeScript'))!;
  for (const file of [typed.files.me, typed.files.create]) {
    test(`${file} says it needs an ES module project, and runs in one as it says (and not in a CommonJS one)`, { skip: typed.missing() }, () => {
      const source = readFileSync(join(EXAMPLES, file), 'utf8');
      assert.match(source, /npm pkg set type=module/);
      assert.match(source, /\.mts\b/);
      const runIn = (packageJson: string) => {
        const project = tempDir();
        mkdirSync(join(project, 'node_modules'));
        symlinkSync(ROOT, join(project, 'node_modules', 'almoner'), 'dir');
        writeFileSync(join(project, 'package.json'), packageJson);
        writeFileSync(join(project, file), source);
        // Without credentials a sample stops at once, naming them: as far as it needs to get here.
        return spawnSync(process.execPath, [TSX, file], { cwd: project, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 });
      };
      const commonJs = runIn('{"name":"app","version":"1.0.0"}\n');
      assert.match(commonJs.stderr, /Top-level await is currently not supported with the "cjs" output format/);
      const esm = runIn('{"name":"app","version":"1.0.0","type":"module"}\n');
      assert.equal(esm.status, 1, esm.stderr);
      assert.match(esm.stderr, /Set ALMONER_USERNAME and ALMONER_PASSWORD/);
    });
  }
});
