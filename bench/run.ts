/**
 * The whole bench: reduction kernels, collectives between rank threads, 4 B
 * calls between two rank threads in rounds alternating with Open MPI's, small
 * calls from a fresh job's first on (cold) and far in (warm) beside Open MPI's, many
 * thread ranks per core beside Open MPI, then the anchors (node primitives,
 * gloo, Open MPI) from the same run, tensorcomm beside them, and the goals as
 * ratios.
 *
 *   npx tsx bench/run.ts [--quick] [--json <file>] [--node <major>|all] [--markdown <file>]
 *
 * With --node, only the start-up and 4 B rows, on that Node (or each one
 * tools/node pins), beside the machine's (bench/node-versions.ts). With
 * --markdown, the layers' benches and every Node version's rows run too, and
 * every table goes to that page (docs/benchmarks.md), the headline figures
 * to the README's table (bench/benchmarks-page.ts).
 *
 * The parts run one after another: each wants the machine's cores to itself.
 */

import { readFile, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { anchorVersions } from './anchor-versions.ts';
import { runAnchors } from './anchors.ts';
import { BenchPage, replaceBetweenMarkers } from './benchmarks-page.ts';
import { isMainModule, type Log, parseBenchArgs, writeJson } from './cli.ts';
import { runColdCallsBench } from './cold-calls.ts';
import { runCollectivesBench } from './collectives.ts';
import { evaluateGoals, printComparison, printGoals } from './compare.ts';
import { runCompressionBench } from './compression.ts';
import { runDebugOverhead } from './debug-overhead.ts';
import { runFileStoreBench } from './file-store.ts';
import { headlineMarkdown } from './headline.ts';
import { main as runKernels } from './kernels.ts';
import { main as runNodeVersions, runNodeVersionsBench } from './node-versions.ts';
import { runNodesBench } from './nodes.ts';
import { runOversubscribedApart } from './oversubscribed.ts';
import { runP2PBench } from './p2p.ts';
import { PART_METHODS } from './part-methods.ts';
import { runPredictAccuracy } from './predict.ts';
import { runPredictCost } from './predict-cost.ts';
import { runProcessSmallCallsBench } from './process-small-calls.ts';
import { runSmallCallsBench } from './small-calls.ts';
import { runStartupBench } from './startup.ts';
import { runWeightSyncBench } from './weight-sync.ts';
import { runWeightSyncNodesBench } from './weight-sync-nodes.ts';

const README = new URL('../README.md', import.meta.url);

type Timed = <T>(part: string, run: () => T | Promise<T>) => Promise<T>;

/** The parts only a page run adds: the layers above the collectives, and the rows of each Node version. */
async function runLayerParts(quick: boolean, timed: Timed, log: Log) {
  return {
    p2p: await timed('p2p messages', () => runP2PBench({ quick, log })),
    fileStore: await timed('file store', () => runFileStoreBench({ quick, log })),
    weightSync: await timed('weight sync', () => runWeightSyncBench({ quick, log })),
    nodes: await timed('across nodes', () => runNodesBench({ quick, log })),
    weightSyncNodes: await timed('weight sync across nodes', () => runWeightSyncNodesBench({ quick, log })),
    predictAccuracy: await timed('prediction against measured runs', () =>
      runPredictAccuracy({ quick, log }),
    ),
    predictCost: await timed('predict mode cost', () => runPredictCost({ quick, log })),
    nodeVersions: await timed('Node versions', () => runNodeVersionsBench({ node: 'all', quick, log })),
  };
}

export async function main(argv: readonly string[] = process.argv.slice(2), print: Log = console.log) {
  const args = parseBenchArgs(argv, 'bench/run');
  if (args.node !== undefined) return runNodeVersions(argv, print);
  const page = args.markdown === undefined ? undefined : new BenchPage();
  const log = page?.recorder(print) ?? print;
  const started = performance.now();
  const machine = {
    node: process.version,
    arch: process.arch,
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    date: new Date().toISOString(),
  };
  log(
    `# tensorcomm bench${args.quick ? ' (--quick)' : ''}: node ${machine.node}, ${machine.cpus} x ${machine.cpuModel}`,
  );
  log('');
  const seconds: Record<string, number> = {};
  /** Runs one part of the bench and notes how long it took (in the JSON too: the full run takes minutes). */
  const timed: Timed = async (part, run) => {
    page?.begin(part);
    const partStarted = performance.now();
    const result = await run();
    seconds[part] = (performance.now() - partStarted) / 1000;
    log(`# ${part} took ${seconds[part].toFixed(1)} s`);
    log('');
    return result;
  };
  const kernels = await timed('kernels', () => runKernels(args.quick ? ['--quick'] : [], log));
  const collectives = await timed('collectives', () => runCollectivesBench({ quick: args.quick, log }));
  const processes = await timed('collectives in processes', () =>
    runCollectivesBench({
      store: 'file',
      quick: args.quick,
      worldSizes: [2],
      ops: ['allReduce', 'sendRecv'],
      zeroCopy: false,
      log,
    }),
  );
  const smallCalls = await timed('small calls beside Open MPI', () =>
    runSmallCallsBench({ quick: args.quick, log }),
  );
  const coldCalls = await timed('cold vs warm calls beside Open MPI', () =>
    runColdCallsBench({ quick: args.quick, log }),
  );
  const processCalls = await timed(
    'process and node ranks: cold vs warm calls beside gloo and Open MPI',
    () => runProcessSmallCallsBench({ quick: args.quick, log }),
  );
  const oversubscribed = await timed('oversubscribed', () =>
    runOversubscribedApart({ quick: args.quick, log }),
  );
  const anchors = await timed('anchors', () => runAnchors({ quick: args.quick, log }));
  const compression = await timed('compression', () => runCompressionBench({ quick: args.quick, log }));
  const debugChecks = await timed('debug checks', () => runDebugOverhead({ quick: args.quick, log }));
  const startup = await timed('start-up', () => runStartupBench({ quick: args.quick, log }));
  const layers = page && (await runLayerParts(args.quick, timed, log));
  page?.begin('tensorcomm beside the anchors');
  printComparison(collectives, anchors, log);
  printComparison(processes, anchors, log, 'processes (FileTensorStore)');
  const goals = evaluateGoals(collectives, anchors, processes);
  printGoals(goals, log);
  seconds.total = (performance.now() - started) / 1000;
  log(`# bench took ${seconds.total.toFixed(1)} s`);
  const report = {
    quick: args.quick,
    machine,
    seconds,
    kernels,
    collectives,
    processes,
    smallCalls,
    coldCalls,
    processCalls,
    oversubscribed,
    anchors,
    goals,
    compression,
    debugChecks,
    startup,
    ...layers,
  };
  if (args.json !== undefined) await writeJson(args.json, report, log);
  if (page && args.markdown !== undefined) {
    await writeFile(args.markdown, page.markdown(machine, await anchorVersions(), PART_METHODS));
    const readme = await readFile(README, 'utf8');
    await writeFile(
      README,
      replaceBetweenMarkers(
        readme,
        'headline',
        headlineMarkdown({ smallCalls, coldCalls, processCalls, goals, startup }),
      ),
    );
    log(`# every table written to ${args.markdown}, the headline figures to README.md`);
  }
  return report;
}

if (isMainModule(import.meta.url)) await main();
