/**
 * A sealed job file whose link its maker publishes between a peer's open
 * and the peer's look at the path (src/file-store/sealed-files.ts
 * openJobFile): the peer opens it, rather than taking the fresh link for one
 * whose process ended. Seen when process ranks map a region their group's
 * rank 0 makes as they all build their contexts.
 */
import type * as fs from 'node:fs';
import { closeSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it, vi } from 'vitest';
import { defaultStoreRoot } from '../src/file-store/index.ts';
import { createJobFile, openJobFile, publishJobFile, removeJobFile } from '../src/file-store/sealed-files.ts';

/** Paths whose next open fails as if their link were not published yet, and publishes it then. */
const publishOnOpen = new Map<string, () => void>();

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof fs>();
  const openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    const publish = publishOnOpen.get(String(path));
    if (publish) {
      publishOnOpen.delete(String(path));
      publish();
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT' });
    }
    return (real.openSync as (...a: unknown[]) => number)(path, ...rest);
  }) as typeof real.openSync;
  return { ...real, openSync, default: { ...real, openSync } };
});

const dir = mkdtempSync(join(defaultStoreRoot(), 'tensorcomm-sealed-race-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('opens a link published between its open and its look at the path', () => {
  const path = join(dir, 'region');
  const file = createJobFile(path, 4096);
  try {
    publishOnOpen.set(path, () => publishJobFile(file, path));
    const fd = openJobFile(path, 'r+');
    expect(publishOnOpen.has(path)).toBe(false);
    expect(fd).toBeTypeOf('number');
    closeSync(fd as number);
  } finally {
    removeJobFile(file.fd, path);
  }
});
