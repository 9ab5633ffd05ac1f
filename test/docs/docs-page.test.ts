// GET /docs: Swagger UI on the OpenAPI document, served from the swagger-ui-dist package. The
// page is opened in real headless Chromium, which lists both operations and sends real requests
// ("Test Connection", then "Create Donation") with a charity's credentials. Screenshots go to
// test-artifacts/.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { codeSampleFiles } from '../../src/http/code-samples.js';
import { IDEMPOTENCY_KEY_EXAMPLE, REQUEST_ID_EXAMPLE } from '../../src/http/openapi.js';
import { startTestApp, type TestContext } from '../support/app.js';
import { launchChromium, noBrowser } from '../support/browser.js';
import { ServerProcess } from '../support/server.js';

const ARTIFACTS = 'test-artifacts';

describe('GET /docs', () => {
  let t: TestContext;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('is an HTML page whose scripts and styles all come from this server, under a strict CSP', async () => {
    const base = await t.baseUrl();
    const res = await fetch(`${base}/docs`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    const policy = res.headers.get('content-security-policy') ?? '';
    assert.match(policy, /script-src 'self'(;|$)/);
    assert.match(policy, /connect-src 'self'(;|$)/);
    const html = await res.text();
    assert.doesNotMatch(html, /https?:\/\//, 'no address of another host');
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.deepEqual(assets.sort(), [
      '/docs/almoner-docs.js',
      '/docs/favicon-16x16.png',
      '/docs/favicon-32x32.png',
      '/docs/swagger-ui-bundle.js',
      '/docs/swagger-ui.css',
    ]);
    const types: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', png: 'image/png' };
    for (const path of assets) {
      const asset = await fetch(`${base}${path}`);
      assert.equal(asset.status, 200, path);
      assert.equal(asset.headers.get('content-type'), types[path.split('.').pop()!], path);
      assert.ok((await asset.arrayBuffer()).byteLength > 0, path);
    }
    assert.equal((await fetch(`${base}/docs/swagger-ui.css`)).headers.get('cache-control'), 'public, max-age=86400');
    const missing = await fetch(`${base}/docs/index.html`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { message: 'Not Found' });
  });

  test("a 401 to a page's script (X-Requested-With: XMLHttpRequest) has a challenge browsers do not act on, so no login dialog; any other 401 has Basic", async () => {
    const url = `${await t.baseUrl()}/api/v1/me`;
    const wrong = { authorization: 'Basic eDp5', accept: 'application/json' };
    const plain = await fetch(url, { method: 'POST', headers: wrong });
    assert.equal(plain.status, 401);
    assert.equal(plain.headers.get('www-authenticate'), 'Basic realm="Almoner", charset="UTF-8"');
    const script = await fetch(url, { method: 'POST', headers: { ...wrong, 'x-requested-with': 'XMLHttpRequest' } });
    assert.equal(script.status, 401);
    assert.equal(script.headers.get('www-authenticate'), 'XBasic realm="Almoner"');
    assert.deepEqual(await script.json(), { message: 'Unauthorized' });
  });

  test('DOCS=off: bin/almoner serve has neither /docs nor /api/v1/openapi.json, and the API works as before', async () => {
    const server = await new ServerProcess(t.databaseUrl, { DOCS: 'off' }).listening();
    try {
      for (const path of ['/docs', '/docs/swagger-ui-bundle.js', '/api/v1/openapi.json']) {
        const res = await fetch(`${server.url}${path}`);
        assert.equal(res.status, 404, path);
        assert.deepEqual(await res.json(), { message: 'Not Found' });
      }
      const me = await fetch(`${server.url}/api/v1/me`, { method: 'POST', headers: { authorization: t.charity.authorization, accept: 'application/json' } });
      assert.equal(me.status, 200);
      assert.doesNotMatch(server.stderr, /\/docs/, 'no pointer to a page that is not there');
    } finally {
      await server.stop('SIGTERM', 10_000);
    }
    assert.equal((await fetch(`${await t.baseUrl()}/api/v1/openapi.json`)).status, 200, 'on by default');
  });

  describe('in headless Chromium', { skip: noBrowser }, () => {
    let browser: Browser;
    let page: Page;
    const requested: string[] = [];
    const problems: string[] = [];

    before(async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      browser = await launchChromium();
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      page.setDefaultTimeout(10_000);
      page.on('request', (r) => requested.push(r.url()));
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(`console: ${m.text()}`);
      });
      await page.goto(`${await t.baseUrl()}/docs`);
      await page.waitForSelector('.opblock');
    });
    after(() => browser?.close());

    const operation = (id: string) => page.locator(`#operations-Charity-${id}`);

    /** The answer's body as the page shows it, under "Server response". */
    const shownBody = (id: string) => operation(id).locator('.live-responses-table tbody .response-col_description .microlight').first().innerText();

    /** Opens an operation, presses Execute and returns the HTTP status the browser got. */
    async function execute(id: string, path: string): Promise<number> {
      const op = operation(id);
      if (!(await op.locator('button.execute').isVisible())) await op.locator('.opblock-summary').click();
      const [response] = await Promise.all([
        page.waitForResponse((r) => new URL(r.url()).pathname === `/api/v1${path}`),
        op.locator('button.execute').click(),
      ]);
      // The page shows the answer it got: wait for its status to appear there.
      await op.locator('.live-responses-table tbody .response-col_status', { hasText: String(response.status()) }).waitFor();
      return response.status();
    }

    async function authorize(username: string, password: string) {
      await page.locator('.scheme-container button.authorize').click();
      const modal = page.locator('.modal-ux');
      if (await modal.locator('button', { hasText: 'Logout' }).isVisible()) await modal.locator('button', { hasText: 'Logout' }).click();
      await modal.locator('#auth-basic-username').fill(username);
      await modal.locator('#auth-basic-password').fill(password);
      await modal.locator('button[type=submit]').click();
      await modal.locator('button.btn-done').click();
    }

    /** The operation's request and the answer the page shows, as a PNG under test-artifacts/. */
    async function screenshot(id: string, file: string) {
      const op = operation(id);
      const top = await op.boundingBox();
      const answer = await op.locator('.live-responses-table').first().boundingBox();
      assert.ok(top && answer);
      // Boxes are relative to the viewport; a full-page clip is relative to the page.
      const scrolled = await page.evaluate(() => (globalThis as unknown as { scrollY: number }).scrollY);
      const clip = { x: 0, y: top.y + scrolled, width: 1280, height: answer.y + answer.height - top.y + 10 };
      await page.screenshot({ path: `${ARTIFACTS}/${file}`, fullPage: true, clip });
    }

    test('lists both operations of the interface, and offers no other server to send them to', async () => {
      await page.screenshot({ path: `${ARTIFACTS}/docs-page.png` });
      assert.equal(await page.locator('.servers select, .servers-title').count(), 0, 'the page sends to its own server only');
      const summaries = await page.locator('.opblock-summary').allInnerTexts();
      assert.deepEqual(
        summaries.map((s) => s.replace(/\s+/g, ' ').trim()),
        ['POST /me Test Connection', 'POST /donation/create Create Donation'],
      );
    });

    test('"Test Connection" with the wrong password shows the 401', async () => {
      await authorize(t.charity.username, 'not-the-password');
      assert.equal(await execute('testConnection', '/me'), 401);
      assert.match(await shownBody('testConnection'), /"message": "Unauthorized"/);
      assert.match(await operation('testConnection').locator('.live-responses-table tbody').first().innerText(), /www-authenticate: XBasic realm="Almoner"/i);
    });

    test('"Test Connection" with the charity\'s credentials: 200, Authenticated, and the charity named', async () => {
      await authorize(t.charity.username, t.charity.password);
      assert.equal(await execute('testConnection', '/me'), 200);
      const shown = await shownBody('testConnection');
      assert.match(shown, /"message": "Authenticated"/);
      assert.match(shown, new RegExp(`"name": "${t.charity.name}"`));
      await screenshot('testConnection', 'docs-test-connection.png');
    });

    test('"Create Donation" with the example body records the donation; pressed again, it records another, with a fresh Idempotency-Key each time', async () => {
      const before = (await t.donations()).length;
      const keys: string[] = [];
      const replays: (string | null)[] = [];
      const requestIds: string[] = [];
      const watch = (r: import('playwright-core').Response) => {
        if (!r.url().endsWith('/api/v1/donation/create')) return;
        keys.push(r.request().headers()['idempotency-key'] ?? '');
        replays.push(r.headers()['idempotent-replayed'] ?? null);
        requestIds.push(r.headers()['x-request-id'] ?? '');
      };
      page.on('response', watch);
      assert.equal(await execute('createDonation', '/donation/create'), 200);
      assert.equal(await execute('createDonation', '/donation/create'), 200);
      page.off('response', watch);
      // The page fills in the document's example key; it sends a fresh UUID in its place, so a second press is a second donation.
      assert.equal(await operation('createDonation').locator('input[placeholder="Idempotency-Key"]').inputValue(), IDEMPOTENCY_KEY_EXAMPLE);
      assert.equal(keys.length, 2);
      for (const key of keys) assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.notEqual(keys[0], keys[1]);
      assert.ok(!keys.includes(IDEMPOTENCY_KEY_EXAMPLE));
      assert.deepEqual(replays, [null, null]);
      // Nor the document's example X-Request-Id: every request from the page bore it (an integrator's review); each now gets its own.
      assert.equal(new Set(requestIds).size, 2, JSON.stringify(requestIds));
      assert.ok(!requestIds.includes(REQUEST_ID_EXAMPLE), JSON.stringify(requestIds));
      assert.equal((await t.donations()).length, before + 2);
      const shown = await shownBody('createDonation');
      assert.match(shown, /"donation_date": "2021-02-25T00:00:00.000000Z"/);
      const stored = await t.donations();
      assert.equal(stored.at(-1)?.donor_email, 'jane.doe@example.com');
      assert.equal(stored.at(-1)?.charity, t.charity.username);
      await screenshot('createDonation', 'docs-create-donation.png');
    });

    test('"Create Donation" as a form sends each value as typed: an amount of 10.50 is recorded and echoed as "10.50"', async () => {
      const op = operation('createDonation');
      await op.locator('.opblock-section-request-body select.content-type').selectOption('application/x-www-form-urlencoded');
      const amount = op.locator('tr[data-property-name="amount"] input');
      await amount.fill('10.50');
      const [request] = await Promise.all([page.waitForRequest((r) => r.url().endsWith('/api/v1/donation/create')), execute('createDonation', '/donation/create')]);
      assert.equal(new URLSearchParams(request.postData() ?? '').get('amount'), '10.50');
      assert.match(await shownBody('createDonation'), /"amount": "10.50"/);
      assert.equal((await t.donations()).at(-1)?.amount, '10.50');
      await op.locator('.opblock-section-request-body select.content-type').selectOption('application/json');
    });

    test('shows each operation\'s code samples, one tab per language, each the file under examples/', async () => {
      for (const id of ['testConnection', 'createDonation'] as const) {
        const op = operation(id);
        if (!(await op.locator('.code-samples').isVisible())) await op.locator('.opblock-summary').click();
        const samples = op.locator('.code-samples');
        const files = codeSampleFiles(id);
        assert.deepEqual(await samples.locator('[role=tab]').allInnerTexts(), files.map((f) => f.label));
        for (const file of files) {
          await samples.getByRole('tab', { name: file.label, exact: true }).click();
          assert.equal(await samples.locator('[role=tab][aria-selected=true]').innerText(), file.label);
          assert.equal(await samples.locator('pre.code-sample').textContent(), readFileSync(file.path, 'utf8'), `${id}: ${file.label}`);
        }
        await samples.locator('[role=tab]').first().click();
      }
      await operation('createDonation').locator('.code-samples').screenshot({ path: `${ARTIFACTS}/docs-code-samples.png` });
    });

    test('asked nothing of any other host, and logged no errors', () => {
      const origin = new URL(page.url()).origin;
      assert.ok(requested.length >= 6, `${requested.length} requests`);
      assert.deepEqual(requested.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:')), []);
      assert.deepEqual(problems.filter((p) => !/status of 401/.test(p)), []);
    });
  });
});
