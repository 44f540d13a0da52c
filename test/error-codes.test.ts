/**
 * Every error class of the library extends TensorcommError and has a stable
 * `code` of its own, docs/errors.md documents exactly those codes, and a
 * code crosses from a rank to its launcher with the error.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DeviceOutOfMemoryError } from '../src/cuda/device-memory.ts';
import { CudaError, GpuUnavailableError } from '../src/cuda/errors.ts';
import { FileStoreCorruptError, FileStoreError, ShmSpaceError } from '../src/file-store/errors.ts';
import * as api from '../src/index.ts';
import { LaunchError } from '../src/launch/errors.ts';
import { describeError, reviveError } from '../src/launch/rank-report.ts';
import { NcclError } from '../src/nccl/errors.ts';
import {
  NetworkStoreBufferError,
  NetworkStoreFrameError,
  NetworkStoreHandshakeError,
  NetworkStoreProtocolError,
} from '../src/network-store/errors.ts';
import { P2PCompressionError, P2PHeaderError, P2PProtocolError } from '../src/p2p/errors.ts';
import { TopologyError } from '../src/predict/errors.ts';
import {
  RendezvousAuthError,
  RendezvousError,
  RendezvousTimeoutError,
  RendezvousUnreachableError,
} from '../src/rendezvous/errors.ts';
import { ClusterConfigError } from '../src/runtime/config/validate.ts';
import {
  CollectiveMismatchError,
  CommTimeoutError,
  InjectedFaultError,
  InvalidStateError,
  JobFailedError,
  RankFailedError,
  retold,
  TensorcommError,
  UnfinishedWorkError,
} from '../src/runtime/errors.ts';
import { rankTestFailure } from '../src/testing/failure.ts';
import { CallMismatchError } from '../src/thread-group/backend.ts';
import { WeightSyncError, WeightSyncHeaderError } from '../src/weight-sync/errors.ts';

const cudaFailure = new CudaError('cudaMalloc', 2, 'cudaErrorMemoryAllocation', 'out of memory');

/** One instance of every error class in src/, made as the library makes them. */
const SAMPLES: readonly Error[] = [
  new CommTimeoutError('timed out'),
  new RankFailedError('rank 1 failed', 1),
  new CollectiveMismatchError('mismatch'),
  new CallMismatchError('mismatch', 1),
  new InvalidStateError('the group was destroyed'),
  new UnfinishedWorkError("the rank's main returned without looking at 1 call(s) it started"),
  new JobFailedError('1 rank(s) failed', [{ rank: 0, error: new Error('boom') }]),
  new LaunchError('entry module /nowhere.ts does not exist'),
  new InjectedFaultError('injected'),
  new ClusterConfigError('cluster.collective', 'is unknown'),
  new TopologyError('topology.gpusPerNode', 'expected a positive integer, got -1'),
  new FileStoreError('mapping a file failed (errno 12)'),
  new FileStoreCorruptError('corrupt'),
  new ShmSpaceError('/dev/shm', 2, 1, 'srcSet'),
  new WeightSyncError('sync failed'),
  new WeightSyncHeaderError('bad header'),
  new GpuUnavailableError('no GPU'),
  cudaFailure,
  new DeviceOutOfMemoryError('out of memory on cuda:0', cudaFailure),
  new NcclError('ncclAllReduce', 5, 'ncclInvalidUsage', 'invalid usage'),
  new RendezvousError('bad frame'),
  new RendezvousAuthError('bad secret'),
  new RendezvousTimeoutError('timed out', ['key']),
  new RendezvousUnreachableError('no server'),
  new P2PHeaderError('bad header'),
  new P2PProtocolError('send met recvTensor'),
  new P2PCompressionError('codec zstd failed its startup probe'),
  new NetworkStoreHandshakeError('refused'),
  new NetworkStoreFrameError('bad frame'),
  new NetworkStoreBufferError('rank 1 refused the value'),
  new NetworkStoreProtocolError('rank 1 sent a malformed frame', 1),
];

/** Classes that never leave the module that throws them, so no caller can meet them. */
const INTERNAL = new Set([
  'UsageError', // cli/run-command.ts: printed with the usage text
  'RetryableConnectError', // rendezvous/client.ts: retried until the deadline
]);

const codeOf = (error: Error) => (error as TensorcommError).code;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('error codes', () => {
  it('every sample is a TensorcommError with a code of the ERR_TC_ form', () => {
    for (const error of SAMPLES) {
      expect(error, error.constructor.name).toBeInstanceOf(TensorcommError);
      expect(codeOf(error), error.constructor.name).toMatch(/^ERR_TC_[A-Z][A-Z0-9_]*$/);
    }
  });

  it('a code names one kind of error, and each kind has one code', () => {
    const byName = new Map<string, Set<string>>();
    const byCode = new Map<string, Set<string>>();
    for (const error of SAMPLES) {
      byName.set(error.name, (byName.get(error.name) ?? new Set()).add(codeOf(error)));
      byCode.set(codeOf(error), (byCode.get(codeOf(error)) ?? new Set()).add(error.name));
    }
    for (const [name, codes] of byName) expect([...codes], name).toHaveLength(1);
    for (const [code, names] of byCode) expect([...names], code).toHaveLength(1);
  });

  it('subclasses keep the classes they refine', () => {
    expect(new RendezvousTimeoutError('t', [])).toBeInstanceOf(CommTimeoutError);
    expect(new RendezvousUnreachableError('t')).toBeInstanceOf(CommTimeoutError);
    expect(new RendezvousAuthError('a')).toBeInstanceOf(RendezvousError);
    expect(new NetworkStoreProtocolError('p', 1)).toBeInstanceOf(RankFailedError);
    expect(new WeightSyncHeaderError('h')).toBeInstanceOf(WeightSyncError);
    expect(new DeviceOutOfMemoryError('m', cudaFailure)).toBeInstanceOf(CudaError);
    expect(new CallMismatchError('m', 1)).toBeInstanceOf(CollectiveMismatchError);
  });

  it('CUDA and NCCL errors keep the library number as errno, beside the code', () => {
    expect(cudaFailure).toMatchObject({
      code: 'ERR_TC_CUDA',
      errno: 2,
      codeName: 'cudaErrorMemoryAllocation',
    });
    expect(cudaFailure.message).toBe('cudaMalloc failed: cudaErrorMemoryAllocation (2): out of memory');
    expect(new DeviceOutOfMemoryError('m', cudaFailure)).toMatchObject({
      code: 'ERR_TC_DEVICE_OUT_OF_MEMORY',
      errno: 2,
    });
  });

  it('every error class the package exports has a sample', () => {
    const sampled = new Set(SAMPLES.map((error) => error.constructor));
    const exported = (Object.values(api) as unknown[]).filter(
      (value): value is abstract new (...args: never[]) => Error =>
        typeof value === 'function' && value.prototype instanceof Error && value !== TensorcommError,
    );
    expect(exported.length).toBeGreaterThan(20);
    for (const errorClass of exported) {
      expect(sampled.has(errorClass), errorClass.name).toBe(true);
      expect(errorClass.prototype, errorClass.name).toBeInstanceOf(TensorcommError);
    }
  });

  it('every error class in src/ has a sample, unless it never leaves its module', () => {
    const sampled = new Set(SAMPLES.map((error) => error.constructor.name));
    const declared = sourceFiles(fileURLToPath(new URL('../src/', import.meta.url))).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/\bclass (\w+Error) extends \w+/g)].map((m) => m[1]),
    );
    expect(declared.length).toBeGreaterThan(20);
    const unsampled = declared.filter((name) => !sampled.has(name) && !INTERNAL.has(name));
    expect(unsampled).toEqual([TensorcommError.name]);
  });

  it('docs/errors.md documents exactly the codes there are, each with its class', () => {
    const page = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
    const documented = new Set(page.match(/ERR_TC_[A-Z0-9_]+/g));
    expect([...documented].sort()).toEqual([...new Set(SAMPLES.map(codeOf))].sort());
    for (const error of SAMPLES) expect(page, error.name).toContain(`\`${error.name}\``);
  });

  it('a rank error reaches the launcher with its code', () => {
    const revived = reviveError(describeError(new CommTimeoutError('allReduce timed out')));
    expect(revived).toMatchObject({ name: 'CommTimeoutError', code: 'ERR_TC_COMM_TIMEOUT' });
    const plain = reviveError(describeError(new Error('boom')));
    expect('code' in plain).toBe(false);
  });

  it('a failed rank test shows the rank error with its name and code', () => {
    const failures = [
      { rank: 0, error: reviveError(describeError(new UnfinishedWorkError('a call nobody looked at'))) },
      { rank: 1, error: reviveError(describeError(new RankFailedError('rank 0 failed', 0))) },
    ];
    const shown = rankTestFailure(new JobFailedError('2 rank(s) failed', failures)) as AggregateError;
    expect(shown.errors[0]).toMatchObject({
      name: 'UnfinishedWorkError',
      code: 'ERR_TC_UNFINISHED_WORK',
      message: 'rank 0: a call nobody looked at',
    });
    expect(shown.errors[1]).toMatchObject({ name: 'RankFailedError', code: 'ERR_TC_RANK_FAILED' });
  });

  it('an error retold in other words keeps its class, code and fields, the original as its cause', () => {
    const original = new RankFailedError('rank 1 exited', 1);
    const told = retold(original, 'allReduce: rank 1 exited');
    expect(told).toBeInstanceOf(RankFailedError);
    expect(told).toMatchObject({ name: 'RankFailedError', code: 'ERR_TC_RANK_FAILED', failedRank: 1 });
    expect(told.message).toBe('allReduce: rank 1 exited');
    expect(told.cause).toBe(original);
    expect(told.stack).toMatch(/^RankFailedError: allReduce: rank 1 exited\n\s+at /);
    expect(retold(new TypeError('bad'), 'x: bad')).toBeInstanceOf(TypeError);
    expect(retold('thrown text', 'x: thrown text')).toMatchObject({
      name: 'Error',
      message: 'x: thrown text',
    });
  });
});
