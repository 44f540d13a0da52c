/**
 * Builds the CUDA/NCCL test double (C++ in this folder) with g++ into
 * node_modules/.cache/tensorcomm-cuda-double/<hash>/, the hash covering the
 * sources, the flags, the compiler and the CUDA headers' location, so a
 * change rebuilds and nothing else does. Each build happens in a scratch
 * folder renamed into place when complete: concurrent builders (test files,
 * processes) never see half a build, and the last rename simply loses.
 *
 * libtcdouble-cudart.so holds the runtime double and the engine both halves
 * share; libtcdouble-nccl.so links against it (found beside it through
 * $ORIGIN), so whichever way a process loads them it gets one engine.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DOUBLE_DIR = join(ROOT, 'test/cuda-double');
const KERNELS_DIR = join(ROOT, 'src/cuda/kernels');
const CACHE_DIR = join(ROOT, 'node_modules/.cache/tensorcomm-cuda-double');
const COMPILER = 'g++';
const CUDART_FILE = 'libtcdouble-cudart.so';
const NCCL_FILE = 'libtcdouble-nccl.so';

export interface CudaDoubleBuild {
  /** The folder holding both libraries (and programs built against them). */
  dir: string;
  /** The libcudart double: what TENSORCOMM_CUDART_LIBRARY points at. */
  cudart: string;
  /** The libnccl double: what TENSORCOMM_NCCL_LIBRARY points at. */
  nccl: string;
}

let building: Promise<CudaDoubleBuild> | undefined;

/** Builds the double once per source state (a no-op when the cache has it); safe to call concurrently. */
export function buildCudaDouble(): Promise<CudaDoubleBuild> {
  building ??= build().catch((error: unknown) => {
    building = undefined;
    throw error;
  });
  return building;
}

/**
 * Builds the double and points this process's environment at it, so CUDA and
 * NCCL loaded from now on (by this thread, rank threads and launched
 * processes started afterwards) are the double, with `devices` devices.
 */
export async function useCudaDouble(devices = 4): Promise<void> {
  if (!Number.isInteger(devices) || devices < 0) {
    throw new RangeError(`useCudaDouble: devices must be a non-negative integer, got ${devices}`);
  }
  const built = await buildCudaDouble();
  process.env.TENSORCOMM_CUDART_LIBRARY = built.cudart;
  process.env.TENSORCOMM_NCCL_LIBRARY = built.nccl;
  process.env.TENSORCOMM_CUDA_DOUBLE_DEVICES = String(devices);
}

/**
 * Compiles a C++ program against the double (its CUDA and NCCL headers, both
 * libraries) into the build folder, once per source state; returns its path.
 */
export async function buildCudaDoubleProgram(name: string, sources: readonly string[]): Promise<string> {
  if (!/^[\w-]+$/.test(name))
    throw new TypeError(`buildCudaDoubleProgram: invalid program name ${JSON.stringify(name)}`);
  const built = await buildCudaDouble();
  const flags = [...compileFlags(), '-O0'];
  const output = join(built.dir, `${name}-${await fingerprint(sources, flags)}`);
  if (existsSync(output)) return output;
  await inScratchDir(built.dir, `${name}.`, async (scratch) => {
    const objects = await compileAll(sources, flags, scratch);
    const linked = join(scratch, name);
    const libraries = [`-L${built.dir}`, `-l:${NCCL_FILE}`, `-l:${CUDART_FILE}`, `-Wl,-rpath,${built.dir}`];
    await run(COMPILER, ['-pthread', ...objects, ...libraries, '-o', linked], `linking ${name}`);
    renameSync(linked, output);
  });
  return output;
}

async function build(): Promise<CudaDoubleBuild> {
  const flags = [...compileFlags(), '-O2', '-fPIC'];
  const runtimeSources = sourcesIn('runtime');
  const ncclSources = sourcesIn('nccl');
  const headers = [...filesIn('include'), ...filesIn('runtime', '.h'), ...filesIn('nccl', '.h')];
  const inputs = [...runtimeSources, ...ncclSources, ...headers, join(KERNELS_DIR, 'reduce-ops.h')];
  // The double's progress thread lives until the process exits: a library unloaded under it (koffi
  // unloads libraries as their handles are collected, even at exit) would kill the process by SIGSEGV.
  const shared = ['-shared', '-pthread', '-Wl,--no-undefined', '-Wl,-z,nodelete'];
  const dir = join(CACHE_DIR, await fingerprint(inputs, [...flags, ...shared]));
  const result = { dir, cudart: join(dir, CUDART_FILE), nccl: join(dir, NCCL_FILE) };
  if (existsSync(result.nccl)) return result;
  mkdirSync(CACHE_DIR, { recursive: true });
  await inScratchDir(CACHE_DIR, `${basename(dir)}.`, async (scratch) => {
    const objects = join(scratch, 'objects');
    mkdirSync(objects);
    const compiled = await compileAll([...runtimeSources, ...ncclSources], flags, objects);
    const runtimeObjects = compiled.slice(0, runtimeSources.length);
    const ncclObjects = compiled.slice(runtimeSources.length);
    await run(
      COMPILER,
      [...shared, ...runtimeObjects, `-Wl,-soname,${CUDART_FILE}`, '-o', join(scratch, CUDART_FILE)],
      `linking ${CUDART_FILE}`,
    );
    await run(
      COMPILER,
      [
        ...shared,
        ...ncclObjects,
        `-L${scratch}`,
        `-l:${CUDART_FILE}`,
        '-Wl,-rpath,$ORIGIN',
        `-Wl,-soname,${NCCL_FILE}`,
        '-o',
        join(scratch, NCCL_FILE),
      ],
      `linking ${NCCL_FILE}`,
    );
    rmSync(objects, { recursive: true });
    try {
      renameSync(scratch, dir);
    } catch (error) {
      // Another builder got there first with the same sources.
      if (!existsSync(result.nccl)) throw error;
    }
  });
  return result;
}

function compileFlags(): string[] {
  return [
    '-std=c++17',
    '-pthread',
    '-Wall',
    '-Wextra',
    `-I${cudaIncludeDir()}`,
    `-I${join(DOUBLE_DIR, 'include')}`,
    `-I${join(DOUBLE_DIR, 'runtime')}`,
    `-I${KERNELS_DIR}`,
  ];
}

/** The real CUDA headers: every signature of the double is checked against them. */
function cudaIncludeDir(): string {
  const roots = [process.env.CUDA_HOME, process.env.CUDA_PATH, '/usr/local/cuda'].filter(
    (root): root is string => Boolean(root),
  );
  for (const root of roots) {
    const include = join(root, 'include');
    if (existsSync(join(include, 'cuda_runtime_api.h'))) return include;
  }
  throw new Error(
    `buildCudaDouble: cuda_runtime_api.h not found in ${roots.map((root) => join(root, 'include')).join(', ')}. ` +
      'The CUDA test double compiles against the real CUDA headers: install the CUDA toolkit (the headers ' +
      'suffice, no GPU is needed) or set CUDA_HOME to where it is installed.',
  );
}

function filesIn(folder: string, extension = ''): string[] {
  const dir = join(DOUBLE_DIR, folder);
  return readdirSync(dir)
    .filter((file) => file.endsWith(extension))
    .sort()
    .map((file) => join(dir, file));
}

function sourcesIn(folder: string): string[] {
  return filesIn(folder, '.cpp');
}

/** 16 hex digits of the hash of the files' paths and contents, the flags and the compiler's version. */
async function fingerprint(files: readonly string[], flags: readonly string[]): Promise<string> {
  const hash = createHash('sha256');
  hash.update(await run(COMPILER, ['--version'], 'asking its version'));
  hash.update(flags.join('\0'));
  for (const file of files) {
    hash.update(`\0${relative(ROOT, file)}\0`);
    hash.update(readFileSync(file));
  }
  return hash.digest('hex').slice(0, 16);
}

/** Compiles each source to an object in `dir`, as many at once as there are processors. */
async function compileAll(
  sources: readonly string[],
  flags: readonly string[],
  dir: string,
): Promise<string[]> {
  const objects = sources.map((source) => join(dir, `${relative(ROOT, source).replaceAll('/', '_')}.o`));
  let next = 0;
  const worker = async () => {
    while (next < sources.length) {
      const index = next++;
      await run(
        COMPILER,
        [...flags, '-c', sources[index], '-o', objects[index]],
        `compiling ${relative(ROOT, sources[index])}`,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(availableParallelism(), sources.length) }, worker));
  return objects;
}

/** A scratch folder this old was left by a build that was killed. */
const STALE_SCRATCH_MS = 60 * 60 * 1000;

/** Runs `body` in a fresh scratch folder under `parent`, removed afterwards whatever happens. */
async function inScratchDir(
  parent: string,
  prefix: string,
  body: (dir: string) => Promise<void>,
): Promise<void> {
  for (const entry of readdirSync(parent)) {
    const path = join(parent, entry);
    // Another builder may remove its own scratch folder meanwhile.
    const modified = entry.includes('.building-')
      ? statSync(path, { throwIfNoEntry: false })?.mtimeMs
      : undefined;
    if (modified !== undefined && Date.now() - modified > STALE_SCRATCH_MS)
      rmSync(path, { recursive: true, force: true });
  }
  const scratch = mkdtempSync(join(parent, `${prefix}building-`));
  try {
    await body(scratch);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Runs the compiler; its output becomes the error's message when it fails. Returns stdout. */
function run(command: string, args: readonly string[], what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!error) {
        resolve(stdout);
      } else if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(
          new Error(
            `buildCudaDouble: ${command} was not found on PATH. The CUDA test double is C++ built when the ` +
              'tests start: install g++ (e.g. apt-get install g++).',
          ),
        );
      } else {
        reject(
          new Error(`buildCudaDouble: ${command} failed ${what}:\n${stderr || stdout || error.message}`),
        );
      }
    });
  });
}
