/**
 * Data-parallel linear regression with one process per rank:
 *
 *   npx tensorcomm run --nproc 4 examples/processes/data-parallel.ts [steps]
 *
 * Every rank fits y = 3x - 1 on its own shard of the data; gradients are
 * averaged with allReduce, so all ranks hold the same weights after each step,
 * exactly as a single process would on the whole data set.
 */
import { initProcess, Tensor } from 'tensorcomm';

const ctx = await initProcess();
const steps = Number(process.argv[2] ?? 300);
const samplesPerRank = 64;

// Rank r owns the samples x in [r, r + 1) / worldSize; together the ranks cover [0, 1).
const xs = Array.from({ length: samplesPerRank }, (_, i) => (ctx.rank + i / samplesPerRank) / ctx.worldSize);
const ys = xs.map((x) => 3 * x - 1);

let weight = 0;
let bias = 0;
const learningRate = 0.5;
for (let step = 0; step < steps; step++) {
  let dw = 0;
  let db = 0;
  xs.forEach((x, i) => {
    const error = weight * x + bias - ys[i];
    dw += (2 * error * x) / samplesPerRank;
    db += (2 * error) / samplesPerRank;
  });
  const gradient = Tensor.fromArray([dw, db], [2], 'float64');
  await ctx.world.allReduce(gradient, { op: 'avg' });
  const [meanDw, meanDb] = gradient.toArray() as number[];
  weight -= learningRate * meanDw;
  bias -= learningRate * meanDb;
}

// Every rank must hold the same model: gather it and compare.
const models = (await ctx.world.allGatherObject([weight, bias])) as number[][];
const agree = models.every(([w, b]) => w === weight && b === bias);
console.log(
  `${ctx.name} (pid ${process.pid}): weight=${weight.toFixed(3)} bias=${bias.toFixed(3)} after ${steps} steps; ` +
    `ranks agree: ${agree}`,
);
await ctx.close();
if (!agree) process.exit(1);
