/** The rank of the start-up bench as a TypeScript entry (types and a relative import): one barrier, then done. */

import { median } from '../src/cli/bench/median.ts';
import type { RankContext } from '../src/index.ts';

export default async function main(ctx: RankContext): Promise<number> {
  await ctx.world.barrier();
  return median([ctx.rank]);
}
