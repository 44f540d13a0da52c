/**
 * NcclLibrary over libnccl through koffi, synchronous on the rank's thread.
 * The 128-byte ncclUniqueId travels as bytes: written into a Uint8Array by
 * ncclGetUniqueId, passed by value (a koffi struct wrapping the bytes) to
 * ncclCommInitRankConfig.
 */
import { type LibrarySpec, type LoadedLibrary, lazyBinding } from '../cuda/library-loader.ts';
import { koffi, koffiType } from '../runtime/koffi.ts';
import {
  type CommHandle,
  NCCL_UNIQUE_ID_BYTES,
  type NcclLibrary,
  NcclResult,
  NcclScalarResidence,
} from './api.ts';
import { NcclError } from './errors.ts';

/**
 * The ncclConfig_t handed to NCCL is NCCL 2.18's: size, magic, version,
 * blocking, cgaClusterSize, minCTAs, maxCTAs, netName, splitShare; 48 bytes
 * on x86-64 (NVIDIA/nccl src/nccl.h.in, `struct ncclConfig_v21700`, which
 * 2.18.1 extended with splitShare and 2.25 still had unchanged). 2.18, the
 * oldest NCCL supported, reads exactly this struct. Newer libraries accept
 * it by design (src/init.cc, parseCommConfig, the same from 2.18 to 2.30):
 * they start from their own NCCL_CONFIG_INITIALIZER, copy
 * min(config->size, their sizeof) bytes over it, require magic 0xcafebeef,
 * and reset every field added after config->version to its default. Fields
 * are only ever appended, so declaring the oldest layout with its own
 * version means no library reads a field tensorcomm did not set, and
 * nothing here changes when NCCL appends more.
 */
export const NCCL_CONFIG = {
  apiMagic: 0xcafebeef,
  /** NCCL_VERSION(2, 18, 0): the version whose layout NcclConfig declares. */
  version: 21800,
  /** NCCL_CONFIG_UNDEF_INT: "unset, use NCCL's default". */
  undefInt: -2147483648,
} as const;

const ncclConfig = koffiType((k) =>
  k.struct({
    size: 'size_t',
    magic: 'uint32_t',
    version: 'uint32_t',
    blocking: 'int',
    cgaClusterSize: 'int',
    minCTAs: 'int',
    maxCTAs: 'int',
    netName: 'const char *',
    splitShare: 'int',
  }),
);

/** Byte offset of every ncclConfig_t field and the size, as koffi lays them out (checked against g++ by test/cuda-headers.test.ts). */
export const ncclConfigLayout = () => ({
  size: koffi().sizeof(ncclConfig()),
  offsets: Object.fromEntries(
    Object.entries(ncclConfig().members ?? {}).map(([name, member]) => [name, member.offset]),
  ) as Record<string, number>,
});

/** ncclUniqueId: `struct { char internal[128]; }`, passed by value. */
const uniqueId = koffiType((k) => k.struct({ internal: k.array('uint8_t', NCCL_UNIQUE_ID_BYTES) }));

/** ncclTimeout (NCCL 2.24+) is not among the results tensorcomm acts on, but may still be reported. */
const NCCL_TIMEOUT = 8;

/** ncclResult_t enumerator names: NcclResult's keys with the `nccl` prefix (ncclInProgress, ...). */
const RESULT_NAMES = new Map<number, string>([
  ...Object.entries(NcclResult).map(([key, code]): [number, string] => [
    code,
    `nccl${key[0].toUpperCase()}${key.slice(1)}`,
  ]),
  [NCCL_TIMEOUT, 'ncclTimeout'],
]);

export function ncclResultName(code: number): string {
  return RESULT_NAMES.get(code) ?? `ncclResult ${code}`;
}

/** libnccl of this thread; loads it on the first call (GpuUnavailableError when it cannot be found). */
/** The NCCL wheels install under nvidia/nccl/lib. */
const NCCL_LIBRARY: LibrarySpec = {
  name: 'libnccl',
  envVar: 'TENSORCOMM_NCCL_LIBRARY',
  fileNames: ['libnccl.so.2', 'libnccl.so'],
  toolkitDirs: ['lib64', 'targets/x86_64-linux/lib'],
  wheelDirs: ['nvidia/nccl/lib'],
  installHint: 'install NCCL (libnccl2) or `pip install nvidia-nccl-cu13` / `nvidia-nccl-cu12`',
};

export const ncclLibrary: () => NcclLibrary = lazyBinding(NCCL_LIBRARY, bindNccl);

function bindNccl(library: LoadedLibrary): NcclLibrary {
  const lib = library.handle;
  const c = {
    getErrorString: lib.func('const char *ncclGetErrorString(int result)'),
    getLastError: lib.func('const char *ncclGetLastError(void *comm)'),
    getVersion: lib.func('int ncclGetVersion(int *version)'),
    getUniqueId: lib.func('int ncclGetUniqueId(uint8_t *uniqueId)'),
    commInitRankConfig: lib.func('ncclCommInitRankConfig', 'int', [
      'uint64_t *',
      'int',
      uniqueId(),
      'int',
      koffi().pointer(ncclConfig()),
    ]),
    commGetAsyncError: lib.func('int ncclCommGetAsyncError(void *comm, int *asyncError)'),
    commFinalize: lib.func('int ncclCommFinalize(void *comm)'),
    commDestroy: lib.func('int ncclCommDestroy(void *comm)'),
    commAbort: lib.func('int ncclCommAbort(void *comm)'),
    allReduce: lib.func(
      'int ncclAllReduce(void *sendbuff, void *recvbuff, size_t count, int datatype, int op, void *comm, void *stream)',
    ),
    broadcast: lib.func(
      'int ncclBroadcast(void *sendbuff, void *recvbuff, size_t count, int datatype, int root, void *comm, void *stream)',
    ),
    reduce: lib.func(
      'int ncclReduce(void *sendbuff, void *recvbuff, size_t count, int datatype, int op, int root, void *comm, void *stream)',
    ),
    allGather: lib.func(
      'int ncclAllGather(void *sendbuff, void *recvbuff, size_t sendcount, int datatype, void *comm, void *stream)',
    ),
    reduceScatter: lib.func(
      'int ncclReduceScatter(void *sendbuff, void *recvbuff, size_t recvcount, int datatype, int op, void *comm, void *stream)',
    ),
    send: lib.func(
      'int ncclSend(void *sendbuff, size_t count, int datatype, int peer, void *comm, void *stream)',
    ),
    recv: lib.func(
      'int ncclRecv(void *recvbuff, size_t count, int datatype, int peer, void *comm, void *stream)',
    ),
    groupStart: lib.func('int ncclGroupStart()'),
    groupEnd: lib.func('int ncclGroupEnd()'),
    redOpCreatePreMulSum: lib.func(
      'int ncclRedOpCreatePreMulSum(int *op, void *scalar, int datatype, int residence, void *comm)',
    ),
    redOpDestroy: lib.func('int ncclRedOpDestroy(int op, void *comm)'),
  };
  const handleSlot = new BigUint64Array(1);
  const intSlot = new Int32Array(1);

  /**
   * ncclInProgress passes: it is how a non-blocking communicator says the
   * call was queued (a blocking one never returns it); the caller polls
   * commGetAsyncError.
   */
  const failure = (call: string, code: number, comm: CommHandle): NcclError | undefined =>
    code === NcclResult.success || code === NcclResult.inProgress
      ? undefined
      : new NcclError(
          call,
          code,
          ncclResultName(code),
          c.getErrorString(code) ?? '',
          c.getLastError(comm) ?? '',
        );
  const check = (call: string, code: number, comm: CommHandle = 0n): void => {
    const error = failure(call, code, comm);
    if (error) throw error;
  };

  return {
    path: library.path,
    version() {
      check('ncclGetVersion', c.getVersion(intSlot));
      return intSlot[0];
    },
    getUniqueId() {
      const id = new Uint8Array(NCCL_UNIQUE_ID_BYTES);
      check('ncclGetUniqueId', c.getUniqueId(id));
      return id;
    },
    commInitRank(worldSize, uniqueId, rank, options) {
      checkInit(worldSize, uniqueId, rank);
      const config = {
        size: koffi().sizeof(ncclConfig()),
        magic: NCCL_CONFIG.apiMagic,
        version: NCCL_CONFIG.version,
        blocking: options.blocking ? 1 : 0,
        cgaClusterSize: NCCL_CONFIG.undefInt,
        minCTAs: NCCL_CONFIG.undefInt,
        maxCTAs: NCCL_CONFIG.undefInt,
        netName: null,
        splitShare: NCCL_CONFIG.undefInt,
      };
      handleSlot[0] = 0n;
      const code = c.commInitRankConfig(handleSlot, worldSize, { internal: uniqueId }, rank, config);
      const comm = handleSlot[0];
      const error = failure('ncclCommInitRankConfig', code, comm);
      if (error) {
        // A communicator that failed to initialise still holds NCCL's resources until aborted.
        if (comm !== 0n) c.commAbort(comm);
        throw error;
      }
      return comm;
    },
    commGetAsyncError(comm) {
      check('ncclCommGetAsyncError', c.commGetAsyncError(comm, intSlot), comm);
      return intSlot[0];
    },
    commFinalize: (comm) => check('ncclCommFinalize', c.commFinalize(comm), comm),
    commDestroy: (comm) => check('ncclCommDestroy', c.commDestroy(comm)),
    commAbort: (comm) => check('ncclCommAbort', c.commAbort(comm)),
    allReduce(send, recv, count, dtype, op, comm, stream) {
      checkCount('ncclAllReduce', count);
      check('ncclAllReduce', c.allReduce(send, recv, count, dtype, op, comm, stream), comm);
    },
    broadcast(send, recv, count, dtype, root, comm, stream) {
      checkCount('ncclBroadcast', count);
      check('ncclBroadcast', c.broadcast(send, recv, count, dtype, root, comm, stream), comm);
    },
    reduce(send, recv, count, dtype, op, root, comm, stream) {
      checkCount('ncclReduce', count);
      check('ncclReduce', c.reduce(send, recv, count, dtype, op, root, comm, stream), comm);
    },
    allGather(send, recv, sendCount, dtype, comm, stream) {
      checkCount('ncclAllGather', sendCount);
      check('ncclAllGather', c.allGather(send, recv, sendCount, dtype, comm, stream), comm);
    },
    reduceScatter(send, recv, recvCount, dtype, op, comm, stream) {
      checkCount('ncclReduceScatter', recvCount);
      check('ncclReduceScatter', c.reduceScatter(send, recv, recvCount, dtype, op, comm, stream), comm);
    },
    send(buffer, count, dtype, peer, comm, stream) {
      checkCount('ncclSend', count);
      check('ncclSend', c.send(buffer, count, dtype, peer, comm, stream), comm);
    },
    recv(buffer, count, dtype, peer, comm, stream) {
      checkCount('ncclRecv', count);
      check('ncclRecv', c.recv(buffer, count, dtype, peer, comm, stream), comm);
    },
    groupStart: () => check('ncclGroupStart', c.groupStart()),
    groupEnd: () => check('ncclGroupEnd', c.groupEnd()),
    redOpCreatePreMulSum(scalar, dtype, comm) {
      const residence = NcclScalarResidence.hostImmediate;
      check(
        'ncclRedOpCreatePreMulSum',
        c.redOpCreatePreMulSum(intSlot, scalar, dtype, residence, comm),
        comm,
      );
      return intSlot[0];
    },
    redOpDestroy: (op, comm) => check('ncclRedOpDestroy', c.redOpDestroy(op, comm), comm),
  };
}

function checkInit(worldSize: number, uniqueId: Uint8Array, rank: number): void {
  if (!Number.isInteger(worldSize) || worldSize < 1) {
    throw new RangeError(`ncclCommInitRankConfig: world size must be a positive integer, got ${worldSize}`);
  }
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) {
    throw new RangeError(`ncclCommInitRankConfig: rank must be an integer in [0, ${worldSize}), got ${rank}`);
  }
  if (!(uniqueId instanceof Uint8Array) || uniqueId.byteLength !== NCCL_UNIQUE_ID_BYTES) {
    throw new TypeError(
      `ncclCommInitRankConfig: the unique id is a Uint8Array of ${NCCL_UNIQUE_ID_BYTES} bytes`,
    );
  }
}

function checkCount(call: string, count: number): void {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new RangeError(`${call}: element count must be a non-negative integer, got ${count}`);
  }
}
