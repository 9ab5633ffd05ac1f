// What a server's start loads and runs, read from the build (dist/, which `npm test` builds first):
// a start is spent loading and running modules (docs/performance.md, start-up), so `serve` loads
// none of the other commands' modules, and a module the server loads asks nothing of ICU as it
// loads (its first use loads ICU's locale data: 22 ms of every start on a slow machine). Each other
// command loads its own module only, found by its name: every name is listed by `almoner --help`
// and reaches its command.
//
// Checked: with the commands imported statically again in src/cli/main.ts, the first test fails
// (src/cli/backup.ts and the rest reached); with `toLocaleString('en-GB')` back in errors.ts's
// TOO_MANY_HEADER_LINES, the second fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { almoner } from '../support/cli.js';
import { ROOT } from '../support/root.js';

interface Meta {
  outputs: Record<string, { inputs: Record<string, unknown>; imports: Array<{ path: string; kind: string; external?: boolean }> }>;
}

/** The source files in the outputs that `entry` loads as it loads, and those loads', not counting `import()`. */
function loadedAtOnce(meta: Meta, entry: string): Set<string> {
  const outputs = new Set<string>();
  const walk = (output: string) => {
    if (outputs.has(output)) return;
    outputs.add(output);
    for (const { path, kind, external } of meta.outputs[output]!.imports) if (!external && kind !== 'dynamic-import') walk(path);
  };
  walk(entry);
  return new Set([...outputs].flatMap((output) => Object.keys(meta.outputs[output]!.inputs)));
}

test("`serve` loads none of the other commands' modules as it starts", () => {
  const meta = JSON.parse(readFileSync(join(ROOT, 'dist', 'meta.json'), 'utf8')) as Meta;
  const loaded = [...loadedAtOnce(meta, 'dist/cli/main.js'), ...loadedAtOnce(meta, 'dist/server.js')];
  const commands = ['charity', 'donations', 'giftaid', 'donor', 'retention', 'backup', 'audit'].map((name) => `src/cli/${name}.ts`);
  assert.deepEqual(
    loaded.filter((input) => commands.includes(input) || /node_modules\/(?:fflate|csv-stringify)\//.test(input)),
    [],
  );
  assert.ok(loaded.includes('src/cli/main.ts') && loaded.includes('src/server.ts'), 'the walk reached the entry points');
});

test('loading the server asks nothing of ICU (Intl) at load', () => {
  // Node's Intl objects load ICU's data on their first use; counted by wrapping them before the
  // server's modules load (dist/server.js and the HTTP stack's chunk, dist/app-*.js, which it imports
  // as it starts), and loading them.
  const script = `
    let asked = [];
    for (const name of ['NumberFormat', 'DateTimeFormat', 'Collator', 'PluralRules']) {
      const Real = Intl[name];
      Intl[name] = function (...args) { asked.push(name + ' ' + new Error().stack.split('\\n')[2].trim()); return new Real(...args); };
    }
    const toLocale = Number.prototype.toLocaleString;
    Number.prototype.toLocaleString = function (...args) { asked.push('toLocaleString ' + new Error().stack.split('\\n')[2].trim()); return toLocale.apply(this, args); };
    await import(${JSON.stringify(join(ROOT, 'dist', 'server.js'))});
    for (const file of (await import('node:fs')).readdirSync(${JSON.stringify(join(ROOT, 'dist'))})) if (/^app-.*\\.js$/.test(file)) await import(${JSON.stringify(join(ROOT, 'dist'))} + '/' + file);
    process.stdout.write(JSON.stringify(asked));
  `;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), []);
});

test('every command is listed by `almoner --help`, and reaches its own command by its name (src/cli/main.ts loads its module alone)', async () => {
  const names = ['serve', 'charity', 'donations', 'giftaid', 'donor', 'retention', 'backup', 'restore', 'keep-replaced', 'audit'];
  const help = await almoner('sqlite::memory:', ['--help']);
  assert.equal(help.code, 0, help.stderr);
  const listed = [...help.stdout.matchAll(/^  ([a-z-]+)(?: \[options\]| <|\s)/gm)].map((m) => m[1]);
  assert.deepEqual(listed.filter((name) => name !== 'help'), names);
  const runs = await Promise.all(names.map((name) => almoner('sqlite::memory:', [name, '--help'])));
  runs.forEach((run, i) => {
    assert.equal(run.code, 0, `${names[i]} --help: ${run.stderr}`);
    assert.match(run.stdout, new RegExp(`^Usage: almoner ${names[i]} `, 'm'));
  });
});

test("a name that is no command is refused as unknown, whatever the name (`constructor` is an object's own property)", async () => {
  for (const name of ['constructor', 'toString', 'nonesuch']) {
    const run = await almoner('sqlite::memory:', [name]);
    assert.equal(run.code, 2, `${name}: ${run.stderr}`);
    assert.match(run.stderr, new RegExp(`unknown command '${name}'`));
  }
});
