/**
 * Exact validation of a cluster config: unknown keys, a codec's parameter given
 * to the other codec, wrong types and out-of-range values are a
 * ClusterConfigError naming the key's full path. The same rules read the
 * snake_case file schema and the camelCase object spawnThreads accepts; only
 * the key names differ.
 */
import { DTYPES, type DType } from '../../tensor/dtype.ts';
import { TensorcommError } from '../errors.ts';
import type {
  ClusterConfig,
  CollectiveConfig,
  NetEmulationConfig,
  NetEmulationGroup,
  NetEmulationLatency,
  TensorBufferPoolConfig,
  TensorCompressionConfig,
} from './cluster-config.ts';

/**
 * A cluster config that breaks the schema: an unknown key, a value out of range, a codec's
 * parameter given to the other codec. The message names the key.
 *
 * @see [Errors](../../../docs/errors.md): every error's code, what it means and what to do
 */
export class ClusterConfigError extends TensorcommError {
  override name = 'ClusterConfigError';
  override readonly code: string = 'ERR_TC_CLUSTER_CONFIG';
  /** The offending key's full path, e.g. `cluster.collective.tensor_compression.level`. */
  readonly key: string;

  /** `options.message`: the message in full, for a problem of the whole file (key `(root)`) that says it better. */
  constructor(key: string, problem: string, options?: ErrorOptions & { message?: string }) {
    super(options?.message ?? `cluster config: ${key} ${problem}`, options);
    this.key = key;
  }
}

export type KeyStyle = 'snake' | 'camel';

const GiB = 2 ** 30;
const DEFAULT_POOL_BYTES = 2 * GiB;
const COMMON_COMPRESSION_KEYS = ['enabled', 'codec', 'min_bytes', 'excluded_dtypes'];
const CODEC_KEYS: Record<string, string[]> = {
  lz4: ['acceleration'],
  zstd: ['level', 'max_inflight'],
};
/** LZ4's own ceiling for acceleration (LZ4_ACCELERATION_MAX). */
const MAX_LZ4_ACCELERATION = 65_537;
const MAX_ZSTD_LEVEL = 22;

/** Reads one object of the config, naming keys in the chosen style. */
class Section {
  constructor(
    readonly value: Record<string, unknown>,
    readonly path: string,
    readonly style: KeyStyle,
  ) {}

  static of(value: unknown, path: string, style: KeyStyle): Section {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new ClusterConfigError(path, `must be a mapping, got ${describe(value)}`);
    }
    return new Section(value as Record<string, unknown>, path, style);
  }

  name(snake: string): string {
    return this.style === 'snake' ? snake : snake.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  }

  keyPath(snake: string): string {
    return `${this.path}.${this.name(snake)}`;
  }

  has(snake: string): boolean {
    return this.value[this.name(snake)] !== undefined;
  }

  get(snake: string): unknown {
    return this.value[this.name(snake)];
  }

  /** Fails on the first key not in `allowed`; `misplaced` explains keys that belong elsewhere. */
  only(allowed: readonly string[], misplaced: (snake: string) => string | undefined = () => undefined): void {
    const names = allowed.map((k) => this.name(k));
    for (const key of Object.keys(this.value)) {
      if (names.includes(key)) continue;
      const why = misplaced(key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
      throw new ClusterConfigError(
        `${this.path}.${key}`,
        why ?? `is not a known key (expected one of: ${names.join(', ') || 'none'})`,
      );
    }
  }

  section(snake: string): Section {
    return Section.of(this.get(snake), this.keyPath(snake), this.style);
  }

  integer(snake: string, min: number, max: number, fallback?: number): number {
    const v = this.get(snake) ?? fallback;
    if (!Number.isSafeInteger(v) || (v as number) < min || (v as number) > max) {
      throw new ClusterConfigError(
        this.keyPath(snake),
        `must be an integer in ${min}..${max}, got ${describe(this.get(snake))}`,
      );
    }
    return v as number;
  }

  /** A finite number greater than `above` (or ≥ `atLeast`). */
  number(snake: string, bound: { above?: number; atLeast?: number }, fallback?: number): number {
    const v = this.get(snake) ?? fallback;
    const ok =
      typeof v === 'number' &&
      Number.isFinite(v) &&
      (bound.above === undefined || v > bound.above) &&
      (bound.atLeast === undefined || v >= bound.atLeast);
    if (!ok) {
      const range = bound.above !== undefined ? `> ${bound.above}` : `>= ${bound.atLeast}`;
      throw new ClusterConfigError(
        this.keyPath(snake),
        `must be a finite number ${range}, got ${describe(this.get(snake))}`,
      );
    }
    return v;
  }

  boolean(snake: string, fallback: boolean): boolean {
    const v = this.get(snake) ?? fallback;
    if (typeof v !== 'boolean')
      throw new ClusterConfigError(this.keyPath(snake), `must be true or false, got ${describe(v)}`);
    return v;
  }

  oneOf<T extends string>(snake: string, choices: readonly T[], fallback?: T): T {
    const v = this.get(snake) ?? fallback;
    if (!choices.includes(v as T)) {
      const what = v === undefined ? 'is required' : `is ${describe(v)}`;
      throw new ClusterConfigError(this.keyPath(snake), `${what}; expected one of: ${choices.join(', ')}`);
    }
    return v as T;
  }

  stringList(snake: string, fallback?: string[]): string[] {
    const v = this.get(snake) ?? fallback;
    if (!Array.isArray(v))
      throw new ClusterConfigError(this.keyPath(snake), `must be a list, got ${describe(v)}`);
    v.forEach((item, i) => {
      if (typeof item !== 'string' || item.length === 0) {
        throw new ClusterConfigError(
          `${this.keyPath(snake)}[${i}]`,
          `must be a non-empty string, got ${describe(item)}`,
        );
      }
    });
    return [...v];
  }
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object' && value !== null) return 'a mapping';
  return JSON.stringify(value) ?? String(value);
}

/** `value` is the contents of `cluster` (file schema) or a ClusterConfig (camel); `path` names its root. */
export function parseClusterConfig(value: unknown, path: string, style: KeyStyle): ClusterConfig {
  const cluster = Section.of(value, path, style);
  cluster.only(['collective', 'net_emulation']);
  const collective = cluster.has('collective') ? parseCollective(cluster.section('collective')) : {};
  const config: ClusterConfig = { collective };
  if (cluster.has('net_emulation')) config.netEmulation = parseNetEmulation(cluster.section('net_emulation'));
  return config;
}

function parseCollective(s: Section): CollectiveConfig {
  s.only(['tensor_buffer_pool', 'tensor_compression', 'max_message_bytes']);
  const out: CollectiveConfig = {};
  if (s.has('max_message_bytes')) {
    out.maxMessageBytes = s.integer('max_message_bytes', 0, Number.MAX_SAFE_INTEGER);
  }
  if (s.has('tensor_compression')) out.tensorCompression = parseCompression(s.section('tensor_compression'));
  if (s.has('tensor_buffer_pool')) out.tensorBufferPool = parsePool(s.section('tensor_buffer_pool'));
  else if (out.tensorCompression) out.tensorBufferPool = { maxBytes: DEFAULT_POOL_BYTES };
  return out;
}

function parsePool(s: Section): TensorBufferPoolConfig {
  s.only(['max_bytes']);
  return { maxBytes: s.integer('max_bytes', 1, Number.MAX_SAFE_INTEGER, DEFAULT_POOL_BYTES) };
}

function parseCompression(s: Section): TensorCompressionConfig {
  const codec = s.oneOf('codec', ['lz4', 'zstd'] as const);
  s.only([...COMMON_COMPRESSION_KEYS, ...CODEC_KEYS[codec]], (key) => {
    const owner = Object.keys(CODEC_KEYS).find((c) => CODEC_KEYS[c].includes(key));
    return owner && owner !== codec ? `is a parameter of codec ${owner}, not of ${codec}` : undefined;
  });
  const common = {
    enabled: s.boolean('enabled', true),
    minBytes: s.integer('min_bytes', 0, Number.MAX_SAFE_INTEGER, 16_384),
    excludedDtypes: parseDtypes(s),
  };
  if (codec === 'lz4') {
    return { codec, ...common, acceleration: s.integer('acceleration', 1, MAX_LZ4_ACCELERATION, 1) };
  }
  return {
    codec,
    ...common,
    level: s.integer('level', 1, MAX_ZSTD_LEVEL, 1),
    maxInflight: s.integer('max_inflight', 1, 1024, 4),
  };
}

function parseDtypes(s: Section): DType[] {
  const list = s.stringList('excluded_dtypes', ['float32']);
  list.forEach((d, i) => {
    if (!DTYPES.includes(d as DType)) {
      throw new ClusterConfigError(
        `${s.keyPath('excluded_dtypes')}[${i}]`,
        `is ${JSON.stringify(d)}, not a dtype (${DTYPES.join(', ')})`,
      );
    }
  });
  return list as DType[];
}

function parseNetEmulation(s: Section): NetEmulationConfig {
  s.only(['mode', 'groups', 'latency']);
  const mode = s.oneOf('mode', ['real', 'account'] as const, 'real');
  const groupsSection = s.section('groups');
  const groups: Record<string, NetEmulationGroup> = {};
  const owner = new Map<string, string>();
  for (const name of Object.keys(groupsSection.value)) {
    const g = Section.of(groupsSection.value[name], `${groupsSection.path}.${name}`, s.style);
    g.only(['workers', 'uplink_mbps', 'downlink_mbps']);
    const workers = g.stringList('workers');
    if (workers.length === 0)
      throw new ClusterConfigError(g.keyPath('workers'), 'must name at least one worker');
    for (const w of workers) {
      const other = owner.get(w);
      if (other !== undefined) {
        throw new ClusterConfigError(
          g.keyPath('workers'),
          `names worker "${w}", already in group "${other}"`,
        );
      }
      owner.set(w, name);
    }
    groups[name] = {
      workers,
      uplinkMbps: g.number('uplink_mbps', { above: 0 }),
      downlinkMbps: g.number('downlink_mbps', { above: 0 }),
    };
  }
  if (Object.keys(groups).length === 0)
    throw new ClusterConfigError(groupsSection.path, 'must define a group');
  const latency = parseLatency(s, groups);
  return { mode, groups, latency };
}

function parseLatency(s: Section, groups: Record<string, NetEmulationGroup>): NetEmulationLatency[] {
  if (!s.has('latency')) return [];
  const list = s.get('latency');
  if (!Array.isArray(list))
    throw new ClusterConfigError(s.keyPath('latency'), `must be a list, got ${describe(list)}`);
  const seen = new Set<string>();
  return list.map((item, i) => {
    const e = Section.of(item, `${s.keyPath('latency')}[${i}]`, s.style);
    e.only(['from', 'to', 'one_way_ms']);
    const from = e.oneOf('from', Object.keys(groups));
    const to = e.oneOf('to', Object.keys(groups));
    if (seen.has(`${from}>${to}`)) throw new ClusterConfigError(e.path, `repeats the pair ${from} -> ${to}`);
    seen.add(`${from}>${to}`);
    return { from, to, oneWayMs: e.number('one_way_ms', { atLeast: 0 }) };
  });
}
