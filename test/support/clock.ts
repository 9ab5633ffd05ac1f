// A clock for an app under test: the real one, plus however far the test has moved it on. A test
// moves it past a lifetime (a remembered credential's) instead of waiting that lifetime out.
import type { Clock } from '../../src/time.js';

export class TestClock {
  private ahead = 0;

  readonly now: Clock = () => performance.now() + this.ahead;

  /** Moves the clock `ms` forward, at once. */
  advance(ms: number): void {
    this.ahead += ms;
  }
}
