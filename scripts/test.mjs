#!/usr/bin/env node
// npm test: every test file under test/, through Node's test runner, compiled to JavaScript first.
// The PostgreSQL half runs when TEST_DATABASE_URL names a server, the browser test when Chromium is
// installed, the spreadsheet check when LibreOffice is, the nginx test when nginx is; this says so either way.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

function testFiles(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []))
    .sort();
}

const url = process.env.TEST_DATABASE_URL;
if (url) {
  const shown = url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
  console.log(`PostgreSQL: the suite runs on SQLite and on PostgreSQL (TEST_DATABASE_URL=${shown}).`);
} else {
  console.log('PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set; the suite runs on SQLite only. Set it (e.g. postgres://postgres@127.0.0.1:5432/postgres) to run both.');
}

if (!process.env.TEST_REDIS_URL) {
  console.log('Redis: SKIPPED, TEST_REDIS_URL is not set; rate limits shared through Redis are not tested. Set it (e.g. redis://127.0.0.1:6379) to test them.');
}

const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(chromium) && !process.env.CI) {
  console.log(`Chromium: SKIPPED, there is none at ${chromium}; the docs page is not tested in a browser. Install it (apt-get install -y chromium) or set CHROMIUM_PATH.`);
}

const soffice = process.env.SOFFICE_PATH ?? '/usr/bin/soffice';
if (!existsSync(soffice) && !process.env.CI) {
  console.log(`LibreOffice: SKIPPED, there is none at ${soffice}; the Gift Aid spreadsheets are not opened in it. Install it (apt-get install -y libreoffice-calc) or set SOFFICE_PATH.`);
}

const nginx = process.env.NGINX_PATH ?? '/usr/sbin/nginx';
if (!existsSync(nginx) && !process.env.CI) {
  console.log(`nginx: SKIPPED, there is none at ${nginx}; deploy/nginx.conf is not tested in front of the server. Install it (apt-get install -y nginx) or set NGINX_PATH.`);
}

// The test files run as JavaScript, compiled from src/, test/ and bench/ into .test-build/ (same
// paths, `.ts` to `.js`, with inline source maps so failures point at the TypeScript). Loaded through
// tsx instead, each test file's process spent about 2 s of CPU more, most of it in Node 20's module
// hooks passing each of its ~1,300 module resolutions and loads (Kysely alone is 262 modules) to
// tsx's thread and back: about a sixth of the suite's CPU (docs/performance.md, the test suite's
// wall time). Node's own resolution finds node_modules/ above the folder. Everything else in
// the folder is a link to the project's own (each `.ts` beside its `.js`, bin/, dist/, package.json,
// ...), so a test finds the project's files by the same relative paths from either copy, and a child
// started with `--import tsx` on a `.ts` file still runs the source. esbuild only strips the types:
// `npm run typecheck`, before this in `npm test`, checks them.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = join(ROOT, '.test-build');
const COMPILED = ['src', 'test', 'bench'];
rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT);
const sources = [];
function mirror(dir) {
  mkdirSync(join(OUT, dir), { recursive: true });
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) mirror(path);
    else {
      symlinkSync(relative(join(OUT, dir), join(ROOT, path)), join(OUT, path));
      if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) sources.push(path);
    }
  }
}
for (const e of readdirSync(ROOT, { withFileTypes: true })) {
  if (COMPILED.includes(e.name)) mirror(e.name);
  else if (!['.git', '.test-build', 'node_modules'].includes(e.name)) symlinkSync(join('..', e.name), join(OUT, e.name));
}
await build({ absWorkingDir: ROOT, entryPoints: sources, outbase: '.', outdir: OUT, format: 'esm', platform: 'node', target: 'node20', sourcemap: 'inline', logLevel: 'warning' });

// Named files (test/x.test.ts) run from the compiled copy too.
const compiled = (file) => join(OUT, relative(ROOT, resolve(file)).replace(/\.ts$/, '.js'));
const files = (process.argv.length > 2 ? process.argv.slice(2) : testFiles(join(ROOT, 'test'))).map(compiled);
// A test that hangs fails after 10 minutes. The limit applies to each test file as a whole too, and
// the production install's file (it compiles better-sqlite3) took 188 s in one CI run and more than
// 240 s in the next, with the machine at a third of its speed (2026-11-25), where 4 minutes failed it.
// Not --test-force-exit:
// with it, a test file's last results can be lost on their way to the runner, which then reports
// fewer tests than ran and still passes (nodejs/node#64833; seen here: 910 of 917). Instead, a run
// that outlives RUN_LIMIT_MINUTES (a test file that left a socket or timer open never exits) is
// stopped and fails, saying so. 60: the whole suite took 18 minutes on a slow machine (2026-12-02),
// where 30 left room for one 1.7 times slower, and machines four times slower have been seen; CI
// itself gives up at 90.
const RUN_LIMIT_MINUTES = Number(process.env.TEST_RUN_LIMIT_MINUTES) || 60;
// The run's temporary files (each test's folders, databases, backups, claims, installs: about 400
// folders and 100 MB a run) go in a folder of the run's own, given to the tests and everything they
// start as TMPDIR, and removed when the run passes; a failed run's are kept for a look. Until
// 2026-12-02 they were left in /tmp, run after run. Sticky and open to all, as /tmp is: tests run
// commands as other users, and judge the folders above a backup's as they would /tmp.
const runTmp = mkdtempSync(join(tmpdir(), 'almoner-tests-'));
chmodSync(runTmp, 0o1777);
// In a process group of its own, so that stopping it stops the test files it runs too.
const run = spawn(process.execPath, ['--enable-source-maps', '--test', '--test-concurrency=2', '--test-timeout=600000', ...files], {
  stdio: 'inherit',
  detached: true,
  env: { ...process.env, TMPDIR: runTmp },
});
const stop = (signal) => {
  try {
    process.kill(-run.pid, signal);
  } catch {
    // already gone
  }
};
const limit = setTimeout(() => {
  console.error(`npm test: the run took more than ${RUN_LIMIT_MINUTES} minutes and was stopped. A test file that left a socket, timer or child process open never exits: the last files above that started without finishing are the suspects.`);
  stop('SIGKILL');
}, RUN_LIMIT_MINUTES * 60_000);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stop(signal)); // Ctrl-C reaches the tests
run.on('exit', (code, signal) => {
  clearTimeout(limit);
  const status = signal ? 1 : (code ?? 1);
  if (status === 0) {
    try {
      rmSync(runTmp, { recursive: true, force: true });
    } catch (err) {
      console.error(`npm test: could not remove the run's temporary files in ${runTmp} (${err.code ?? err.message}): a test left something there it still holds (a mount, say).`);
    }
  } else {
    console.error(`npm test: the run's temporary files are kept in ${runTmp}, for a look; remove them after.`);
  }
  process.exit(status);
});
