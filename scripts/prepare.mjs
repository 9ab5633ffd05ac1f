#!/usr/bin/env node
// npm's `prepare` (run by `npm ci` and `npm install`): builds dist/ with `npm run build`, unless
// TypeScript is absent, as in `npm ci --omit=dev`: then it says so and succeeds, so that install is
// not broken by `tsc: not found`. A production install builds first and prunes after (README).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

try {
  createRequire(import.meta.url).resolve('typescript/package.json');
} catch {
  console.log('almoner: TypeScript is not installed (dev dependencies omitted), so dist/ was not built; for a production install run `npm ci --include=dev && npm prune --omit=dev`.');
  process.exit(0);
}

// npm_execpath is the npm that runs this script; `npm` on PATH when run by hand.
const npm = process.env.npm_execpath;
const build = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
process.exit(build.status ?? 1);
