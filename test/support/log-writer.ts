// A process writing log lines as the server does, for test/log-output.test.ts, where another process
// writes to the same stdout: LINES lines tagged TAG, of many sizes, in bursts of turns.
import { logOutput } from '../../src/log-output.js';

const [tag = 'x', count = '1000'] = process.argv.slice(2);
const n = Number(count);
const out = logOutput(1);
let i = 0;
const burst = () => {
  for (let k = 0; k < 200 && i < n; k++, i++) out.write(`{"tag":"${tag}","i":${i},"pad":"${'x'.repeat(50 + ((i * 37) % 1500))}"}\n`);
  if (i < n) setImmediate(burst);
  else out.flushSync();
};
burst();
