/**
 * GPU example: ranks as threads with their tensors in GPU memory. By default
 * every rank shares GPU 0 (the single-GPU simulation of tensor parallelism:
 * the ranks talk through the memory store, handing device pointers over);
 * with PLACEMENT=distinct each rank gets a GPU of its own and collectives run
 * on NCCL. Without a GPU it says what is missing and exits with status 1.
 *
 *   npx tsx examples/gpu/main.ts          # WORLD_SIZE (default 4), PLACEMENT=shared|distinct
 */
import { type Device, GpuUnavailableError, spawnThreads, Tensor } from 'tensorcomm';

const worldSize = Number(process.env.WORLD_SIZE ?? 4);
const distinct = process.env.PLACEMENT === 'distinct';
const devices = Array.from({ length: worldSize }, (_, r): Device => (distinct ? `cuda:${r}` : 'cuda:0'));

try {
  // Fails here, with the reason, when there is no usable GPU.
  Tensor.zeros([1], 'float32', { device: 'cuda:0' });
} catch (error) {
  if (!(error instanceof GpuUnavailableError)) throw error;
  console.error(`examples/gpu: ${error.message}`);
  process.exit(1);
}

const lines = await spawnThreads<string>(new URL('./rank.ts', import.meta.url), {
  worldSize,
  devices,
  timeoutMs: 120_000,
});
for (const line of lines) console.log(line);
console.log(`${worldSize} ranks on ${distinct ? 'distinct GPUs (NCCL)' : 'one shared GPU (store)'}: done`);
