/**
 * The layering of docs/design.md, enforced: a folder of src/ imports only the
 * folders below it, and no folder imports itself back through another.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/** Top to bottom, as docs/design.md draws them; '.' is the package root (index.ts). */
const LAYERS = [
  'cli',
  '.',
  'testing',
  'weight-sync',
  'dtensor',
  'p2p',
  'p2p/compression',
  'p2p/netem',
  'context',
  'nccl',
  'thread-group',
  'thread-group/store-backend',
  'cuda',
  'launch',
  'memory-store',
  'file-store',
  'network-store',
  'promise-future',
  'rendezvous',
  'predict',
  'debug',
  'runtime',
  'runtime/config',
  'tensor',
];

/** Where a folder's files may reach into a folder nested under it: a concept and its parts. */
function layerOf(file: string): string {
  const dir = dirname(relative(SRC, file));
  const deepest = LAYERS.filter((l) => dir === l || dir.startsWith(`${l}/`)).sort(
    (a, b) => b.length - a.length,
  )[0];
  if (deepest === undefined) throw new Error(`${relative(SRC, file)} is in no layer of docs/design.md`);
  return deepest;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g;

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(IMPORT)].map((m) => resolve(dirname(file), m[1] ?? m[2]));
}

/** The top-level concept of a layer: p2p/compression belongs to p2p, store-backend to thread-group. */
function conceptOf(layer: string): string {
  return layer.split('/')[0];
}

describe('layers', () => {
  const files = sourceFiles(SRC);
  const edges = files.flatMap((file) =>
    imports(file).map((target) => ({ file, target, from: layerOf(file), to: layerOf(target) })),
  );

  it('every folder of src/ is a layer of docs/design.md', () => {
    expect(files.length).toBeGreaterThan(100);
    for (const file of files) expect(() => layerOf(file)).not.toThrow();
  });

  it('no import runs upward', () => {
    const upward = edges
      .filter(
        ({ from, to }) => conceptOf(from) !== conceptOf(to) && LAYERS.indexOf(to) < LAYERS.indexOf(from),
      )
      .map(({ file, target }) => `${relative(SRC, file)} imports ${relative(SRC, target)}`);
    expect(upward).toEqual([]);
  });

  it('no module imports itself back through others', () => {
    const graph = new Map<string, string[]>();
    for (const { file, target } of edges) graph.set(file, [...(graph.get(file) ?? []), target]);
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      path.push(file);
      for (const next of graph.get(file) ?? []) {
        if (state.get(next) === 'open') {
          cycles.push(
            path
              .slice(path.indexOf(next))
              .concat(next)
              .map((f) => relative(SRC, f))
              .join(' -> '),
          );
        } else if (!state.has(next)) visit(next);
      }
      path.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });
});
