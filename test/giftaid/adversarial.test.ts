// Every reading of a donor's text in Gift Aid (names, house, postcode) ends on hostile input: any Gift
// Aid donation stored through the API reaches it, in giftaid claim, giftaid schedule and donor erase.
// An address of "upper ground " forty times never finished (a regular expression that could match
// each run two ways tried every way; a security review, 2026-11-29), and held every claim of its charity.
// Run in a worker, which is ended if it has not finished in a minute: a hang fails this test rather
// than the suite. Not a measure of speed (each input takes a few milliseconds).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';

/** Words the readings look for, each repeated to the longest address the API takes (1,000 characters). */
const WORDS = [
  'upper ground', 'lower ground', 'upper', 'ground', 'garden', 'rear', 'front', 'side', 'top', 'basement', 'mezzanine',
  'flat', 'flat 3', 'flat no', 'floor', '2nd floor', 'apartment', 'room', 'unit', 'block b', 'maisonette', 'fflat',
  'st', 'st.', 'dr', 'road', 'high st', 'lane', 'heol', 'stryd', 'the', 'of', 'on', 'at', 'and', '&', 'to', '-', '–',
  'mr', 'mrs', 'dr.', 'rev', 'lady', 'no.', 'no', '#', 'nº', '12', '12a', '12 a', '1/2', '12 1/2', '½', '12-14', '3/2', '2f1', '(2f1)',
  'rose cottage', 'john smith', 'old', 'upper kent', 'tel', 'tel:', '07700', 'block', 'the gardens', 'city of', 'c/o', 'po box', 'n/a', 'sw1a', 'sw1a 1aa', 'o', '0', 'x', ',', ';',
];
const ENDINGS = ['', 'x', '!', ',', ' 1', ' road', ' floor', ' flat', ' sw1a 1aa'];

test("hostile text in a Gift Aid donation's names, address or postcode is read, and the reading ends", { timeout: 120_000 }, async () => {
  const inputs = WORDS.flatMap((word) => ENDINGS.map((end) => `${`${word} `.repeat(Math.floor((999 - end.length) / (word.length + 1)))}${end}`.slice(0, 1000)));
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      const { tsImport } = await import('tsx/esm/api');
      const s = await tsImport(workerData.module, workerData.module);
      for (const [i, text] of workerData.inputs.entries()) {
        parentPort.postMessage(i);
        const donation = { id: 1, donor_first_name: text, donor_last_name: text, donor_email: 'a@example.com', donor_address: text, donor_city: text, donor_postcode: text, payment_confirmation_number: null, gift_aid: true, amount_minor: 100, donation_date: '2025-02-25T00:00:00.000000Z' };
        s.assessDonation(donation, '2025-06-15');
        s.assessDonation({ ...donation, donor_first_name: 'Jane', donor_last_name: 'Doe', donor_city: 'London', donor_postcode: 'SW1A 1AA' }, '2025-06-15');
        s.houseNameOrNumber(text);
        s.hmrcPostcode(text);
      }
      parentPort.postMessage('done');
    })();`,
    { eval: true, workerData: { inputs, module: new URL('../../src/giftaid/schedule.ts', import.meta.url).href } },
  );
  let at = -1;
  const outcome = await new Promise<string>((resolve) => {
    const deadline = setTimeout(() => resolve('hung'), 60_000);
    worker.on('message', (m: number | string) => {
      if (m === 'done') {
        clearTimeout(deadline);
        resolve('done');
      } else at = m as number;
    });
    worker.on('error', (err) => {
      clearTimeout(deadline);
      resolve(`failed: ${err.message}`);
    });
  });
  await worker.terminate();
  assert.equal(outcome, 'done', `input ${at} of ${inputs.length}: ${JSON.stringify(inputs[at]?.slice(0, 60))}…`);
});
