/**
 * The whole bench: reduction kernels, collectives between rank threads, 4 B
 * calls between two rank threads in rounds alternating with Open MPI's, many
 * thread ranks per core beside Open MPI, then the anchors (node primitives,
 * gloo, Open MPI) from the same run, tensorcomm beside them, and the goals as
 * ratios.
 *
 *   npx tsx bench/run.ts [--quick] [--json <file>] [--node <major>|all]
 *
 * With --node, only the start-up and 4 B rows, on that Node (or each one
 * tools/node pins), beside the machine's (bench/node-versions.ts).
 *
 * The parts run one after another: each wants the machine's cores to itself.
 */
import { availableParallelism, cpus } from 'node:os';
import { runAnchors } from './anchors.ts';
import { isMainModule, type Log, parseBenchArgs, writeJson } from './cli.ts';
import { runCollectivesBench } from './collectives.ts';
import { evaluateGoals, printComparison, printGoals } from './compare.ts';
import { runCompressionBench } from './compression.ts';
import { runDebugOverhead } from './debug-overhead.ts';
import { main as runKernels } from './kernels.ts';
import { main as runNodeVersions } from './node-versions.ts';
import { runOversubscribedApart } from './oversubscribed.ts';
import { runSmallCallsBench } from './small-calls.ts';
import { runStartupBench } from './startup.ts';

export async function main(argv: readonly string[] = process.argv.slice(2), log: Log = console.log) {
  const args = parseBenchArgs(argv, 'bench/run');
  if (args.node !== undefined) return runNodeVersions(argv, log);
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
  const timed = async <T>(part: string, run: () => T | Promise<T>): Promise<T> => {
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
  const oversubscribed = await timed('oversubscribed', () =>
    runOversubscribedApart({ quick: args.quick, log }),
  );
  const anchors = await timed('anchors', () => runAnchors({ quick: args.quick, log }));
  const compression = await timed('compression', () => runCompressionBench({ quick: args.quick, log }));
  const debugChecks = await timed('debug checks', () => runDebugOverhead({ quick: args.quick, log }));
  const startup = await timed('start-up', () => runStartupBench({ quick: args.quick, log }));
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
    oversubscribed,
    anchors,
    goals,
    compression,
    debugChecks,
    startup,
  };
  if (args.json !== undefined) await writeJson(args.json, report, log);
  return report;
}

if (isMainModule(import.meta.url)) await main();
