/**
 * Exact validation of a topology: a wrong type or value and an unknown key are a TopologyError naming
 * the field's full path (`topology.interNode.nics`) and what was found; defaults are filled in.
 */
import { TopologyError } from './errors.ts';
import { PCIE_X16_BW } from './nccl-tuning.ts';
import type {
  AlphaBetaRates,
  GpuPlacement,
  InterNodeLink,
  IntraNodeLink,
  ResolvedTopologySpec,
} from './topology-spec.ts';

const TOP_KEYS = [
  'name',
  'nodes',
  'gpusPerNode',
  'placement',
  'computeCapability',
  'intraNode',
  'interNode',
  'nvls',
  'launchOverheadUs',
];
const RATE_KEYS = ['duplexGBps', 'reduceGBps'] as const;
const INTRA_KEYS = ['kind', 'bandwidthGBps', 'latencyUs', ...RATE_KEYS];
const INTER_KEYS = ['kind', 'bandwidthGBps', 'latencyUs', 'nics', 'pcieGBps', ...RATE_KEYS];
const INTRA_KINDS: readonly IntraNodeLink['kind'][] = ['nvlink', 'pcie', 'alpha-beta'];
const INTER_KINDS: readonly InterNodeLink['kind'][] = ['ib', 'roce', 'ethernet', 'alpha-beta'];
/** Kinds priced by the alpha-beta model, whose latency is its alpha and so must be given. */
const ALPHA_BETA_KINDS: readonly string[] = ['ethernet', 'alpha-beta'];

type Fields = Record<string, unknown>;

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return 'a list';
  if (value !== null && typeof value === 'object') return 'a mapping';
  return String(value);
}

/** Reads fields of one mapping of the topology, failing with the field's path. */
class Checker {
  constructor(private readonly source: string | undefined) {}

  fail(key: string, problem: string): never {
    throw new TopologyError(key, problem, { source: this.source });
  }

  mapping(value: unknown, path: string, allowed: readonly string[]): Fields {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.fail(path, `expected a mapping, got ${describe(value)}`);
    }
    for (const key of Object.keys(value)) {
      if (!allowed.includes(key))
        this.fail(`${path}.${key}`, `unknown key (expected one of ${allowed.join(', ')})`);
    }
    return value as Fields;
  }

  integer(value: unknown, path: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      const range =
        min === 1 && max === Number.MAX_SAFE_INTEGER
          ? 'a positive integer'
          : max === Number.MAX_SAFE_INTEGER
            ? `an integer of at least ${min}`
            : `an integer from ${min} to ${max}`;
      this.fail(path, `expected ${range}, got ${describe(value)}`);
    }
    return value;
  }

  positive(value: unknown, path: string): number {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      this.fail(path, `expected a positive finite number, got ${describe(value)}`);
    }
    return value;
  }

  nonNegative(value: unknown, path: string): number {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      this.fail(path, `expected a finite number >= 0, got ${describe(value)}`);
    }
    return value;
  }

  oneOf<T extends string>(value: unknown, path: string, choices: readonly T[]): T {
    if (!choices.includes(value as T)) {
      this.fail(path, `expected one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${describe(value)}`);
    }
    return value as T;
  }

  boolean(value: unknown, path: string): boolean {
    if (typeof value !== 'boolean') this.fail(path, `expected true or false, got ${describe(value)}`);
    return value;
  }

  name(value: unknown, path: string): string {
    if (typeof value !== 'string' || value.trim() === '') {
      this.fail(path, `expected a non-empty string, got ${describe(value)}`);
    }
    return value;
  }
}

/** The alpha-beta rates a link gives, positive; only the kinds among `kinds` that the model prices have them. */
function checkRates(
  check: Checker,
  fields: Fields,
  path: string,
  kinds: readonly string[],
  kind: string,
): AlphaBetaRates {
  const rates: AlphaBetaRates = {};
  for (const key of RATE_KEYS) {
    if (fields[key] === undefined) continue;
    if (!ALPHA_BETA_KINDS.includes(kind)) {
      const priced = kinds.filter((k) => ALPHA_BETA_KINDS.includes(k)).map((k) => `'${k}'`);
      check.fail(
        `${path}.${key}`,
        `only the alpha-beta model has it (kind ${priced.join(' or ')}), not '${kind}'`,
      );
    }
    rates[key] = check.positive(fields[key], `${path}.${key}`);
  }
  return rates;
}

function checkIntra(check: Checker, value: unknown): ResolvedTopologySpec['intraNode'] {
  const fields = check.mapping(value, 'topology.intraNode', INTRA_KEYS);
  const kind = check.oneOf(fields.kind, 'topology.intraNode.kind', INTRA_KINDS);
  const bandwidthGBps = check.positive(fields.bandwidthGBps, 'topology.intraNode.bandwidthGBps');
  if (kind === 'alpha-beta' && fields.latencyUs === undefined) {
    check.fail('topology.intraNode.latencyUs', "required for kind 'alpha-beta' (the model's alpha)");
  }
  const latencyUs = check.nonNegative(fields.latencyUs ?? 0, 'topology.intraNode.latencyUs');
  return {
    kind,
    bandwidthGBps,
    latencyUs,
    ...checkRates(check, fields, 'topology.intraNode', INTRA_KINDS, kind),
  };
}

function checkInter(
  check: Checker,
  value: unknown,
  computeCapability: number,
): NonNullable<ResolvedTopologySpec['interNode']> {
  const fields = check.mapping(value, 'topology.interNode', INTER_KEYS);
  const kind = check.oneOf(fields.kind, 'topology.interNode.kind', INTER_KINDS);
  const bandwidthGBps = check.positive(fields.bandwidthGBps, 'topology.interNode.bandwidthGBps');
  const alphaBeta = ALPHA_BETA_KINDS.includes(kind);
  if (alphaBeta && fields.latencyUs === undefined) {
    check.fail('topology.interNode.latencyUs', `required for kind '${kind}' (the model's alpha)`);
  }
  if (alphaBeta && fields.pcieGBps !== undefined) {
    check.fail('topology.interNode.pcieGBps', "only NCCL's network has it (kinds 'ib' and 'roce')");
  }
  const latencyUs = check.nonNegative(fields.latencyUs ?? 0, 'topology.interNode.latencyUs');
  const nics = check.integer(fields.nics ?? 1, 'topology.interNode.nics', 1);
  // NCCL's kinds refuse the rates here; the alpha-beta model's have no PCIe path, which is left out
  // (not filled in) so that the resolved spec loads back.
  const rates = checkRates(check, fields, 'topology.interNode', INTER_KINDS, kind);
  if (alphaBeta) return { kind, bandwidthGBps, latencyUs, nics, ...rates };
  const defaultPcie = computeCapability >= 90 ? PCIE_X16_BW.gen5 : PCIE_X16_BW.gen4;
  const pcieGBps = check.positive(fields.pcieGBps ?? defaultPcie, 'topology.interNode.pcieGBps');
  return { kind, bandwidthGBps, latencyUs, nics, pcieGBps };
}

function checkPlacement(check: Checker, value: unknown, nodes: number, gpusPerNode: number): GpuPlacement[] {
  if (!Array.isArray(value))
    check.fail('topology.placement', `expected a list of { node, gpu }, got ${describe(value)}`);
  if (value.length > nodes * gpusPerNode) {
    check.fail('topology.placement', `places ${value.length} ranks on ${nodes * gpusPerNode} GPUs`);
  }
  const holder = new Map<string, number>();
  return value.map((entry: unknown, rank) => {
    const path = `topology.placement[${rank}]`;
    const fields = check.mapping(entry, path, ['node', 'gpu']);
    const node = check.integer(fields.node, `${path}.node`, 0, nodes - 1);
    const gpu = check.integer(fields.gpu, `${path}.gpu`, 0, gpusPerNode - 1);
    const other = holder.get(`${node}/${gpu}`);
    if (other !== undefined) check.fail(path, `node ${node} GPU ${gpu} already holds rank ${other}`);
    holder.set(`${node}/${gpu}`, rank);
    return { node, gpu };
  });
}

/** A topology spec (from code or a file) validated, with its defaults. */
export function checkTopologySpec(value: unknown, source?: string): ResolvedTopologySpec {
  const check = new Checker(source);
  const fields = check.mapping(value, 'topology', TOP_KEYS);
  const name = check.name(fields.name, 'topology.name');
  const nodes = check.integer(fields.nodes, 'topology.nodes', 1);
  const gpusPerNode = check.integer(fields.gpusPerNode, 'topology.gpusPerNode', 1);
  const computeCapability = check.integer(fields.computeCapability ?? 90, 'topology.computeCapability', 60);
  const intraNode = checkIntra(check, fields.intraNode);
  if (nodes > 1 && fields.interNode === undefined) {
    check.fail('topology.interNode', `required when nodes > 1 (nodes is ${nodes})`);
  }
  const interNode =
    fields.interNode === undefined ? undefined : checkInter(check, fields.interNode, computeCapability);
  if (intraNode.kind === 'alpha-beta' && interNode && !ALPHA_BETA_KINDS.includes(interNode.kind)) {
    check.fail(
      'topology.interNode.kind',
      `'${interNode.kind}' is NCCL's network, which an 'alpha-beta' intraNode cannot join; use 'ethernet' or 'alpha-beta'`,
    );
  }
  const nvls = check.boolean(fields.nvls ?? false, 'topology.nvls');
  if (nvls && (intraNode.kind !== 'nvlink' || computeCapability < 90)) {
    check.fail('topology.nvls', "NVLink SHARP needs intraNode.kind 'nvlink' and computeCapability >= 90");
  }
  return {
    name,
    nodes,
    gpusPerNode,
    placement:
      fields.placement === undefined
        ? undefined
        : checkPlacement(check, fields.placement, nodes, gpusPerNode),
    computeCapability,
    intraNode,
    interNode,
    nvls,
    launchOverheadUs: check.nonNegative(fields.launchOverheadUs ?? 0, 'topology.launchOverheadUs'),
  };
}
