// The wall clock Almoner stamps donations, keys and the audit trail with follows the system's clock
// when it is set after the process started (it kept the start's reading until 2026-11-28: a server
// started before NTP set the clock dated donations days off, and an Idempotency-Key retried after a
// restart stored a second donation). The clocks under it are injected: no test changes the machine's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nowMicros, WallClock } from '../src/time.js';

test('the wall clock follows a step of the system clock within a second, and ignores its millisecond jitter', () => {
  let monotonic = 1_000;
  let system = Date.UTC(2026, 10, 26, 21, 0, 0); // two days behind, as before NTP
  const clock = new WallClock(() => monotonic, () => system);
  assert.equal(clock.micros(), system * 1000);
  monotonic += 500.25;
  system += 500;
  assert.equal(clock.micros(), (system + 0.25) * 1000, 'between looks, the high-resolution clock: microseconds');
  // NTP sets the clock two days on.
  system += 2 * 86_400_000;
  monotonic += 100;
  system += 100;
  assert.equal(clock.micros(), (system - 2 * 86_400_000 + 0.25) * 1000, 'not looked at again within the second');
  monotonic += 1_000;
  system += 1_000;
  assert.equal(clock.micros(), system * 1000, 'a second on, the step is taken');
  // Date's millisecond steps back and forth: not taken, so the time never moves back by them.
  const before = clock.micros();
  monotonic += 1_000;
  system += 999;
  assert.equal(clock.micros(), before + 1_000_000);
});

test('nowMicros reads the system clock', () => {
  assert.ok(Math.abs(nowMicros() / 1000 - Date.now()) < 50);
});
