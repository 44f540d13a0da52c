/*
 * Node's own floor under a fresh job's small calls: 2 new worker threads make
 * 4 B round trips over a SharedArrayBuffer, each send and receive an async
 * function awaited in a plain loop (as a user's job awaits tensorcomm's), the
 * receive spinning on its word. Timed from the first round trip after both
 * threads run, the clock read only at the given call counts, as
 * bench/cold-calls.ts times tensorcomm's: the least any library's round trip
 * costs over those spans in new threads on this machine and Node, V8 tiering
 * up a dozen lines instead of a call path.
 *
 *   node bench/floors/sab_cold_calls.mjs 1000 3000 10000
 *
 * Prints {"ms": [the milliseconds from the first round trip to the end of round trip COUNT, for each COUNT]}.
 */
import { Worker } from 'node:worker_threads';

const counts = process.argv.slice(2).map(Number);
if (
  counts.length === 0 ||
  counts.some((n, i) => !Number.isInteger(n) || n < 1 || n <= (counts[i - 1] ?? 0))
) {
  console.error('usage: sab_cold_calls.mjs COUNT... (ascending positive integers)');
  process.exit(2);
}

const side = `
const { workerData: { words, me, counts }, parentPort } = require('node:worker_threads');
const w = new Int32Array(words);
async function send(value) { Atomics.store(w, 1 - me, value); }
async function recv(value) { while (Atomics.load(w, me) !== value); }
(async () => {
  // Both threads run before the clock starts: a thread's start is not a call.
  Atomics.add(w, 2, 1);
  while (Atomics.load(w, 2) < 2);
  const ms = [];
  const started = performance.now();
  for (let call = 1, k = 0; k < counts.length; call++) {
    if (me === 0) { await send(call); await recv(call); }
    else { await recv(call); await send(call); }
    if (call === counts[k]) ms[k++] = performance.now() - started;
  }
  parentPort.postMessage(ms);
})();`;

const words = new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT);
const threads = [0, 1].map((me) => new Worker(side, { eval: true, workerData: { words, me, counts } }));
const failed = new Promise((_, reject) => {
  for (const thread of threads) thread.once('error', reject);
});
const ms = await Promise.race([new Promise((resolve) => threads[0].once('message', resolve)), failed]);
await Promise.all(threads.map((t) => t.terminate()));
console.log(JSON.stringify({ ms }));
