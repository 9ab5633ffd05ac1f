// A clock for an app under test: the real one, plus however far the test has moved it on. A test
// moves it past a lifetime (a remembered credential's) instead of waiting that lifetime out.
import type { Clock } from '../../src/time.js';

export class TestClock {
  private ahead = 0;
  private heldAt: number | undefined;

  readonly now: Clock = () => (this.heldAt ?? performance.now()) + this.ahead;

  /** Stops the clock following real time until release(), for a test whose margins a slow machine must not eat. */
  hold(): void {
    this.heldAt ??= performance.now();
  }

  /** Lets the clock follow real time again (it catches up at once). */
  release(): void {
    this.heldAt = undefined;
  }

  /** Moves the clock `ms` forward, at once. */
  advance(ms: number): void {
    this.ahead += ms;
  }
}
