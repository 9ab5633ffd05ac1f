// GET /api/v1/openapi.json (the OpenAPI document) and GET /docs (Swagger UI on that document, from
// the swagger-ui-dist package: nothing is fetched from a CDN). Neither needs credentials: the page
// asks for them, and "Try it out" sends them only to this server.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildOpenApiDocument } from '../openapi.js';

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

// validatorUrl: null keeps the page from sending the document to swagger.io for a badge.
const INITIALISER = `window.ui = SwaggerUIBundle({
  url: '/api/v1/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: true,
  displayRequestDuration: true,
  defaultModelsExpandDepth: 0,
  supportedSubmitMethods: ['post'],
  requestInterceptor: (request) => {
    // As the interface asks of every client (Swagger UI would send */*).
    delete request.headers.accept;
    request.headers.Accept = 'application/json';
    // Tells the server this is a script: a wrong password then shows as a 401 on the page, not as
    // the browser's own login dialog.
    request.headers['X-Requested-With'] = 'XMLHttpRequest';
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

export async function docsRoutes(app: FastifyInstance): Promise<void> {
  // Built, found and read on first use, not at start-up: most servers never show the page.
  let document: string | undefined;
  const loaded = new Map<string, Promise<Buffer>>();
  const distDir = () => dirname(require.resolve('swagger-ui-dist/package.json'));

  app.get('/api/v1/openapi.json', async (_request, reply) => {
    // By the package's own name, not a relative path: this code runs from a bundle (scripts/bundle.mjs).
    document ??= JSON.stringify(buildOpenApiDocument((require('almoner/package.json') as { version: string }).version));
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
        content = readFile(join(distDir(), name));
        loaded.set(name, content);
        content.catch(() => loaded.delete(name)); // a failed read is tried again next time, not remembered
      }
      const bytes = await content; // a failure is a plain 500, with the default no-store
      // The package's files change only with its version: let browsers keep them for a day.
      return reply.type(type).header('Cache-Control', 'public, max-age=86400').send(bytes);
    });
  }
}
