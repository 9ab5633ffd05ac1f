// GET /api/v1/openapi.json (the OpenAPI document) and GET /docs (Swagger UI on that document, from
// the swagger-ui-dist package: nothing is fetched from a CDN). Neither needs credentials: the page
// asks for them, and "Try it out" sends them only to this server.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { buildOpenApiDocument, IDEMPOTENCY_KEY_EXAMPLE, REQUEST_ID_EXAMPLE } from '../openapi.js';

const require = createRequire(import.meta.url);

/** The assets the page loads, by the name it loads them under. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

const PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Almoner API reference</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
  <link rel="icon" type="image/png" href="/docs/favicon-16x16.png" sizes="16x16">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/almoner-docs.js"></script>
</body>
</html>
`;

// Each operation's code samples (its x-codeSamples), as tabs above its responses: a Swagger UI
// plugin, since Swagger UI shows only the curl command of a request it has sent.
const CODE_SAMPLES_PLUGIN = `function CodeSampleTabs({ samples, React }) {
  const h = React.createElement;
  const [shown, show] = React.useState(0);
  const tab = (sample, i) => h('button', {
    key: sample.label,
    type: 'button',
    role: 'tab',
    'aria-selected': String(i === shown),
    className: 'code-sample-tab',
    onClick: () => show(i),
    style: {
      margin: '0 6px 6px 0', padding: '4px 10px', cursor: 'pointer', font: 'inherit', fontSize: '13px',
      border: '1px solid #3b4151', borderRadius: '4px',
      background: i === shown ? '#3b4151' : 'transparent', color: i === shown ? '#fff' : '#3b4151',
    },
  }, sample.label);
  return h('div', { className: 'opblock-section code-samples' },
    h('div', { className: 'opblock-section-header' }, h('h4', { className: 'opblock-title' }, 'Code samples')),
    h('div', { style: { padding: '10px 20px' } },
      h('div', { role: 'tablist' }, samples.map(tab)),
      h('pre', { className: 'microlight code-sample', role: 'tabpanel', style: { whiteSpace: 'pre', overflow: 'auto', maxHeight: '420px' } }, h('code', null, samples[shown].source))));
}
const CodeSamples = () => ({
  wrapComponents: {
    responses: (Original, system) => (props) => {
      const samples = system.specSelectors.specJson().getIn(['paths', props.path, props.method, 'x-codeSamples']);
      if (!samples || !samples.size) return system.React.createElement(Original, props);
      return system.React.createElement('div', null,
        system.React.createElement(CodeSampleTabs, { samples: samples.toJS(), React: system.React }),
        system.React.createElement(Original, props));
    },
  },
});
`;

// The page talks to the server that served it and to no other (its CSP says so, and the request
// interceptor below sends there): the document's list of servers, which names others too, is not
// offered as a choice the page would not honour.
const THIS_SERVER_ONLY = `const ThisServerOnly = () => ({ wrapComponents: { ServersContainer: () => () => null } });
`;

// validatorUrl: null keeps the page from sending the document to swagger.io for a badge.
const INITIALISER = `${CODE_SAMPLES_PLUGIN}${THIS_SERVER_ONLY}
window.ui = SwaggerUIBundle({
  url: '/api/v1/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: true,
  displayRequestDuration: true,
  defaultModelsExpandDepth: 0,
  supportedSubmitMethods: ['post'],
  plugins: [CodeSamples, ThisServerOnly],
  requestInterceptor: (request) => {
    // To this page's own server, whatever the document's server URL says (it names the host the
    // document was asked of, which behind a misconfigured proxy may not be the page's).
    const url = new URL(request.url, location.href);
    request.url = location.origin + url.pathname + url.search;
    // As the interface asks of every client (Swagger UI would send */*).
    delete request.headers.accept;
    request.headers.Accept = 'application/json';
    // Tells the server this is a script: a wrong password then shows as a 401 on the page, not as
    // the browser's own login dialog.
    request.headers['X-Requested-With'] = 'XMLHttpRequest';
    // The page fills in the document's example Idempotency-Key; sent twice, it would replay the first
    // donation. Each send gets a fresh key instead (none where the browser has no randomUUID: a page
    // served over plain HTTP to another machine); a key typed in is sent as it is.
    if (request.headers['Idempotency-Key'] === '${IDEMPOTENCY_KEY_EXAMPLE}') {
      if (globalThis.crypto && crypto.randomUUID) request.headers['Idempotency-Key'] = crypto.randomUUID();
      else delete request.headers['Idempotency-Key'];
    }
    // Nor the example X-Request-Id: every request from the page, whoever sent it, bore the same id in
    // the answer and the logs (an integrator's review). None is sent, so the server gives each its own.
    if (request.headers['X-Request-Id'] === '${REQUEST_ID_EXAMPLE}') delete request.headers['X-Request-Id'];
    // A form's values as typed: Swagger UI reads each through JSON.parse first, so an amount of 10.50
    // would go as 10.5 (and 25.00 as 25), and the record echo that.
    if ((request.headers['Content-Type'] || '').toLowerCase().startsWith('application/x-www-form-urlencoded') && typeof request.body === 'string') {
      const path = url.pathname.slice('/api/v1'.length);
      const typed = window.ui.oas3Selectors.requestBodyValue(path, request.method.toLowerCase());
      if (typed && typeof typed.toJS === 'function') {
        const values = typed.toJS();
        const form = new URLSearchParams(request.body);
        for (const key of new Set(form.keys())) {
          const value = values[key] !== null && typeof values[key] === 'object' ? values[key].value : values[key];
          if (typeof value === 'string') form.set(key, value);
        }
        request.body = form.toString();
      }
    }
    return request;
  },
});
`;

// Swagger UI styles elements inline and draws icons as data: URIs; scripts come from here only.
const PAGE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

/** A host name, IPv4 address or [IPv6 address], with an optional port: what a server URL may hold. */
const HOST = /^(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?$/i;

/**
 * The origin the client reached this server at: its scheme and Host (X-Forwarded-Proto and
 * X-Forwarded-Host when sent by a proxy TRUST_PROXY trusts; Fastify decides that). Undefined when
 * the Host is not a host name, so the document never carries whatever a client wrote there.
 */
function originOf(request: FastifyRequest): string | undefined {
  const host = request.host;
  if (host.length > 261 || !HOST.test(host)) return undefined;
  const port = /:([0-9]+)$/.exec(host)?.[1];
  if (port !== undefined && Number(port) > 65535) return undefined; // EXAMPLE.org:99999 named no server a client could reach
  const protocol = request.protocol.toLowerCase(); // a trusted proxy's X-Forwarded-Proto may say anything, in any case (a scheme's case does not count: RFC 3986, 3.1)
  const scheme = protocol === 'https' || protocol === 'http' ? protocol : 'encrypted' in request.socket ? 'https' : 'http';
  return `${scheme}://${host.toLowerCase()}`;
}

/** Documents kept, one per origin asked for: a server is reached by few names, and a flood of made-up ones only replaces them. */
const KEPT_DOCUMENTS = 16;

export async function docsRoutes(app: FastifyInstance, { contactEmail }: { contactEmail?: string | undefined }): Promise<void> {
  // Built and read on first use, not at start-up: most servers never show the page.
  const documents = new Map<string, string>();
  const loaded = new Map<string, Promise<Buffer>>();
  // Found as the routes are added (a package.json look-up, well under a millisecond): found on first use, a server out of file
  // descriptors could not read the package's package.json, which Node 24 reports as ERR_INVALID_PACKAGE_CONFIG, a 500 (seen on 2026-11-30).
  const distDir = dirname(require.resolve('swagger-ui-dist/package.json'));

  app.get('/api/v1/openapi.json', async (request, reply) => {
    const origin = originOf(request);
    let document = documents.get(origin ?? '');
    if (document === undefined) {
      // By the package's own name, not a relative path: this code runs from a bundle (scripts/bundle.mjs).
      const { version } = require('almoner/package.json') as { version: string };
      document = JSON.stringify(buildOpenApiDocument(version, { origin, contactEmail }));
      if (documents.size >= KEPT_DOCUMENTS) documents.delete(documents.keys().next().value!);
      documents.set(origin ?? '', document);
    }
    return reply.type('application/json; charset=utf-8').send(document);
  });

  app.get('/docs', async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('Content-Security-Policy', PAGE_POLICY).send(PAGE),
  );
  app.get('/docs/almoner-docs.js', async (_request, reply) => reply.type('text/javascript; charset=utf-8').send(INITIALISER));

  for (const [name, type] of Object.entries(ASSETS)) {
    app.get(`/docs/${name}`, async (_request, reply) => {
      let content = loaded.get(name);
      if (!content) {
        content = readFile(join(distDir, name));
        loaded.set(name, content);
        content.catch(() => loaded.delete(name)); // a failed read is tried again next time, not remembered
      }
      let bytes: Buffer;
      try {
        bytes = await content;
      } catch (err) {
        // The process's open-files limit taken by client connections: a moment's want, not a fault, and
        // nothing to do with the database (whose 503 it was until 2026-11-30, logged as "database unavailable").
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'EMFILE' && code !== 'ENFILE') throw err; // any other failure is a plain 500, with the default no-store
        reply.log.warn({ code }, 'out of file descriptors: a docs page file could not be opened');
        return reply.code(503).header('Retry-After', '1').send({ message: 'The server is busy. Please try again shortly.' });
      }
      // The package's files change only with its version: let browsers keep them for a day.
      return reply.type(type).header('Cache-Control', 'public, max-age=86400').send(bytes);
    });
  }
}
