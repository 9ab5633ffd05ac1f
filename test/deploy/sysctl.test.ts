// deploy/60-almoner-writeback.conf: every line is a comment, blank, or a setting sysctl knows
// (a real entry under /proc/sys) with a whole number of bytes. It is not applied here: it would
// change the machine the tests run on.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const noProcSys = existsSync('/proc/sys/vm') ? false : 'no /proc/sys/vm here (not Linux, or a sandbox without it): nothing to check the names against';

test('deploy/60-almoner-writeback.conf sets only real sysctl entries, to whole numbers', { skip: noProcSys }, () => {
  const text = readFileSync(new URL('../../deploy/60-almoner-writeback.conf', import.meta.url), 'utf8');
  const settings = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const match = /^([a-z_]+(?:\.[a-z_]+)+) = (\S+)$/.exec(line);
    assert.ok(match, `not "name = value": ${line}`);
    const [, name, value] = match;
    assert.ok(existsSync(`/proc/sys/${name!.replaceAll('.', '/')}`), `${name} is not a sysctl entry of this kernel`);
    assert.match(value!, /^[1-9][0-9]*$/, `${name}: ${value} is not a whole number`);
    settings.set(name!, value!);
  }
  // Bytes, not a ratio: vm.dirty_background_ratio (a share of memory) would scale with the machine.
  assert.equal(settings.get('vm.dirty_background_bytes'), String(16 * 1024 * 1024));
});
