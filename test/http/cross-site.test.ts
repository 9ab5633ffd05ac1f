// A form on another site's page, posted here by a charity's browser: the browser adds the Basic
// credentials it holds for this server (asking for them with its login dialog on a 401's Basic
// challenge, and sending them again unasked with every later form from any site). Until 2026-11-30 such
// a form recorded a donation as the charity (a security review: in headless Chromium, the first after
// a 401, the second with no 401 at all). Such a request (Sec-Fetch-Site cross-site or same-site, which
// no page can set) is a 403 before its credentials are looked at: no challenge, nothing stored.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { launchChromium, noBrowser } from '../support/browser.js';
import { BACKENDS } from '../support/backends.js';
import { basic, exampleDonation, NO_FAILURE_DELAY, startTestApp, type TestContext } from '../support/app.js';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const form = (fields: Record<string, unknown>) => new URLSearchParams(fields as Record<string, string>).toString();

for (const backend of BACKENDS) describe(`a browser's request for another site's page [${backend.name}]`, () => {
  let t: TestContext;
  before(async () => {
    t = await startTestApp(backend, { failureDelay: NO_FAILURE_DELAY });
  });
  after(() => t.close());

  for (const site of ['cross-site', 'same-site']) {
    test(`Sec-Fetch-Site: ${site}: a create with the charity's credentials is a 403, with no challenge, and stores nothing; /me too`, async () => {
      const headers = { ...FORM, authorization: t.charity.authorization, 'sec-fetch-site': site, 'sec-fetch-mode': 'navigate', origin: 'https://elsewhere.example' };
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/donation/create', headers, payload: form(exampleDonation({ donor_email: 'forged@elsewhere.example' })) });
      assert.equal(res.statusCode, 403, res.body);
      assert.match((res.json() as { message: string }).message, /^A browser sent this request for another site's page \(Sec-Fetch-Site\)/);
      assert.equal(res.headers['www-authenticate'], undefined, 'no challenge: a browser would ask for the credentials, and keep them');
      assert.equal((await t.donations()).filter((d) => d.donor_email === 'forged@elsewhere.example').length, 0);
      const me = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization, 'sec-fetch-site': site } });
      assert.equal(me.statusCode, 403);
      const bare = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { 'sec-fetch-site': site } });
      assert.equal(bare.statusCode, 403, 'without credentials too: a 401 would challenge');
      assert.equal(bare.headers['www-authenticate'], undefined);
    });
  }

  test('this server\'s own pages (same-origin), a URL typed in (none), and clients that are not browsers (no header) go on as before', async () => {
    for (const site of ['same-origin', 'none', undefined]) {
      const headers = { 'content-type': 'application/json', authorization: t.charity.authorization, ...(site && { 'sec-fetch-site': site }) };
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/donation/create', headers, payload: exampleDonation() });
      assert.equal(res.statusCode, 200, `${site}: ${res.body}`);
    }
  });

  test('refused requests are not failed authentications: the charity, from the same address, still gets in', async () => {
    for (let i = 0; i < 40; i++) {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: basic(t.charity.username, 'wrong'), 'sec-fetch-site': 'cross-site' }, remoteAddress: '192.0.2.77' });
      assert.equal(res.statusCode, 403);
    }
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers: { authorization: t.charity.authorization }, remoteAddress: '192.0.2.77' });
    assert.equal(res.statusCode, 200);
  });
});

describe('in headless Chromium: a form on another site\'s page, in a browser that holds the charity\'s credentials', { skip: noBrowser }, () => {
  let t: TestContext;
  let elsewhere: Server;
  let elsewhereUrl = '';
  const forged = 'forged@elsewhere.example';
  before(async () => {
    t = await startTestApp();
    const api = await t.baseUrl(); // http://127.0.0.1:port
    // Another site: another host name for the browser (localhost is not 127.0.0.1 to it), with a page that posts a form at once.
    const page = `<!doctype html><form id="f" method="POST" action="${api}/api/v1/donation/create">${Object.entries(exampleDonation({ donor_email: forged }))
      .map(([k, v]) => `<input name="${k}" value="${String(v)}">`)
      .join('')}</form><script>document.getElementById('f').submit()</script>`;
    elsewhere = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(page));
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    elsewhereUrl = `http://localhost:${(elsewhere.address() as AddressInfo).port}/`;
  });
  after(async () => {
    elsewhere?.close();
    await t?.close();
  });

  test('records nothing, whether the browser is asked for the credentials or sends them unasked; the answer is a 403', async () => {
    const browser = await launchChromium();
    try {
      // The credentials the browser holds: what a person typed into its login dialog, which it sends again unasked.
      const context = await browser.newContext({ httpCredentials: { username: t.charity.username, password: t.charity.password } });
      const page = await context.newPage();
      const statuses: number[] = [];
      page.on('response', (r) => new URL(r.url()).pathname === '/api/v1/donation/create' && statuses.push(r.status()));
      for (let i = 0; i < 2; i++) {
        const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/donation/create' && r.status() !== 401);
        await page.goto(elsewhereUrl);
        await answered;
      }
      assert.deepEqual(statuses, [403, 403]);
      assert.equal((await t.donations()).filter((d) => d.donor_email === forged).length, 0, 'no forged donation stored');
    } finally {
      await browser.close();
    }
  });
});
