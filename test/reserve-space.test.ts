/**
 * What a refused reservation says (src/file-store/reserve-space.ts), with
 * posix_fallocate answering ENOSPC as on a full file system: for a plain
 * file, a ShmSpaceError naming the directory; for a sealed memory file,
 * whose pages are memory and not room in the directory, an error naming
 * the memory.
 */
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { defaultStoreRoot, FileStoreError, ShmSpaceError } from '../src/file-store/index.ts';
import { reserveFileSpace } from '../src/file-store/reserve-space.ts';
import { createSealedFile, makesSealedFiles } from '../src/file-store/sealed-files.ts';

const ENOSPC = 28;

vi.mock('../src/runtime/libc.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/runtime/libc.ts')>();
  return { ...real, libc: () => ({ ...real.libc(), posixFallocate: () => ENOSPC }) };
});

const dir = mkdtempSync(join(defaultStoreRoot(), 'tensorcomm-reserve-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a reservation the system refuses (ENOSPC)', () => {
  it('of a plain file is a ShmSpaceError naming the directory', () => {
    const fd = openSync(join(dir, 'plain'), 'w+');
    try {
      expect(() => reserveFileSpace(fd, 0, 1 << 20, dir, 'test')).toThrow(ShmSpaceError);
    } finally {
      closeSync(fd);
    }
  });

  it.skipIf(!makesSealedFiles())('of a sealed memory file names the memory, not the directory', () => {
    const fd = createSealedFile('reserve-test', 1 << 20);
    try {
      let error: unknown;
      try {
        reserveFileSpace(fd, 0, 1 << 20, dir, 'test');
      } catch (e) {
        error = e;
      }
      expect(error).not.toBeInstanceOf(ShmSpaceError);
      expect(error).toBeInstanceOf(FileStoreError);
      expect((error as Error).message).toBe(
        "test: no memory for 1048576 bytes of a sealed memory file (errno 28): the machine, or the job's " +
          'memory limit, has no room for them',
      );
    } finally {
      closeSync(fd);
    }
  });
});
