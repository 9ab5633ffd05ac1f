// How a 503's "database unavailable" is logged (http/errors.ts, unavailableLog): each kind of error
// once an interval, the rest counted and said when it ends; a create of unknown outcome every time.
// Until 2026-11-30 every 503 logged its error and stack (1.3 MB a second in an outage: a faults
// review); the first version of the limit then hid an unknown outcome behind another kind's line,
// and said the count only at the next line, which might come at the next outage (a review).
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { unavailableLog } from '../../src/http/errors.js';
import { CommitOutcomeUnknownError } from '../../src/store/group-commit.js';
import { until } from '../support/cli.js';

const coded = (code: string) => Object.assign(new Error(`${code}: refused`), { code });
const recorder = () => {
  const lines: [Record<string, unknown>, string][] = [];
  return { lines, warn: (fields: object, message: string) => void lines.push([fields as Record<string, unknown>, message]) };
};

test('each kind once an interval, on the request\'s log; the rest counted and said on the app\'s when the interval ends', async () => {
  const app = recorder();
  const request = recorder();
  let now = 0;
  const log = unavailableLog(app, 30, () => now);
  for (let i = 0; i < 4; i++) log(coded('ECONNREFUSED'), request);
  log(coded('25006'), request); // another kind: its own line
  assert.deepEqual(request.lines.map(([f]) => (f.err as { code: string }).code), ['ECONNREFUSED', '25006']);
  assert.deepEqual(app.lines, []);
  await until('the count, at the interval\'s end', 2_000, () => app.lines.length > 0);
  assert.deepEqual(app.lines, [[{ kind: 'ECONNREFUSED', alike_since: 3 }, 'database unavailable: more of the same since the last line']]);
  now += 30;
  log(coded('ECONNREFUSED'), request);
  assert.equal(request.lines.length, 3, 'a new interval: in full again');
  await sleep(60);
  assert.equal(app.lines.length, 1, 'no count when none came');
});

test("an interval's count is said before the next interval's first line, and at close(); errors without a code are told apart by their message", () => {
  const app = recorder();
  const request = recorder();
  const order: string[] = [];
  app.warn = (fields) => void order.push(`count ${(fields as { alike_since: number }).alike_since}`);
  request.warn = () => void order.push('line');
  let now = 0;
  const log = unavailableLog(app, 1000, () => now);
  log(coded('ECONNREFUSED'), request);
  log(coded('ECONNREFUSED'), request);
  log(coded('ECONNREFUSED'), request);
  now += 1000; // over, its timer not yet run
  log(coded('ECONNREFUSED'), request);
  log(coded('ECONNREFUSED'), request);
  assert.deepEqual(order, ['line', 'count 2', 'line']);
  log.close(); // the server stops within the second
  assert.deepEqual(order, ['line', 'count 2', 'line', 'count 1']);
  order.length = 0;
  log(new Error('Connection terminated unexpectedly'), request);
  log(new Error('timeout exceeded when trying to connect'), request);
  log(new Error('Connection terminated unexpectedly'), request);
  assert.deepEqual(order, ['line', 'line'], 'two kinds without a code, each its own line');
  log.close();
});

test('a create of unknown outcome is logged every time, whatever came before it', () => {
  const app = recorder();
  const request = recorder();
  const log = unavailableLog(app, 1000, () => 0);
  log(coded('ECONNREFUSED'), request);
  for (let i = 0; i < 3; i++) log(new CommitOutcomeUnknownError(new Error('Connection terminated unexpectedly')), request);
  log(coded('ECONNREFUSED'), request);
  assert.deepEqual(
    request.lines.map(([f]) => (f.err as { code: string }).code),
    ['ECONNREFUSED', 'ALMONER_COMMIT_UNKNOWN', 'ALMONER_COMMIT_UNKNOWN', 'ALMONER_COMMIT_UNKNOWN'],
  );
});
