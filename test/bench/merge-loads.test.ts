// The benchmark measures each run in slices beside slices against the ceiling (bench/run.ts), and
// puts each side's slices together with mergeLoads: its req/s, its counts and its percentiles must
// be those of one long run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mergeLoads, QUANTILES, type LoadResult } from '../../bench/load.js';

/** A slice whose latencies spread evenly from 0 to `maxMs`, `responses` of them in `seconds`. */
function slice(maxMs: number, responses: number, seconds = 1): LoadResult {
  return {
    seconds, responses, rps: responses / seconds, ok: responses - 1, non2xx: 1, statuses: null, errors: 2, sent: responses + 64,
    p50Ms: maxMs / 2, p99Ms: (maxMs * 99) / 100, meanMs: maxMs / 2, quantilesMs: QUANTILES.map((p) => (maxMs * p) / 100),
  };
}

test('one slice merged is itself', () => {
  const one = slice(10, 5000);
  const merged = mergeLoads([one]);
  assert.equal(merged.p50Ms, 5);
  assert.equal(merged.p99Ms, 9.9);
  assert.equal(merged.rps, 5000);
  assert.deepEqual(merged.quantilesMs, one.quantilesMs);
});

test('slices merged: counts and seconds summed, req/s over all, percentiles of all their latencies together', () => {
  // Half the responses spread over 0 to 100 ms, half over 0 to 200 ms: a share F(v) = v/200 + v/400
  // at or below v up to 100 ms, then 1/2 + v/400: the median at 66.7 ms, p99 at 196 ms.
  const merged = mergeLoads([slice(100, 1000), slice(200, 1000, 2)]);
  assert.equal(merged.responses, 2000);
  assert.equal(merged.seconds, 3);
  assert.equal(merged.rps, 2000 / 3);
  assert.deepEqual([merged.ok, merged.non2xx, merged.errors, merged.sent], [1998, 2, 4, 2128]);
  assert.equal(merged.meanMs, 75);
  // Each slice is known at QUANTILES only, so a percentile comes out at most one step above the exact one.
  assert.ok(merged.p50Ms >= 66.6 && merged.p50Ms <= 68, `p50 ${merged.p50Ms}`);
  assert.ok(merged.p99Ms >= 196 && merged.p99Ms <= 196.4, `p99 ${merged.p99Ms}`);
});

test('a slice with more responses weighs more', () => {
  const merged = mergeLoads([slice(10, 9000), slice(1000, 1000)]);
  // 90% of the responses within 10 ms: the median falls among the fast slice's (about 5.5 ms), and
  // p99 among the slow one's (about 900 ms); an unweighted mean of the two would put the median at 252.
  assert.ok(merged.p50Ms < 10, `p50 ${merged.p50Ms}`);
  assert.ok(merged.p99Ms > 800, `p99 ${merged.p99Ms}`);
});
