/**
 * The CUDA/NCCL test double's control API (include/tcdouble-control.h) from
 * TypeScript, through koffi, on the libraries the environment points at
 * (useCudaDouble sets it): counts of what is alive, failure injection, reset.
 * The double's state is per process, so every thread sees the same counts.
 */
import koffi, { type LibraryHandle } from 'koffi';

export interface CudaDoubleControl {
  /** cudaMalloc'd and not freed. */
  liveAllocations(): number;
  /** Created with cudaStreamCreateWithFlags and not destroyed. */
  liveStreams(): number;
  /** Created, or opened from an IPC handle, and not destroyed. */
  liveEvents(): number;
  /** Initialized (or initializing) and neither destroyed nor aborted. */
  liveComms(): number;
  /** Made by ncclRedOpCreatePreMulSum on a live communicator and not destroyed. */
  liveRedOps(): number;
  /** Other processes' allocations mapped with cudaIpcOpenMemHandle and not closed. */
  openIpcMappings(): number;
  /** Loaded with cudaLibraryLoadData and not unloaded. */
  liveLibraries(): number;
  /**
   * The next call of `fn` (a CUDA or NCCL function name, e.g. 'cudaMalloc', 'ncclAllReduce') in this process,
   * by any thread, returns `code` (a cudaError_t or ncclResult_t) instead of running.
   */
  failNext(fn: string, code: number): void;
  /** Drops every allocation, mapping, stream, event, library, communicator and armed failure. */
  reset(): void;
}

const controls = new Map<string, CudaDoubleControl>();

export function cudaDoubleControl(): CudaDoubleControl {
  const cudartPath = process.env.TENSORCOMM_CUDART_LIBRARY;
  const ncclPath = process.env.TENSORCOMM_NCCL_LIBRARY;
  if (!cudartPath || !ncclPath) {
    throw new Error(
      'cudaDoubleControl: TENSORCOMM_CUDART_LIBRARY and TENSORCOMM_NCCL_LIBRARY are not both set; ' +
        'call useCudaDouble() (test/cuda-double/build.ts) first',
    );
  }
  const key = `${cudartPath}\0${ncclPath}`;
  let control = controls.get(key);
  if (control === undefined) {
    control = bind(cudartPath, ncclPath);
    controls.set(key, control);
  }
  return control;
}

function bind(cudartPath: string, ncclPath: string): CudaDoubleControl {
  const cudart = koffi.load(cudartPath);
  const nccl = koffi.load(ncclPath);
  const count = (library: LibraryHandle, name: string) => library.func(`int ${name}(void)`) as () => number;
  const failNext = cudart.func('void tcdouble_fail_next(const char *fn, int code)') as (
    fn: string,
    code: number,
  ) => void;
  return {
    liveAllocations: count(cudart, 'tcdouble_live_allocations'),
    liveStreams: count(cudart, 'tcdouble_live_streams'),
    liveEvents: count(cudart, 'tcdouble_live_events'),
    liveComms: count(nccl, 'tcdouble_live_comms'),
    liveRedOps: count(nccl, 'tcdouble_live_red_ops'),
    openIpcMappings: count(cudart, 'tcdouble_open_ipc_mappings'),
    liveLibraries: count(cudart, 'tcdouble_live_libraries'),
    failNext(fn, code) {
      if (typeof fn !== 'string' || !/^(cuda|nccl)\w+$/.test(fn)) {
        throw new TypeError(
          `cudaDoubleControl.failNext: expected a CUDA or NCCL function name, got ${String(fn)}`,
        );
      }
      if (!Number.isInteger(code) || code === 0) {
        throw new RangeError(
          `cudaDoubleControl.failNext: code must be a non-zero integer error code, got ${code}`,
        );
      }
      failNext(fn, code);
    },
    reset: cudart.func('void tcdouble_reset(void)') as () => void,
  };
}
