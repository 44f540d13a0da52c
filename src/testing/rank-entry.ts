/**
 * The rank threads' entry of every rankTest job (RankThreadPool runs it):
 * finds the body vitest's thread means in the test file, imported in this
 * thread with 'vitest' pointed at the stand-in, and runs it on this rank.
 */
import type { RankContext } from '../context/rank-context.ts';
import { UnfinishedWorkError } from '../runtime/errors.ts';
import { rankFaults } from '../runtime/faults/injector.ts';
import { findRankTest, loadTestFile, type RankTestId } from './registry.ts';
import { redirectVitest } from './vitest-redirect.ts';

/** Before a thread's first job of a file (RankThreadPool's prepare): loads the file, so no job pays for it. */
export async function prepare(file: string): Promise<void> {
  redirectVitest();
  await loadTestFile(file);
}

export default async function main(ctx: RankContext, id: RankTestId): Promise<void> {
  redirectVitest();
  const body = await findRankTest(id);
  await body(ctx);
  // A fault that never fired tests nothing: the test would pass for the wrong reason.
  const unfired = rankFaults()?.unfired() ?? [];
  if (unfired.length > 0) {
    throw new UnfinishedWorkError(
      `${unfired.join('; ')} never fired: rank ${ctx.rank} made fewer such calls before its body returned`,
    );
  }
}
