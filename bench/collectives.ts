/**
 * Collective latency and bandwidth between rank threads, printed as
 * nccl-tests tables, plus the zero-copy destGet next to a plain copy.
 *
 *   npx tsx bench/collectives.ts [--quick] [--json <file>]
 *
 * The bench itself lives in src/cli/bench/ so that `npx tensorcomm bench`
 * ships it; this script is its entry in the repository's bench suite.
 */
import { runCollectivesBench } from '../src/cli/bench/collectives.ts';
import { benchMain, isMainModule } from './cli.ts';

export {
  busFactor,
  COLLECTIVE_OPS,
  type CollectiveOp,
  type CollectiveRow,
  type CollectivesOptions,
  type CollectivesReport,
  printCollectiveTable,
  printZeroCopyTable,
  runCollectivesBench,
  type ZeroCopySample,
} from '../src/cli/bench/collectives.ts';

export const main = benchMain('bench/collectives', runCollectivesBench);

if (isMainModule(import.meta.url)) await main();
