/**
 * Finding and loading libcudart (and, for nccl/, libnccl). Order: the env override (a full
 * path; when set, nothing else is tried), the sonames through the dynamic
 * loader's own search (LD_LIBRARY_PATH, ldconfig), then the places CUDA and
 * NVIDIA's Python wheels install them. Python's site-packages directories
 * are found from the usual prefixes rather than by running python, which
 * could take seconds and may be the wrong interpreter anyway.
 *
 * Nothing is loaded when this module is imported; the first call loads, and
 * the result (or the failure) is kept for the thread, keyed by the override
 * so a test that points the override elsewhere gets the other library.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import type { LibraryHandle } from 'koffi';
import { koffi } from '../runtime/koffi.ts';
import { GpuUnavailableError } from './errors.ts';

export interface LibrarySpec {
  /** 'libcudart', 'libnccl': how messages name it. */
  name: string;
  /** Full path to the library, checked first. */
  envVar: string;
  /** Most wanted first; tried through the dynamic loader, then in each directory. */
  fileNames: readonly string[];
  /** Under a CUDA toolkit root ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda). */
  toolkitDirs: readonly string[];
  /** Under a Python site-packages / dist-packages directory. */
  wheelDirs: readonly string[];
  /** What to install when nothing was found. */
  installHint: string;
}

export interface LoadedLibrary {
  /** The file it was loaded from (resolved through /proc/self/maps when loaded by soname). */
  readonly path: string;
  readonly handle: LibraryHandle;
}

/**
 * Wheel layouts as NVIDIA's own loader (cuda-python's cuda_pathfinder,
 * supported_nvidia_libs.py) lists them: CUDA 13 wheels share nvidia/cu13/lib,
 * CUDA 12 ones use nvidia/cuda_runtime/lib; the NCCL wheels use nvidia/nccl/lib.
 */
export const CUDART_LIBRARY: LibrarySpec = {
  name: 'libcudart',
  envVar: 'TENSORCOMM_CUDART_LIBRARY',
  fileNames: ['libcudart.so.13', 'libcudart.so.12', 'libcudart.so'],
  toolkitDirs: ['lib64', 'targets/x86_64-linux/lib'],
  wheelDirs: ['nvidia/cu13/lib', 'nvidia/cuda_runtime/lib'],
  installHint: 'install the CUDA toolkit or `pip install nvidia-cuda-runtime`',
};

const loaded = new Map<string, LoadedLibrary | GpuUnavailableError>();

/** Loads the library (or rethrows why it could not be) once per thread and override. */
export function loadLibrary(spec: LibrarySpec): LoadedLibrary {
  const override = process.env[spec.envVar] || undefined;
  const key = `${spec.name}\0${override ?? ''}`;
  let result = loaded.get(key);
  if (result === undefined) {
    result = override === undefined ? search(spec) : loadOverride(spec, override);
    loaded.set(key, result);
  }
  if (result instanceof GpuUnavailableError) throw result;
  return result;
}

/** A binding built once per loaded library: `bind` runs on the first call, and again only if the library changed. */
export function lazyBinding<T>(spec: LibrarySpec, bind: (library: LoadedLibrary) => T): () => T {
  let cache: { library: LoadedLibrary; binding: T } | undefined;
  return () => {
    const library = loadLibrary(spec);
    if (cache?.library !== library) cache = { library, binding: bind(library) };
    return cache.binding;
  };
}

function loadOverride(spec: LibrarySpec, path: string): LoadedLibrary | GpuUnavailableError {
  try {
    return { path, handle: koffi().load(path) };
  } catch (error) {
    return new GpuUnavailableError(
      `${spec.name}: ${spec.envVar}=${path} could not be loaded: ${messageOf(error)}. ` +
        `Point ${spec.envVar} at a loadable ${spec.fileNames[0]}, or unset it to search the usual places.`,
    );
  }
}

function search(spec: LibrarySpec): LoadedLibrary | GpuUnavailableError {
  const tried: string[] = [];
  for (const soname of spec.fileNames) {
    try {
      const handle = koffi().load(soname);
      return { path: mappedPath(soname) ?? soname, handle };
    } catch (error) {
      tried.push(`dynamic loader search for ${soname}: ${messageOf(error)}`);
    }
  }
  for (const dir of candidateDirs(spec)) {
    const present = spec.fileNames.map((file) => join(dir, file)).filter((path) => existsSync(path));
    if (present.length === 0) {
      tried.push(`${dir}: ${existsSync(dir) ? `no ${spec.fileNames.join(', ')}` : 'no such directory'}`);
    }
    for (const path of present) {
      try {
        return { path, handle: koffi().load(path) };
      } catch (error) {
        tried.push(`${path}: ${messageOf(error)}`);
      }
    }
  }
  return new GpuUnavailableError(
    `${spec.name} was not found. Set ${spec.envVar} to the full path of ` +
      `${spec.fileNames[0]}, or ${spec.installHint}. Tried:\n${tried.map((line) => `  - ${line}`).join('\n')}`,
  );
}

function candidateDirs(spec: LibrarySpec): string[] {
  const toolkitRoots = [process.env.CUDA_HOME, process.env.CUDA_PATH, '/usr/local/cuda'].filter(
    (root): root is string => Boolean(root),
  );
  const dirs = [
    ...toolkitRoots.flatMap((root) => spec.toolkitDirs.map((dir) => join(root, dir))),
    ...sitePackagesDirs().flatMap((site) => spec.wheelDirs.map((dir) => join(site, dir))),
  ];
  return [...new Set(dirs)];
}

/** site-packages / dist-packages under the prefixes where pip puts wheels, found by listing `lib/python3*`. */
function sitePackagesDirs(): string[] {
  const libDirs = [
    process.env.VIRTUAL_ENV && join(process.env.VIRTUAL_ENV, 'lib'),
    process.env.CONDA_PREFIX && join(process.env.CONDA_PREFIX, 'lib'),
    '/usr/local/lib',
    '/usr/lib',
    join(homedir(), '.local/lib'),
  ].filter((dir): dir is string => Boolean(dir));
  return libDirs.flatMap((libDir) =>
    pythonDirs(libDir).flatMap((python) =>
      ['site-packages', 'dist-packages'].map((name) => join(python, name)).filter((dir) => existsSync(dir)),
    ),
  );
}

function pythonDirs(libDir: string): string[] {
  try {
    return readdirSync(libDir)
      .filter((entry) => /^python3(\.\d+)?$/.test(entry))
      .map((entry) => join(libDir, entry));
  } catch {
    // A directory this user cannot list holds nothing it could load either.
    return [];
  }
}

/** The file a soname resolved to, from this process's mappings (the loader does not say). */
function mappedPath(soname: string): string | undefined {
  try {
    for (const line of readFileSync('/proc/self/maps', 'utf8').split('\n')) {
      const path = line.slice(line.indexOf('/'));
      if (line.includes('/') && basename(path).startsWith(soname)) return path;
    }
  } catch {
    // No /proc: the soname is as good a name as any.
  }
  return undefined;
}

/** An error's message, for putting a caught failure into another error's text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
