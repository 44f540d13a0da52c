/** One rank of the GPU example: collectives and a p2p message on device tensors, checked on the host. */
import { type RankContext, Tensor } from 'tensorcomm';

export default async function main(ctx: RankContext): Promise<string> {
  const { rank, worldSize, device } = ctx;
  const n = worldSize;

  // allReduce in place on the GPU: every rank ends with 1 + 2 + ... + n.
  const t = Tensor.full([1 << 16], rank + 1, 'float32', { device });
  await ctx.world.allReduce(t);
  const sum = t.to('cpu').data[0];

  // allGatherInto: rank r contributes [r, r], everyone gets [0, 0, 1, 1, ...].
  const gathered = Tensor.zeros([2 * n], 'int32', { device });
  await ctx.world.allGatherInto(gathered, Tensor.full([2], rank, 'int32', { device }));

  // A p2p message with a CPU and a GPU tensor around a ring: each part takes its own path.
  const next = ctx.names[(rank + 1) % n];
  const prev = ctx.names[(rank + n - 1) % n];
  const toNext = await ctx.collective.createCollectiveGroup([ctx.name, next]);
  const fromPrev = await ctx.collective.createCollectiveGroup([prev, ctx.name]);
  const sent = toNext.send({ step: Tensor.fromArray([rank], [1], 'int32'), grad: t.clone() });
  const got = (await fromPrev.recv()) as { step: Tensor; grad: Tensor };
  await sent;

  const expected = (n * (n + 1)) / 2;
  const ok = sum === expected && got.grad.device === device && got.grad.equal(t);
  return (
    `${ctx.name} on ${device}: allReduce = ${sum} (expected ${expected}), ` +
    `allGatherInto = [${gathered.toArray().join(',')}], ring got step ${got.step.toArray()[0]} ` +
    `with a gradient on ${got.grad.device}: ${ok ? 'ok' : 'WRONG'}`
  );
}
