/**
 * Rank threads share their launcher's compiled reduction kernels
 * (src/tensor/simd-kernels.ts): a thread instantiates the WebAssembly module
 * it is handed instead of assembling its own (6-10 ms a thread, in the
 * start-up barrier's reduction at that); a reduction of nothing needs no
 * kernel at all; and a thread bundle keeps the module's bytes, so a process
 * that starts its threads from it compiles them without assembling.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import '../src/index.ts';
import { typeScriptBootstrap } from '../src/launch/module-url.ts';
import { kernelBytes, kernelModule } from '../src/tensor/simd-kernels.ts';
import { entryBundle } from './fixtures/root-importer.ts';

describe('the kernel module', () => {
  it('is compiled once here and instantiated in a thread it is handed to, after a reduction of nothing', async () => {
    const module = kernelModule();
    expect(Object.prototype.toString.call(module)).toBe('[object WebAssembly.Module]');
    expect(kernelModule()).toBe(module);
    const url = new URL('./fixtures/kernel-module-worker.ts', import.meta.url).href;
    const worker = new Worker(typeScriptBootstrap(url), { eval: true, workerData: { module } });
    try {
      const report = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      expect(report).toEqual({ adopted: true, simd: true, sum: [4, 6] });
    } finally {
      await worker.terminate();
    }
  });

  it('comes with a thread bundle as its bytes, so a process that uses the bundle need not assemble it', async () => {
    const entry = new URL('./fixtures/bundled-entry.ts', import.meta.url).href;
    const bundle = await entryBundle(entry);
    const bytes = readFileSync(join(dirname(fileURLToPath(bundle!.setupUrl)), 'kernels.wasm'));
    expect(new Uint8Array(bytes)).toEqual(kernelBytes());
  });
});
