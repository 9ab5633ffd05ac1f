// A donor's text shown on the operator's terminal is shown, not obeyed: a name holding a terminal's
// control sequences (a title set, a line wiped) reaches the terminal as text, and a file or a pipe
// gets it exactly as stored. Until 2026-11-30 `donations export` wrote the raw bytes to the
// terminal (a security review). The terminal here is a real pseudo-terminal, script(1)'s.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { validDonation } from '../support/app.js';
import { BACKENDS } from '../support/backends.js';
import { almoner, assertBuilt, BIN, childEnv, operator } from '../support/cli.js';
import { openStore } from '../../src/store/open.js';

/** A name that sets the terminal's title, wipes the line it is on and moves the cursor up, with a C1 CSI (U+009B) and a lone carriage return. */
const HOSTILE = 'Eve\u001b]0;pwned\u0007\u001b[2K\u001b[1A\u009b31m\rX';

/** `bin/almoner args` on a pseudo-terminal (script(1)), its output as the terminal received it. */
function onTerminal(databaseUrl: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const command = [BIN, ...args].map((a) => `'${a}'`).join(' ');
    execFile('script', ['-qec', command, '/dev/null'], { env: childEnv(databaseUrl), timeout: 20_000, encoding: 'utf8' }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
}

const [backend] = BACKENDS;

test('donations export and donor export show a donor\'s control characters as text on a terminal, and write them as they are into a pipe', async () => {
  assertBuilt();
  const database = await backend!.createDatabase();
  try {
    const { charity } = operator(database, backend!.name);
    const { id } = await charity('Alpha');
    const store = await openStore(database.location);
    try {
      await store.recordDonation(id, { ...validDonation('eve@example.org'), donor_first_name: HOSTILE });
    } finally {
      await store.close();
    }
    // As text: the CSV's cell with each control as its escape; JSON's own escapes, and C1's, which JSON leaves raw, as its escape too.
    const csvShown = 'Eve\\u001b]0;pwned\\u0007\\u001b[2K\\u001b[1A\\u009b31m\\u000dX';
    const jsonShown = 'Eve\\u001b]0;pwned\\u0007\\u001b[2K\\u001b[1A\\u009b31m\\rX';
    for (const [args, shown] of [
      [['donations', 'export'], csvShown],
      [['donations', 'export', '--format', 'jsonl'], jsonShown],
      [['donor', 'export', '--email', 'eve@example.org'], jsonShown],
    ] as const) {
      const seen = await onTerminal(database.url, [...args]);
      assert.doesNotMatch(seen, /[\u001b\u0007\u009b]/, `${args.join(' ')}: no control character reaches the terminal`);
      assert.ok(seen.includes(shown), `${args.join(' ')}: the name shown as text: ${JSON.stringify(seen)}`);
    }
    // Into a pipe (a file), the CSV holds the name exactly as stored.
    const piped = await almoner(database.url, ['donations', 'export']);
    assert.equal(piped.code, 0, piped.stderr);
    assert.ok(piped.stdout.includes(HOSTILE), 'exactly as stored');
  } finally {
    await database.drop();
  }
});
