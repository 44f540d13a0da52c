/**
 * loadTopology: a preset's name, a preset with fields replaced, a full spec, or a YAML/JSON file of
 * either, validated into a Topology: nodes of GPUs, their links, and where each rank sits.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { TopologyError } from './errors.ts';
import { checkTopologySpec } from './topology-checks.ts';
import { PRESETS } from './topology-presets.ts';
import {
  type GpuPlacement,
  type ResolvedTopologySpec,
  TOPOLOGY_PRESETS,
  type TopologyPresetName,
  type TopologyPresetRef,
  type TopologySpec,
} from './topology-spec.ts';

/** The shape users write, beside the Topology it loads into. */
export type { TopologySpec };

/** A validated topology, as predictCollective and predict mode take it. */
export interface Topology {
  /** A preset's name, or the spec's `name`. */
  readonly name: string;
  readonly nodes: number;
  readonly gpusPerNode: number;
  /** nodes x gpusPerNode. */
  readonly gpus: number;
  /** The spec with every default filled in. */
  readonly spec: ResolvedTopologySpec;
  /** Where rank `rank` runs; a RangeError for a rank the topology has no GPU for. */
  placementOf(rank: number): GpuPlacement;
}

/** Everything loadTopology accepts. */
export type TopologyInput = TopologyPresetName | string | TopologySpec | TopologyPresetRef | Topology;

const FILE = /\.(ya?ml|json)$/i;

class LoadedTopology implements Topology {
  readonly name: string;
  readonly nodes: number;
  readonly gpusPerNode: number;
  readonly gpus: number;

  constructor(readonly spec: ResolvedTopologySpec) {
    this.name = spec.name;
    this.nodes = spec.nodes;
    this.gpusPerNode = spec.gpusPerNode;
    this.gpus = spec.nodes * spec.gpusPerNode;
    // Predictions are cached per topology: it must not change under them.
    for (const part of [spec.intraNode, spec.interNode, ...(spec.placement ?? []), spec.placement, spec]) {
      if (part) Object.freeze(part);
    }
    Object.freeze(this);
  }

  placementOf(rank: number): GpuPlacement {
    if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 0) {
      throw new RangeError(`topology '${this.name}': a rank is an integer >= 0, got ${String(rank)}`);
    }
    const { placement } = this.spec;
    if (placement) {
      const at = placement[rank];
      if (!at) {
        throw new RangeError(
          `topology '${this.name}' places ${placement.length} ranks (its placement); rank ${rank} has no GPU`,
        );
      }
      return { ...at };
    }
    if (rank >= this.gpus) {
      throw new RangeError(`topology '${this.name}' has ${this.gpus} GPUs; rank ${rank} has none`);
    }
    return { node: Math.floor(rank / this.gpusPerNode), gpu: rank % this.gpusPerNode };
  }
}

function presetOf(name: unknown, source: string | undefined): TopologySpec {
  if (typeof name === 'string' && (TOPOLOGY_PRESETS as readonly string[]).includes(name)) {
    return PRESETS[name as TopologyPresetName];
  }
  throw new TopologyError(
    'topology.preset',
    `unknown preset ${JSON.stringify(name)}; presets: ${TOPOLOGY_PRESETS.join(', ')}`,
    { source },
  );
}

const isMapping = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `intraNode` and `interNode` merge field by field; other fields replace the preset's. */
function withOverrides(preset: TopologySpec, overrides: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...preset, ...overrides };
  for (const link of ['intraNode', 'interNode'] as const) {
    if (isMapping(preset[link]) && isMapping(overrides[link]))
      merged[link] = { ...preset[link], ...overrides[link] };
  }
  return merged;
}

/** A spec or a preset reference (an object with `preset`), as code or a file gives it. */
function fromDocument(document: unknown, source: string | undefined): Topology {
  if (isMapping(document) && 'preset' in document) {
    const { preset, ...overrides } = document;
    return new LoadedTopology(checkTopologySpec(withOverrides(presetOf(preset, source), overrides), source));
  }
  return new LoadedTopology(checkTopologySpec(document, source));
}

/**
 * yaml on first use, not on import: predict mode loads this module in every rank thread (as
 * runtime/config/load.ts does for the same reason).
 */
function parseYaml(text: string): unknown {
  return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);
}

function fromFile(path: string): Topology {
  const source = `topology file ${path}`;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new TopologyError('(file)', `cannot be read: ${(error as Error).message}`, {
      source,
      cause: error,
    });
  }
  let document: unknown;
  try {
    // YAML parses JSON too; a .json file is held to JSON.
    document = /\.json$/i.test(path) ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new TopologyError(
      '(file)',
      `is not valid ${/\.json$/i.test(path) ? 'JSON' : 'YAML'}: ${(error as Error).message}`,
      {
        source,
        cause: error,
      },
    );
  }
  return fromDocument(document, source);
}

/**
 * A topology from a preset name ('h100-nvlink', 'h200-nvlink', 'a100-nvlink', 'h100-ib'), a path
 * ending .yaml, .yml or .json (read synchronously), a preset with fields replaced
 * (`{ preset: 'h100-ib', nodes: 4 }`), or a full TopologySpec. A Topology is returned as is.
 */
export function loadTopology(source: TopologyInput): Topology {
  if (source instanceof LoadedTopology) return source;
  if (typeof source === 'string') {
    if (FILE.test(source)) return fromFile(source);
    if (!(TOPOLOGY_PRESETS as readonly string[]).includes(source)) {
      throw new TopologyError(
        'topology.preset',
        `unknown preset ${JSON.stringify(source)}; presets: ${TOPOLOGY_PRESETS.join(', ')} (or a path ending .yaml, .yml or .json)`,
      );
    }
    return fromDocument({ preset: source }, undefined);
  }
  if (!isMapping(source)) {
    throw new TypeError(
      `loadTopology: expected a preset name, a file path, a TopologySpec or { preset, ... }, got ${source === null ? 'null' : typeof source}`,
    );
  }
  return fromDocument(source, undefined);
}
