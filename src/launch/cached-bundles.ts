/**
 * The cache of rank bundles under BUNDLE_CACHE_DIR (rank-bundle.ts builds
 * them): each bundle's directory `<key>-<stamp>`, and a manifest `<key>.json`
 * naming the inputs it was built from and their stamp (sizes and modification
 * times, hashed). A bundle is used while its inputs are unchanged; the
 * inputs cover everything that changes what esbuild makes of them, the
 * package.json files that say each one's module type among them. The key
 * holds what the inputs do not (the Node version, whose code caches the
 * bundle keeps). The cache stays bounded: a build drops what no manifest
 * names, what was not used for a week, and the least recently used beyond
 * MAX_BUNDLES, but never a bundle used within the last hour, which a process
 * may still be loading.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface Manifest {
  inputs: string[];
  stamp: string;
}

/** A process that started before a bundle went stale may still be loading it for this long. */
const IN_USE_MS = 3_600_000;
/** A bundle no job used for this long is dropped, even if its inputs are still there. */
const UNUSED_MS = 7 * 24 * 3_600_000;
/** The most bundles kept (about 1 MB each): a test file, an entry or a script each has one. */
export const MAX_BUNDLES = 48;
/** A used bundle's time is renewed at most this often: one utimes per job, not per thread. */
const RENEW_MS = 600_000;

/** A bundle's directory: `<key>-<stamp>`. */
export const BUNDLE_DIR_NAME = /^([0-9a-f]{20})-([0-9a-f]{20})$/;

const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 20);

/** The key of a bundle of `parts` (its modules and kind), for this Node. */
export const bundleKey = (layout: number, ...parts: string[]) =>
  sha(JSON.stringify([layout, process.version, ...parts]));

/** The inputs' sizes and modification times, hashed: a changed (or removed) input changes the stamp. */
export function stampOf(inputs: readonly string[]): string {
  return sha(
    inputs
      .map((path) => {
        try {
          const { size, mtimeMs } = statSync(path);
          return `${path}\0${size}\0${mtimeMs}`;
        } catch {
          return `${path}\0missing`;
        }
      })
      .join('\n'),
  );
}

/**
 * The package.json files whose `type` decides how `inputs` are read (the
 * nearest above each): a project switched between "commonjs" and "module"
 * must not get the bundle built for the other.
 */
export function packageScopes(inputs: readonly string[]): string[] {
  const scopes = new Set<string>();
  const seen = new Map<string, string | undefined>();
  const scopeOf = (dir: string): string | undefined => {
    if (seen.has(dir)) return seen.get(dir);
    const own = join(dir, 'package.json');
    const parent = dirname(dir);
    const scope = existsSync(own) ? own : parent === dir ? undefined : scopeOf(parent);
    seen.set(dir, scope);
    return scope;
  };
  for (const input of inputs) {
    const scope = scopeOf(dirname(input));
    if (scope !== undefined) scopes.add(scope);
  }
  return [...scopes];
}

function manifestOf(cacheDir: string, key: string): Manifest | undefined {
  try {
    return JSON.parse(readFileSync(join(cacheDir, `${key}.json`), 'utf8')) as Manifest;
  } catch {
    // No manifest yet, or one another process is replacing.
    return undefined;
  }
}

/** The directory of the cached bundle of `key`, if its inputs are unchanged; its use time renewed. */
export function cachedBundle(cacheDir: string, key: string): string | undefined {
  const manifest = manifestOf(cacheDir, key);
  if (manifest === undefined || stampOf(manifest.inputs) !== manifest.stamp) return undefined;
  const dir = join(cacheDir, `${key}-${manifest.stamp}`);
  try {
    const now = Date.now();
    if (now - statSync(dir).mtimeMs > RENEW_MS) utimesSync(dir, now / 1000, now / 1000);
  } catch {
    // Gone (pruned by another process): built again.
    return undefined;
  }
  return dir;
}

interface Bundle {
  path: string;
  key: string;
  usedMs: number;
  /** Its manifest names it (the manifest goes with it). */
  named: boolean;
  /** Named, and its inputs are all there. */
  current: boolean;
}

/**
 * Drops bundles (and unfinished builds) an hour old that their manifest no
 * longer names or whose inputs are gone, bundles unused for a week, and the
 * least recently used beyond `maxBundles`; none used within the last hour.
 */
export function pruneBundles(cacheDir: string, now = Date.now(), maxBundles = MAX_BUNDLES): void {
  const bundles: Bundle[] = [];
  // Bundles share most of their inputs (the library's sources): each is looked up once.
  const found = new Map<string, boolean>();
  const exists = (input: string): boolean => {
    let there = found.get(input);
    if (there === undefined) {
      there = existsSync(input);
      found.set(input, there);
    }
    return there;
  };
  for (const name of readdirSync(cacheDir)) {
    const path = join(cacheDir, name);
    const bundle = BUNDLE_DIR_NAME.exec(name);
    if (!bundle && !name.endsWith('.tmp')) continue;
    let usedMs: number;
    try {
      usedMs = statSync(path).mtimeMs;
    } catch {
      // Pruned by another process since it was listed.
      continue;
    }
    const manifest = bundle ? manifestOf(cacheDir, bundle[1]) : undefined;
    const named = bundle !== null && manifest?.stamp === bundle[2];
    const current = named && manifest.inputs.every(exists);
    bundles.push({ path, key: bundle?.[1] ?? '', usedMs, named, current });
  }
  const idle = bundles.filter((b) => now - b.usedMs >= IN_USE_MS);
  const kept = bundles.filter((b) => b.current).sort((a, b) => b.usedMs - a.usedMs);
  const surplus = new Set(kept.slice(maxBundles));
  for (const b of idle) {
    if (b.current && now - b.usedMs < UNUSED_MS && !surplus.has(b)) continue;
    rmSync(b.path, { recursive: true, force: true });
    if (b.named) rmSync(join(cacheDir, `${b.key}.json`), { force: true });
  }
}
