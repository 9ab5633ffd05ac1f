#!/usr/bin/env node
// `npm run build`, first step: bundles the operator command and the server into dist/ with esbuild,
// because Node 20 loads hundreds of small ES modules slowly (Kysely alone is ~400 files, ~170 ms of
// every start). dist/cli/main.js and dist/server.js are the entry points, code they share is in
// dist/*.js chunks, and what only some runs need (pg, metrics) is in chunks loaded when needed.
// Code in src/ therefore never knows which file it runs from: it finds Almoner's own files by the
// package's name (`require.resolve('almoner/package.json')`), never relative to import.meta.url.
// The second step, tsc, writes dist/client/ (the package's `./client` export, with its types).
import { rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true }); // no stale chunks

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
  // Loaded from node_modules at run time: a native addon, an optional one pg looks for, and ioredis
  // (only with REDIS_URL; it reads its own package.json through __dirname, which a bundle lacks).
  external: ['better-sqlite3', 'pg-native', 'ioredis'],
  // The CommonJS packages inside call require() for Node's built-in modules; an ES module has none.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  metafile: true,
  logLevel: 'warning',
});
// What went into each file, and what each still loads from node_modules (the production-install test reads it).
writeFileSync(new URL('../dist/meta.json', import.meta.url), JSON.stringify(metafile));
