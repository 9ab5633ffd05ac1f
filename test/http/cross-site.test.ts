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
      assert.match((res.json() as { message: string }).message, /^A browser sent this request for another site's page \(its Sec-Fetch-Site or Origin\)/);
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

  // Chromium sends Sec-Fetch-Site only to a potentially trustworthy origin (HTTPS, localhost, 127.0.0.1): to
  // http://almoner.lan:3000 (HOST=0.0.0.0, no nginx) it sends none, and a form from another site recorded a
  // donation again (a review, 2026-11-30). Nor do Safari before 16.4 and Firefox before 90. A browser's POST
  // always names its page's Origin: one whose host is not the request's own is refused the same way.
  test('no Sec-Fetch-Site (plain HTTP to a host name, an older browser): an Origin of another host is a 403, as is an opaque one (null), and one of another port where Host names one', async () => {
    // The last two: a page of another service on this host (accepted until 2026-12-01), and one on its port 80.
    for (const origin of ['http://elsewhere.example', 'http://elsewhere.example:3000', 'null', 'not a url', 'http://almoner.lan:8080', 'http://almoner.lan']) {
      const headers = { ...FORM, host: 'almoner.lan:3000', origin, authorization: t.charity.authorization };
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/donation/create', headers, payload: form(exampleDonation({ donor_email: 'forged@elsewhere.example' })) });
      assert.equal(res.statusCode, 403, `${origin}: ${res.body}`);
      assert.equal(res.headers['www-authenticate'], undefined);
    }
    assert.equal((await t.donations()).filter((d) => d.donor_email === 'forged@elsewhere.example').length, 0);
  });

  test("no Sec-Fetch-Site: this server's own page (its Origin's host the request's), and no Origin at all, go on; a Sec-Fetch-Site of same-origin is believed over the Origin", async () => {
    for (const [host, origin, site] of [
      ['almoner.lan:3000', 'http://almoner.lan:3000', undefined],
      ['Almoner.LAN:3000', 'http://almoner.lan:3000', undefined],
      ['almoner.lan', 'http://almoner.lan', undefined],
      ['almoner.example.org', 'https://almoner.example.org', undefined],
      ['[::1]:3000', 'http://[::1]:3000', undefined],
      ['almoner.example.org:443', 'https://almoner.example.org', undefined], // a proxy that names the port its page was on
      ['almoner.lan', 'http://almoner.lan:8080', undefined], // a proxy that left the port out of Host: any port is taken for this server's
      ['[::1]', 'http://[::1]:3000', undefined],
      ['almoner.lan:3000', undefined, undefined],
      ['upstream:3000', 'https://almoner.example.org', 'same-origin'], // a proxy that gave its own Host
    ] as const) {
      const headers = { host, authorization: t.charity.authorization, ...(origin && { origin }), ...(site && { 'sec-fetch-site': site }) };
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/me', headers });
      assert.equal(res.statusCode, 200, `${host} ${origin}: ${res.body}`);
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

  test('over plain HTTP to a host name (no Sec-Fetch-Site from Chromium there): the form still records nothing, and the server\'s own page still calls the API', async () => {
    // HOST=0.0.0.0 without nginx, reached as http://almoner.test:port: not a potentially trustworthy origin, so
    // Chromium sends no Sec-Fetch-Site to it (until 2026-11-30 both forms here were recorded, 200 and 200).
    const port = new URL(await t.baseUrl()).port;
    const api = `http://almoner.test:${port}`;
    const page = `<!doctype html><form id="f" method="POST" action="${api}/api/v1/donation/create">${Object.entries(exampleDonation({ donor_email: forged }))
      .map(([k, v]) => `<input name="${k}" value="${String(v)}">`)
      .join('')}</form><script>document.getElementById('f').submit()</script>`;
    const plain = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(page));
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const browser = await launchChromium(['--host-resolver-rules=MAP almoner.test 127.0.0.1, MAP elsewhere.test 127.0.0.1']);
    try {
      const context = await browser.newContext({ httpCredentials: { username: t.charity.username, password: t.charity.password } });
      const tab = await context.newPage();
      const statuses: number[] = [];
      const sites: (string | undefined)[] = [];
      tab.on('response', async (r) => {
        if (new URL(r.url()).pathname !== '/api/v1/donation/create') return;
        statuses.push(r.status());
        sites.push((await r.request().allHeaders())['sec-fetch-site']);
      });
      for (let i = 0; i < 2; i++) {
        const answered = tab.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/donation/create' && r.status() !== 401);
        await tab.goto(`http://elsewhere.test:${(plain.address() as AddressInfo).port}/`);
        await answered;
      }
      assert.deepEqual(sites.filter((s) => s !== undefined), [], 'Chromium sent no Sec-Fetch-Site here');
      assert.deepEqual(statuses.filter((s) => s !== 401), [403, 403]);
      assert.equal((await t.donations()).filter((d) => d.donor_email === forged).length, 0, 'no forged donation stored');
      // The server's own page (its /docs, say) calling the API with the credentials, as the /docs page and almoner/client do.
      await tab.goto(`${api}/docs`);
      const status = await tab.evaluate(
        async (authorization) => (await fetch('/api/v1/me', { method: 'POST', headers: { authorization, 'x-requested-with': 'XMLHttpRequest' } })).status,
        t.charity.authorization,
      );
      assert.equal(status, 200);
    } finally {
      await browser.close();
      plain.close();
    }
  });
});
