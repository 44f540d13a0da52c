/** loadTopology: presets, overrides, files, placement, and every validation error naming its field. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadTopology, TopologyError, type TopologySpec } from '../../src/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-topology-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spec: TopologySpec = {
  name: 'two pcie nodes',
  nodes: 2,
  gpusPerNode: 4,
  computeCapability: 80,
  intraNode: { kind: 'pcie', bandwidthGBps: 24 },
  interNode: { kind: 'roce', bandwidthGBps: 25, nics: 2 },
};

/** The TopologyError `load` throws: its key, and a message that names the key. */
function failure(load: () => unknown): { key: string; message: string } {
  try {
    load();
  } catch (error) {
    expect(error).toBeInstanceOf(TopologyError);
    const { key, message, code } = error as TopologyError;
    expect(code).toBe('ERR_TC_TOPOLOGY');
    expect(message).toContain(key);
    return { key, message };
  }
  throw new Error('expected a TopologyError');
}

describe('presets', () => {
  it('one node of 8 H100, H200 or A100 on NVLink, as NCCL counts NVLink', () => {
    const h100 = loadTopology('h100-nvlink');
    expect(h100).toMatchObject({ name: 'h100-nvlink', nodes: 1, gpusPerNode: 8, gpus: 8 });
    expect(h100.spec).toMatchObject({
      computeCapability: 90,
      intraNode: { kind: 'nvlink', bandwidthGBps: 18 * 20.6, latencyUs: 0 },
      interNode: undefined,
      nvls: true,
      launchOverheadUs: 0,
    });
    expect(loadTopology('h200-nvlink').spec).toMatchObject({
      name: 'h200-nvlink',
      computeCapability: 90,
      nvls: true,
    });
    expect(loadTopology('a100-nvlink').spec).toMatchObject({
      computeCapability: 80,
      intraNode: { bandwidthGBps: 240 },
      nvls: false,
    });
  });

  it('h100-ib: nodes of 8 H100 with 8 NDR NICs, 2 nodes unless told', () => {
    expect(loadTopology('h100-ib')).toMatchObject({ nodes: 2, gpus: 16 });
    const four = loadTopology({ preset: 'h100-ib', nodes: 4 });
    expect(four).toMatchObject({ name: 'h100-ib', nodes: 4, gpusPerNode: 8, gpus: 32 });
    expect(four.spec.interNode).toEqual({
      kind: 'ib',
      bandwidthGBps: 50,
      latencyUs: 0,
      nics: 8,
      pcieGBps: 48,
    });
  });

  it('overrides replace fields, and merge the links field by field', () => {
    const t = loadTopology({
      preset: 'h100-ib',
      name: 'half nics',
      interNode: { nics: 4 },
      launchOverheadUs: 3,
    });
    expect(t.name).toBe('half nics');
    expect(t.spec.interNode).toMatchObject({ kind: 'ib', bandwidthGBps: 50, nics: 4 });
    expect(t.spec.launchOverheadUs).toBe(3);
  });

  it('an unknown preset lists the presets', () => {
    const { key, message } = failure(() => loadTopology('h100'));
    expect(key).toBe('topology.preset');
    expect(message).toContain('h100-nvlink, h200-nvlink, a100-nvlink, h100-ib');
    expect(failure(() => loadTopology({ preset: 'dgx' as never })).key).toBe('topology.preset');
  });
});

describe('a full spec', () => {
  it('fills its defaults', () => {
    const t = loadTopology(spec);
    expect(t).toMatchObject({ name: 'two pcie nodes', nodes: 2, gpusPerNode: 4, gpus: 8 });
    expect(t.spec).toEqual({
      ...spec,
      placement: undefined,
      intraNode: { kind: 'pcie', bandwidthGBps: 24, latencyUs: 0 },
      // Gen4 before Hopper.
      interNode: { kind: 'roce', bandwidthGBps: 25, latencyUs: 0, nics: 2, pcieGBps: 24 },
      nvls: false,
      launchOverheadUs: 0,
    });
  });

  it('a loaded topology is frozen, and its spec loads back to the same', () => {
    const t = loadTopology('h100-ib');
    expect(Object.isFrozen(t) && Object.isFrozen(t.spec) && Object.isFrozen(t.spec.intraNode)).toBe(true);
    expect(loadTopology(structuredClone(t.spec)).spec).toEqual(t.spec);
    expect(loadTopology(t)).toBe(t);
  });

  it("keeps an alpha-beta link's rates where given and leaves them out where not; it loads back", () => {
    const t = loadTopology({
      name: 'calibrated',
      nodes: 2,
      gpusPerNode: 2,
      intraNode: { kind: 'alpha-beta', bandwidthGBps: 8, latencyUs: 40, duplexGBps: 4, reduceGBps: 12 },
      interNode: { kind: 'ethernet', bandwidthGBps: 3, latencyUs: 90 },
    });
    expect(t.spec.intraNode).toEqual({
      kind: 'alpha-beta',
      bandwidthGBps: 8,
      latencyUs: 40,
      duplexGBps: 4,
      reduceGBps: 12,
    });
    // No rates, and no PCIe path (only NCCL's network has one): the resolved spec loads back.
    expect(Object.keys(t.spec.interNode ?? {}).sort()).toEqual([
      'bandwidthGBps',
      'kind',
      'latencyUs',
      'nics',
    ]);
    expect(loadTopology(structuredClone(t.spec)).spec).toEqual(t.spec);
  });

  it('places rank r on node floor(r / gpusPerNode) by default', () => {
    const t = loadTopology(spec);
    expect([0, 3, 4, 7].map((r) => t.placementOf(r))).toEqual([
      { node: 0, gpu: 0 },
      { node: 0, gpu: 3 },
      { node: 1, gpu: 0 },
      { node: 1, gpu: 3 },
    ]);
    expect(() => t.placementOf(8)).toThrow(
      new RangeError("topology 'two pcie nodes' has 8 GPUs; rank 8 has none"),
    );
    expect(() => t.placementOf(-1)).toThrow(RangeError);
  });

  it('or as its placement says', () => {
    const t = loadTopology({
      ...spec,
      placement: [
        { node: 0, gpu: 0 },
        { node: 1, gpu: 0 },
      ],
    });
    expect(t.placementOf(1)).toEqual({ node: 1, gpu: 0 });
    expect(() => t.placementOf(2)).toThrow(/places 2 ranks \(its placement\); rank 2 has no GPU/);
  });
});

describe('validation names the field', () => {
  const cases: Array<[string, unknown, string, RegExp]> = [
    [
      'a negative gpusPerNode',
      { ...spec, gpusPerNode: -1 },
      'topology.gpusPerNode',
      /expected a positive integer, got -1/,
    ],
    ['a fractional nodes', { ...spec, nodes: 1.5 }, 'topology.nodes', /got 1\.5/],
    ['a missing name', { ...spec, name: undefined }, 'topology.name', /non-empty string, got nothing/],
    ['an unknown key', { ...spec, gpus: 8 }, 'topology.gpus', /unknown key \(expected one of name, nodes/],
    [
      'an unknown link key',
      { ...spec, intraNode: { kind: 'pcie', bandwidth: 24 } },
      'topology.intraNode.bandwidth',
      /unknown key/,
    ],
    [
      'an unknown link kind',
      { ...spec, intraNode: { kind: 'nvswitch', bandwidthGBps: 1 } },
      'topology.intraNode.kind',
      /expected one of 'nvlink', 'pcie', 'alpha-beta', got "nvswitch"/,
    ],
    [
      'a zero bandwidth',
      { ...spec, interNode: { kind: 'ib', bandwidthGBps: 0 } },
      'topology.interNode.bandwidthGBps',
      /positive finite number, got 0/,
    ],
    [
      'a negative latency',
      { ...spec, intraNode: { kind: 'nvlink', bandwidthGBps: 1, latencyUs: -2 } },
      'topology.intraNode.latencyUs',
      />= 0, got -2/,
    ],
    [
      'zero NICs',
      { ...spec, interNode: { kind: 'ib', bandwidthGBps: 50, nics: 0 } },
      'topology.interNode.nics',
      /positive integer, got 0/,
    ],
    [
      'no interNode for several nodes',
      { ...spec, interNode: undefined },
      'topology.interNode',
      /required when nodes > 1 \(nodes is 2\)/,
    ],
    [
      'an alpha-beta link without alpha',
      { ...spec, intraNode: { kind: 'alpha-beta', bandwidthGBps: 5 }, interNode: undefined, nodes: 1 },
      'topology.intraNode.latencyUs',
      /required for kind 'alpha-beta'/,
    ],
    [
      'Ethernet without alpha',
      { ...spec, interNode: { kind: 'ethernet', bandwidthGBps: 12.5 } },
      'topology.interNode.latencyUs',
      /required for kind 'ethernet'/,
    ],
    [
      'pcieGBps on Ethernet',
      { ...spec, interNode: { kind: 'ethernet', bandwidthGBps: 12.5, latencyUs: 20, pcieGBps: 24 } },
      'topology.interNode.pcieGBps',
      /only NCCL's network/,
    ],
    [
      'a duplex bandwidth on NVLink',
      { ...spec, intraNode: { kind: 'nvlink', bandwidthGBps: 370.8, duplexGBps: 300 } },
      'topology.intraNode.duplexGBps',
      /only the alpha-beta model has it \(kind 'alpha-beta'\), not 'nvlink'/,
    ],
    [
      'a reduction rate on InfiniBand',
      { ...spec, interNode: { kind: 'ib', bandwidthGBps: 50, reduceGBps: 10 } },
      'topology.interNode.reduceGBps',
      /only the alpha-beta model has it \(kind 'ethernet' or 'alpha-beta'\), not 'ib'/,
    ],
    [
      'a zero reduction rate',
      {
        ...spec,
        intraNode: { kind: 'alpha-beta', bandwidthGBps: 5, latencyUs: 1, reduceGBps: 0 },
        interNode: undefined,
        nodes: 1,
      },
      'topology.intraNode.reduceGBps',
      /positive finite number, got 0/,
    ],
    [
      'a duplex bandwidth that is no number',
      { ...spec, interNode: { kind: 'ethernet', bandwidthGBps: 12.5, latencyUs: 20, duplexGBps: 'half' } },
      'topology.interNode.duplexGBps',
      /positive finite number, got "half"/,
    ],
    [
      "NCCL's network after an alpha-beta intraNode",
      { ...spec, intraNode: { kind: 'alpha-beta', bandwidthGBps: 5, latencyUs: 1 } },
      'topology.interNode.kind',
      /use 'ethernet' or 'alpha-beta'/,
    ],
    [
      'NVLS without NVLink',
      { ...spec, nvls: true },
      'topology.nvls',
      /needs intraNode.kind 'nvlink' and computeCapability >= 90/,
    ],
    [
      'NVLS before Hopper',
      { ...spec, computeCapability: 80, intraNode: { kind: 'nvlink', bandwidthGBps: 240 }, nvls: true },
      'topology.nvls',
      /computeCapability >= 90/,
    ],
    ['a non-boolean nvls', { ...spec, nvls: 'yes' }, 'topology.nvls', /expected true or false, got "yes"/],
    [
      'an old compute capability',
      { ...spec, computeCapability: 50 },
      'topology.computeCapability',
      /at least 60, got 50/,
    ],
    [
      'a negative launch overhead',
      { ...spec, launchOverheadUs: -1 },
      'topology.launchOverheadUs',
      />= 0, got -1/,
    ],
    [
      'a link that is no mapping',
      { ...spec, intraNode: 'nvlink' },
      'topology.intraNode',
      /expected a mapping, got "nvlink"/,
    ],
    [
      'a placement that is no list',
      { ...spec, placement: { 0: { node: 0, gpu: 0 } } },
      'topology.placement',
      /expected a list of \{ node, gpu \}, got a mapping/,
    ],
    [
      'a placement off the nodes',
      { ...spec, placement: [{ node: 2, gpu: 0 }] },
      'topology.placement[0].node',
      /integer from 0 to 1, got 2/,
    ],
    [
      'a placement off the GPUs',
      { ...spec, placement: [{ node: 0, gpu: 4 }] },
      'topology.placement[0].gpu',
      /integer from 0 to 3, got 4/,
    ],
    [
      'two ranks on one GPU',
      {
        ...spec,
        placement: [
          { node: 0, gpu: 1 },
          { node: 1, gpu: 1 },
          { node: 0, gpu: 1 },
        ],
      },
      'topology.placement[2]',
      /node 0 GPU 1 already holds rank 0/,
    ],
    [
      'more placed ranks than GPUs',
      {
        ...spec,
        nodes: 1,
        interNode: undefined,
        gpusPerNode: 1,
        placement: [
          { node: 0, gpu: 0 },
          { node: 0, gpu: 0 },
        ],
      },
      'topology.placement',
      /places 2 ranks on 1 GPUs/,
    ],
    [
      'an unknown key of a placement',
      { ...spec, placement: [{ node: 0, gpu: 0, rank: 0 }] },
      'topology.placement[0].rank',
      /unknown key/,
    ],
    [
      'a preset override of the wrong type',
      { preset: 'h100-ib', nodes: 0 },
      'topology.nodes',
      /positive integer, got 0/,
    ],
    [
      'a preset override of an unknown key',
      { preset: 'h100-nvlink', speed: 3 },
      'topology.speed',
      /unknown key/,
    ],
  ];
  for (const [what, value, key, message] of cases) {
    it(what, () => {
      const thrown = failure(() => loadTopology(value as TopologySpec));
      expect(thrown.key).toBe(key);
      expect(thrown.message).toMatch(message);
    });
  }

  it('something that is no topology at all is a TypeError', () => {
    expect(() => loadTopology(42 as never)).toThrow(TypeError);
    expect(() => loadTopology(null as never)).toThrow(/expected a preset name, a file path/);
  });
});

describe('files', () => {
  it('reads a YAML spec', () => {
    const path = join(dir, 'cluster.yaml');
    writeFileSync(
      path,
      [
        'name: lab',
        'nodes: 2',
        'gpusPerNode: 2',
        'intraNode: { kind: nvlink, bandwidthGBps: 370.8 }',
        'interNode:',
        '  kind: ib',
        '  bandwidthGBps: 50',
        '  nics: 2',
        'placement:',
        '  - { node: 1, gpu: 1 }',
        '  - { node: 0, gpu: 0 }',
        'nvls: true',
      ].join('\n'),
    );
    const t = loadTopology(path);
    expect(t).toMatchObject({ name: 'lab', nodes: 2, gpus: 4 });
    expect(t.placementOf(0)).toEqual({ node: 1, gpu: 1 });
    expect(t.spec.interNode).toMatchObject({ nics: 2, pcieGBps: 48 });
  });

  it('reads a JSON preset reference (.yml too)', () => {
    const json = join(dir, 'big.json');
    writeFileSync(json, JSON.stringify({ preset: 'h100-ib', nodes: 16 }));
    expect(loadTopology(json)).toMatchObject({ name: 'h100-ib', gpus: 128 });
    const yml = join(dir, 'one.yml');
    writeFileSync(yml, 'preset: a100-nvlink\n');
    expect(loadTopology(yml).spec.computeCapability).toBe(80);
  });

  it("a file's errors name the file and the field", () => {
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, 'preset: h100-ib\nnodes: -4\n');
    const { key, message } = failure(() => loadTopology(path));
    expect(key).toBe('topology.nodes');
    expect(message).toBe(`topology file ${path}: topology.nodes: expected a positive integer, got -4`);
  });

  it('a missing file, or one that does not parse', () => {
    const missing = failure(() => loadTopology(join(dir, 'nowhere.yaml')));
    expect(missing.key).toBe('(file)');
    expect(missing.message).toMatch(/nowhere\.yaml: \(file\): cannot be read/);
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{ "name": ');
    expect(failure(() => loadTopology(broken)).message).toMatch(/is not valid JSON/);
    const list = join(dir, 'list.yaml');
    writeFileSync(list, '- 1\n- 2\n');
    expect(failure(() => loadTopology(list))).toMatchObject({ key: 'topology' });
  });
});
