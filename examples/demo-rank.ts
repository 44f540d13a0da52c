/** One rank of the demo: an allReduce, an allGather, a subgroup and a ring of point-to-point sends. */
import { type RankContext, Tensor } from 'tensorcomm';

export default async function main(ctx: RankContext, args: { elements: number }): Promise<string> {
  const { world, rank, worldSize } = ctx;

  // Every rank contributes rank + 1; the sum is the same everywhere.
  const grad = Tensor.full([args.elements], rank + 1, 'float32');
  await world.allReduce(grad, { op: 'sum' });

  const names = (await world.allGatherObject(ctx.name)) as string[];

  // Even ranks form a subgroup and agree on their largest rank.
  const evens = await ctx.newGroup(Array.from({ length: worldSize }, (_, r) => r).filter((r) => r % 2 === 0));
  const top = Tensor.full([1], rank, 'int32');
  if (evens.isMember) await evens.allReduce(top, { op: 'max' });

  // A ring: send to the right, receive from the left, both in flight at once.
  const fromLeft = Tensor.zeros([1], 'int64');
  await Promise.all(
    world.batchIsendIrecv([
      { op: 'isend', tensor: Tensor.full([1], BigInt(rank), 'int64'), peer: (rank + 1) % worldSize },
      { op: 'irecv', tensor: fromLeft, peer: (rank + worldSize - 1) % worldSize },
    ]),
  );

  return (
    `${ctx.name}: allReduce sum = ${grad.data[0]} (expected ${(worldSize * (worldSize + 1)) / 2}), ` +
    `peers = [${names.join(', ')}], ` +
    `${evens.isMember ? `max even rank = ${top.data[0]}, ` : ''}` +
    `ring received ${fromLeft.data[0]}`
  );
}
