#!/usr/bin/env node
// `npm run build`, first step: bundles the operator command and the server into dist/ with esbuild,
// because Node 20 loads hundreds of small ES modules slowly (Kysely alone is ~400 files, ~170 ms of
// every start). dist/cli/main.js and dist/server.js are the entry points, code they share is in
// dist/*.js chunks, and what only some runs need (pg, metrics) is in chunks loaded when needed.
// Code in src/ therefore never knows which file it runs from: it finds Almoner's own files by the
// package's name (`require.resolve('almoner/package.json')`), never relative to import.meta.url.
// The second step, tsc, writes dist/client/ (the package's `./client` export, with its types).
import { rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true }); // no stale chunks

/**
 * pg asks, as it loads, whether it runs in a Cloudflare Worker: where Node has no `navigator` (Node
 * 20) it makes a fetch `Response` to find out, and that loads Node's fetch (undici), about 50 ms of
 * every start on PostgreSQL (docs/performance.md). Almoner runs on Node, so the bundle takes
 * pg's answer for Node. The build stops if pg no longer asks in these words, or in this file.
 */
let pgAnswered = false;
const pgOnNode = {
  name: 'pg-on-node',
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]stream\.js$/ }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      const question = 'if (isCloudflareRuntime()) {';
      if (!source.includes(question)) throw new Error(`${path} no longer holds "${question}": see pgOnNode in scripts/bundle.mjs`);
      pgAnswered = true;
      return { contents: source.replace(question, 'if (false) { // Node, not a Cloudflare Worker: scripts/bundle.mjs'), loader: 'js' };
    });
  },
};

const { metafile } = await build({
  absWorkingDir: fileURLToPath(new URL('..', import.meta.url)),
  entryPoints: ['src/cli/main.ts', 'src/server.ts'],
  outbase: 'src',
  outdir: 'dist',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  // Without the spaces and comments: half as much to read and parse at every start. Identifiers are
  // not renamed, so a stack trace still names Almoner's functions (some dependencies' unused names of
  // function expressions go); the source map says where.
  minifyWhitespace: true,
  minifySyntax: true,
  // Loaded from node_modules at run time: a native addon, an optional one pg looks for, and ioredis
  // (only with REDIS_URL; it reads its own package.json through __dirname, which a bundle lacks).
  external: ['better-sqlite3', 'pg-native', 'ioredis'],
  // The CommonJS packages inside call require() for Node's built-in modules; an ES module has none.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  plugins: [pgOnNode],
  metafile: true,
  logLevel: 'warning',
});
if (!pgAnswered) throw new Error('node_modules/pg/lib/stream.js was not bundled: pg has moved its Cloudflare check; see pgOnNode in scripts/bundle.mjs');
// What went into each file, and what each still loads from node_modules (the production-install test reads it).
writeFileSync(new URL('../dist/meta.json', import.meta.url), JSON.stringify(metafile));
