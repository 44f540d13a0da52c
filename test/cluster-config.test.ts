/** loadClusterConfig / checkClusterConfig: defaults, camelCase output, and every rule's error naming its key. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterConfigError, loadClusterConfig } from '../src/index.ts';
import { checkClusterConfig } from '../src/runtime/config/load.ts';

const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const compression = (extra: Record<string, unknown>) =>
  loadClusterConfig({ cluster: { collective: { tensor_compression: extra } } });
const netem = (extra: Record<string, unknown>) =>
  loadClusterConfig({
    cluster: {
      net_emulation: { groups: { a: { workers: ['w0'], uplink_mbps: 8, downlink_mbps: 8 } }, ...extra },
    },
  });

function keyOf(load: () => unknown): string {
  try {
    load();
  } catch (error) {
    expect(error).toBeInstanceOf(ClusterConfigError);
    expect((error as Error).message).toContain((error as ClusterConfigError).key);
    return (error as ClusterConfigError).key;
  }
  throw new Error('expected a ClusterConfigError');
}

describe('loadClusterConfig', () => {
  it('reads YAML and JSON files into camelCase with defaults filled', () => {
    const yaml = join(dir, 'c.yaml');
    writeFileSync(
      yaml,
      [
        'cluster:',
        '  collective:',
        '    tensor_compression: { codec: zstd, level: 3 }',
        '  net_emulation:',
        '    mode: account',
        '    groups:',
        '      t: { workers: [a, b], uplink_mbps: 1000, downlink_mbps: 500 }',
        '      r: { workers: [c], uplink_mbps: 100, downlink_mbps: 100 }',
        '    latency:',
        '      - { from: t, to: r, one_way_ms: 20 }',
      ].join('\n'),
    );
    expect(loadClusterConfig(yaml)).toEqual({
      collective: {
        tensorCompression: {
          codec: 'zstd',
          enabled: true,
          minBytes: 16384,
          excludedDtypes: ['float32'],
          level: 3,
          maxInflight: 4,
        },
        tensorBufferPool: { maxBytes: 2 ** 31 },
      },
      netEmulation: {
        mode: 'account',
        groups: {
          t: { workers: ['a', 'b'], uplinkMbps: 1000, downlinkMbps: 500 },
          r: { workers: ['c'], uplinkMbps: 100, downlinkMbps: 100 },
        },
        latency: [{ from: 't', to: 'r', oneWayMs: 20 }],
      },
    });
    const json = join(dir, 'c.json');
    writeFileSync(
      json,
      JSON.stringify({
        cluster: {
          collective: {
            tensor_compression: { codec: 'lz4', excluded_dtypes: [] },
            tensor_buffer_pool: { max_bytes: 1024 },
          },
        },
      }),
    );
    expect(loadClusterConfig(json).collective).toEqual({
      tensorCompression: {
        codec: 'lz4',
        enabled: true,
        minBytes: 16384,
        excludedDtypes: [],
        acceleration: 1,
      },
      tensorBufferPool: { maxBytes: 1024 },
    });
    expect(loadClusterConfig({ cluster: {} })).toEqual({ collective: {} });
    expect(netem({}).netEmulation?.mode).toBe('real');
  });

  it('names the key of every bad value', () => {
    const cases: Array<[() => unknown, string]> = [
      [() => loadClusterConfig({ cluster: {}, extra: 1 }), 'extra'],
      [() => loadClusterConfig({ cluster: { colective: {} } }), 'cluster.colective'],
      [() => loadClusterConfig({ cluster: { collective: { pool: {} } } }), 'cluster.collective.pool'],
      [() => compression({}), 'cluster.collective.tensor_compression.codec'],
      [() => compression({ codec: 'gzip' }), 'cluster.collective.tensor_compression.codec'],
      [
        () => compression({ codec: 'lz4', max_inflight: 2 }),
        'cluster.collective.tensor_compression.max_inflight',
      ],
      [
        () => compression({ codec: 'zstd', acceleration: 2 }),
        'cluster.collective.tensor_compression.acceleration',
      ],
      [
        () => compression({ codec: 'lz4', acceleration: 0 }),
        'cluster.collective.tensor_compression.acceleration',
      ],
      [() => compression({ codec: 'zstd', level: 0 }), 'cluster.collective.tensor_compression.level'],
      [() => compression({ codec: 'zstd', level: 23 }), 'cluster.collective.tensor_compression.level'],
      [
        () => compression({ codec: 'zstd', max_inflight: 0 }),
        'cluster.collective.tensor_compression.max_inflight',
      ],
      [
        () => compression({ codec: 'zstd', max_inflight: 1.5 }),
        'cluster.collective.tensor_compression.max_inflight',
      ],
      [() => compression({ codec: 'lz4', min_bytes: -1 }), 'cluster.collective.tensor_compression.min_bytes'],
      [() => compression({ codec: 'lz4', enabled: 'yes' }), 'cluster.collective.tensor_compression.enabled'],
      [
        () => compression({ codec: 'lz4', excluded_dtypes: 'float32' }),
        'cluster.collective.tensor_compression.excluded_dtypes',
      ],
      [
        () => compression({ codec: 'lz4', excluded_dtypes: ['float8'] }),
        'cluster.collective.tensor_compression.excluded_dtypes[0]',
      ],
      [() => compression({ codec: 'lz4', level: 1 }), 'cluster.collective.tensor_compression.level'],
      [
        () => loadClusterConfig({ cluster: { collective: { tensor_buffer_pool: { max_bytes: 0 } } } }),
        'cluster.collective.tensor_buffer_pool.max_bytes',
      ],
      [() => netem({ mode: 'fast' }), 'cluster.net_emulation.mode'],
      [() => netem({ jitter: 1 }), 'cluster.net_emulation.jitter'],
      [
        () => netem({ latency: [{ from: 'a', to: 'b', one_way_ms: 1 }] }),
        'cluster.net_emulation.latency[0].to',
      ],
      [
        () => netem({ latency: [{ from: 'a', to: 'a', one_way_ms: -1 }] }),
        'cluster.net_emulation.latency[0].one_way_ms',
      ],
      [() => netem({ latency: { from: 'a' } }), 'cluster.net_emulation.latency'],
      [
        () =>
          loadClusterConfig({
            cluster: {
              net_emulation: { groups: { a: { workers: ['w'], uplink_mbps: 0, downlink_mbps: 1 } } },
            },
          }),
        'cluster.net_emulation.groups.a.uplink_mbps',
      ],
      [
        () =>
          loadClusterConfig({
            cluster: {
              net_emulation: {
                groups: {
                  a: { workers: ['w'], uplink_mbps: 1, downlink_mbps: 1 },
                  b: { workers: ['w'], uplink_mbps: 1, downlink_mbps: 1 },
                },
              },
            },
          }),
        'cluster.net_emulation.groups.b.workers',
      ],
      [
        () => loadClusterConfig({ cluster: { net_emulation: { groups: {} } } }),
        'cluster.net_emulation.groups',
      ],
    ];
    for (const [load, key] of cases) expect(keyOf(load)).toBe(key);
    expect(() => compression({ codec: 'zstd', acceleration: 2 })).toThrow(
      /parameter of codec lz4, not of zstd/,
    );
  });

  it('reports unreadable and unparsable files by path', () => {
    expect(() => loadClusterConfig(join(dir, 'missing.yaml'))).toThrow(/cannot read .*missing\.yaml/);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'cluster: [unclosed');
    expect(() => loadClusterConfig(bad)).toThrow(/bad\.yaml is not YAML or JSON/);
  });

  it('checkClusterConfig validates camelCase configs written in code, naming camelCase keys', () => {
    expect(
      checkClusterConfig({ collective: { tensorCompression: { codec: 'lz4' } } }).collective.tensorBufferPool,
    ).toEqual({
      maxBytes: 2 ** 31,
    });
    expect(
      keyOf(() =>
        checkClusterConfig({ collective: { tensorCompression: { codec: 'zstd', maxInflight: 0 } } }),
      ),
    ).toBe('config.collective.tensorCompression.maxInflight');
    expect(keyOf(() => checkClusterConfig({ collective: { tensor_compression: {} } }))).toBe(
      'config.collective.tensor_compression',
    );
  });
});
