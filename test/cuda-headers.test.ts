/**
 * The binding declarations against the headers they stand for: a small C++
 * program compiled with g++ against /usr/local/cuda/include prints the sizes
 * and values koffi must agree with. NCCL's header is not installed here, so
 * its values are compared with NVIDIA/nccl's src/nccl.h.in (cited below) and
 * the config struct transcribed from it is laid out by g++.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUDA_IPC_HANDLE_BYTES } from '../src/cuda/api.ts';
import { CUDA_CONSTANTS, cudaStructSizes } from '../src/cuda/cudart.ts';
import { dim3Bytes } from '../src/cuda/kernel-loader.ts';
import { NCCL_UNIQUE_ID_BYTES, NcclDataType, NcclRedOp, NcclResult } from '../src/nccl/api.ts';
import { NCCL_CONFIG, ncclConfigLayout } from '../src/nccl/nccl-library.ts';

const CUDA_INCLUDE = '/usr/local/cuda/include';

// ncclConfig_t exactly as NVIDIA/nccl src/nccl.h.in declares it at v2.18.1-1 (`struct ncclConfig_v21700`).
const NCCL_CONFIG_V2_18 = `
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
} nccl_config_v2_18;`;

function headerProgram(): string {
  const number = (name: string, expression: string) =>
    `  std::printf("\\"${name}\\": %lld,\\n", (long long)(${expression}));`;
  const lines = [
    ...Object.keys(CUDA_CONSTANTS).map((name) => number(name, name)),
    number('CUDA_IPC_HANDLE_SIZE', 'CUDA_IPC_HANDLE_SIZE'),
    number('sizeof cudaIpcMemHandle_t', 'sizeof(cudaIpcMemHandle_t)'),
    number('sizeof cudaIpcEventHandle_t', 'sizeof(cudaIpcEventHandle_t)'),
    number('sizeof dim3', 'sizeof(dim3)'),
    number('INT_MIN', 'INT_MIN'),
    number('sizeof nccl_config_v2_18', 'sizeof(nccl_config_v2_18)'),
    ...Object.keys(ncclConfigLayout().offsets).map((field) =>
      number(`offsetof ${field}`, `offsetof(nccl_config_v2_18, ${field})`),
    ),
  ];
  return `#include <cuda_runtime_api.h>
#include <climits>
#include <cstddef>
#include <cstdio>
${NCCL_CONFIG_V2_18}
int main() {
  std::printf("{\\n");
${lines.join('\n')}
  std::printf("\\"end\\": 0}\\n");
  return 0;
}
`;
}

const haveCompiler = existsSync(CUDA_INCLUDE) && spawnSync('g++', ['--version']).status === 0;

describe.skipIf(!haveCompiler)('binding declarations against the CUDA headers', () => {
  let dir: string;
  let header: Record<string, number>;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tensorcomm-cuda-headers-'));
    const source = join(dir, 'sizes.cpp');
    const binary = join(dir, 'sizes');
    writeFileSync(source, headerProgram());
    execFileSync('g++', ['-I', CUDA_INCLUDE, '-o', binary, source], { stdio: 'pipe' });
    header = JSON.parse(execFileSync(binary, { encoding: 'utf8' }));
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every CUDA constant the bindings use has the header value', () => {
    for (const [name, value] of Object.entries(CUDA_CONSTANTS)) {
      expect({ name, value }).toEqual({ name, value: header[name] });
    }
  });

  it('IPC handles are 64-byte structs, passed as such', () => {
    expect(header.CUDA_IPC_HANDLE_SIZE).toBe(CUDA_IPC_HANDLE_BYTES);
    expect(cudaStructSizes().cudaIpcMemHandle_t).toBe(header['sizeof cudaIpcMemHandle_t']);
    expect(cudaStructSizes().cudaIpcEventHandle_t).toBe(header['sizeof cudaIpcEventHandle_t']);
  });

  it('dim3, passed by value to cudaLaunchKernel, has the header size', () => {
    expect(dim3Bytes()).toBe(header['sizeof dim3']);
  });

  it('koffi lays out ncclConfig_t as the C compiler does', () => {
    expect(ncclConfigLayout().size).toBe(header['sizeof nccl_config_v2_18']);
    expect(ncclConfigLayout().size).toBe(48);
    for (const [field, offset] of Object.entries(ncclConfigLayout().offsets)) {
      expect({ field, offset }).toEqual({ field, offset: header[`offsetof ${field}`] });
    }
    expect(NCCL_CONFIG.undefInt).toBe(header.INT_MIN);
  });
});

describe('NCCL constants against NVIDIA/nccl src/nccl.h.in', () => {
  // Values read from src/nccl.h.in at v2.18.1-1 and at v2.30 (master): unchanged between them.
  it('ncclResult_t, ncclDataType_t and ncclRedOp_t', () => {
    expect(NcclResult).toEqual({
      success: 0,
      unhandledCudaError: 1,
      systemError: 2,
      internalError: 3,
      invalidArgument: 4,
      invalidUsage: 5,
      remoteError: 6,
      inProgress: 7,
    });
    expect(NcclDataType).toEqual({
      int8: 0,
      uint8: 1,
      int32: 2,
      uint32: 3,
      int64: 4,
      uint64: 5,
      float16: 6,
      float32: 7,
      float64: 8,
      bfloat16: 9,
    });
    expect(NcclRedOp).toEqual({ sum: 0, prod: 1, max: 2, min: 3, avg: 4 });
  });

  it('config magic and version, unique id size', () => {
    // NCCL_API_MAGIC (0xcafebeef), NCCL_VERSION(2, 18, 0) = 2 * 10000 + 18 * 100, NCCL_UNIQUE_ID_BYTES.
    expect(NCCL_CONFIG.apiMagic).toBe(0xcafebeef);
    expect(NCCL_CONFIG.version).toBe(21800);
    expect(NCCL_UNIQUE_ID_BYTES).toBe(128);
  });
});
