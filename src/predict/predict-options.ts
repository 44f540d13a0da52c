/**
 * The `predict` option of spawnThreads, rankTest, launchProcesses and
 * `tensorcomm run --predict`, checked once by the launcher and handed to every
 * rank resolved: the topology as a full spec (a preset's or a file's
 * contents, so ranks on other machines or in other folders read nothing) and
 * absolute output paths.
 */
import { resolve } from 'node:path';
import { checkOptionKeys } from '../runtime/option-keys.ts';
import { loadTopology, type TopologyInput, type TopologySpec } from './topology.ts';

export interface PredictOptions {
  /** A preset's name ('h100-nvlink', ...), a spec, or a .yaml / .json file (docs/guides/prediction.md). */
  topology: TopologyInput;
  /** Where the report (JSON) goes; written by rank 0 once every rank's main returned. */
  report?: string;
  /** Where the predicted timeline goes, as a Perfetto / Chrome trace. */
  trace?: string;
}

const PREDICT_KEYS = { topology: true, report: true, trace: true } as const satisfies Record<
  keyof PredictOptions,
  true
>;

/** What every rank gets: plain data, structured-cloneable and JSON-able. */
export interface ResolvedPredictOptions {
  topology: TopologySpec;
  report?: string;
  trace?: string;
}

export function checkPredictOptions(
  options: PredictOptions | undefined,
  worldSize: number,
  where: string,
): ResolvedPredictOptions | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(
      `${where}: predict must be an object ({ topology, report?, trace? }), got ${String(options)}`,
    );
  }
  checkOptionKeys(options, PREDICT_KEYS, `${where}: predict`);
  const topology = loadTopology(options.topology);
  if (worldSize > topology.gpus) {
    throw new RangeError(
      `${where}: the job has ${worldSize} ranks but topology "${topology.name}" has ${topology.gpus} GPUs`,
    );
  }
  return {
    topology: topology.spec,
    report: outputPath(options.report, 'report', where),
    trace: outputPath(options.trace, 'trace', where),
  };
}

function outputPath(path: unknown, key: string, where: string): string | undefined {
  if (path === undefined) return undefined;
  if (typeof path !== 'string' || path === '') {
    throw new TypeError(`${where}: predict.${key} must be a file path, got ${JSON.stringify(path)}`);
  }
  return resolve(path);
}
