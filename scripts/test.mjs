#!/usr/bin/env node
// npm test: every test file under test/, through Node's test runner (TypeScript via tsx).
// The PostgreSQL half runs when TEST_DATABASE_URL names a server, the browser test when Chromium is
// installed, the spreadsheet check when LibreOffice is, the nginx test when nginx is; this says so either way.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

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

const files = process.argv.length > 2 ? process.argv.slice(2) : testFiles('test');
// A test that hangs fails after 4 minutes (the longest passes in under one), and the run ends when
// the last test has, whatever a failed test left open (a socket, a timer), instead of waiting on it.
const guards = ['--test-timeout=240000', '--test-force-exit'];
const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...guards, ...files], { stdio: 'inherit' });
process.exit(result.status ?? 1);
