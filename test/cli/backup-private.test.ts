// A backup, and a restored database, are their owner's alone from their first byte: the file beside
// the target that the rows go into is made empty with mode 0600 before SQLite writes a row in it.
// Until 2026-11-29 SQLite made it as the umask allowed (0644 under the usual 022) and it was made
// private only once whole, so anyone on the machine could open it meanwhile and read every donor
// (a review read a 61 MB backup so, as `nobody`). Seen with strace: each open of the file, in order.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv } from '../support/cli.js';

const STRACE = spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true']).status === 0;

/** Runs bin/almoner under strace with umask 022, and gives the openat calls of files whose names hold `partial`. */
function openedUnderStrace(url: string, args: string[]): Promise<string[]> {
  const trace = join(tempDir(), 'trace');
  return new Promise((resolve, reject) => {
    const script = `umask 022; exec strace -f -qq -e trace=openat -o "$TRACE" "$BIN" "$@"`;
    execFile('sh', ['-c', script, 'sh', ...args], { env: childEnv(url, { TRACE: trace, BIN }) }, (err, _stdout, stderr) => {
      if (err) return reject(new Error(`${args.join(' ')}: ${err.message}\n${stderr}`));
      resolve(readFileSync(trace, 'utf8').split('\n').filter((line) => line.includes('.partial-')));
    });
  });
}

test('backup and restore write their copy into a file that is 0600 from the start, whatever the umask [sqlite]', { skip: !STRACE && 'needs strace' }, async () => {
  assertBuilt();
  const dir = tempDir();
  const url = `sqlite:${join(dir, 'almoner.db')}`;
  const made = await almoner(url, ['charity', 'create', '--name', 'Private', '--email', 'p@example.org']);
  assert.equal(made.code, 0, made.stderr);
  const backup = join(dir, 'backup.db');
  const restored = `sqlite:${join(dir, 'restored.db')}`;
  for (const [into, args] of [[url, ['backup', '--out', backup]], [restored, ['restore', backup]]] as const) {
    const opens = await openedUnderStrace(into, [...args]);
    const first = opens.find((line) => /\.partial-\d+"/.test(line) && line.includes('O_CREAT'));
    assert.ok(first, `${args[0]} opened its copy: ${opens.join('\n')}`);
    assert.match(first, /, 0600\) = \d+$/, `${args[0]}: the copy's first open makes it 0600: ${first}`);
  }
});
