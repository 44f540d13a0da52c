/**
 * The job files ranks map (src/file-store/sealed-files.ts): a sealed memory
 * file linked into the job directory that nobody can shrink or grow, by its
 * name, through /proc or through a descriptor, yet that every descriptor
 * shares the memory of; a link that cannot be followed says why; with
 * TENSORCOMM_SEALED_FILES=0, or where sealed files cannot be made (said on
 * stderr), a plain file, as before. And how a consumer tells that a value's
 * path still names the file it opened (present-files.ts isStillAt), for
 * links and plain files alike.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  ftruncateSync,
  lstatSync,
  mkdtempSync,
  openSync,
  readlinkSync,
  readSync,
  rmSync,
  symlinkSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { defaultStoreRoot } from '../src/file-store/index.ts';
import { isStillAt } from '../src/file-store/present-files.ts';
import {
  createJobFile,
  discardJobFile,
  isSealed,
  type JobFile,
  makesSealedFiles,
  openJobFile,
  publishJobFile,
  removeJobFile,
  SEALED_FILES_ENV,
} from '../src/file-store/sealed-files.ts';
import { canMakeNodes, exitCodes, runOnNode } from './fixtures/node-namespace.ts';
import { nodeScript } from './fixtures/node-script.ts';

const repo = new URL('..', import.meta.url).pathname;
let dir: string;
const opened: number[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(defaultStoreRoot(), 'tensorcomm-sealed-test-'));
});
afterEach(() => {
  for (const fd of opened.splice(0)) closeSync(fd);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function open(path: string, flags: 'r' | 'r+' = 'r+'): number {
  const fd = openJobFile(path, flags);
  if (fd === undefined) throw new Error(`${path} is absent`);
  opened.push(fd);
  return fd;
}

function code(action: () => void): string | undefined {
  try {
    action();
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code;
  }
}

/** A published job file of 4 KiB at a new path; removed by the caller. */
function published(name: string): { path: string; file: JobFile } {
  const path = join(dir, name);
  const file = createJobFile(path, 4096);
  publishJobFile(file, path);
  return { path, file };
}

describe.skipIf(!makesSealedFiles())('a sealed job file', () => {
  it('is a link to /proc/<pid>/fd/<n> that opens the memory file itself, which nobody can resize', () => {
    const { path, file } = published('arena');
    try {
      expect(lstatSync(path).isSymbolicLink()).toBe(true);
      expect(readlinkSync(path)).toBe(`/proc/${process.pid}/fd/${file.fd}`);
      const fd = open(path);
      expect(isSealed(fd)).toBe(true);
      expect(code(() => truncateSync(path, 0))).toBe('EPERM');
      expect(code(() => truncateSync(readlinkSync(path), 0))).toBe('EPERM');
      expect(code(() => closeSync(openSync(path, 'w')))).toBe('EPERM');
      expect(code(() => ftruncateSync(fd, 0))).toBe('EPERM');
      expect(code(() => ftruncateSync(file.fd, 8192))).toBe('EPERM');
      // Writes within its size go to the one memory every descriptor shares.
      writeSync(fd, Buffer.from('tensorcomm'), 0, 10, 100);
      const read = Buffer.alloc(10);
      readSync(file.fd, read, 0, 10, 100);
      expect(read.toString()).toBe('tensorcomm');
    } finally {
      removeJobFile(file.fd, path);
    }
    expect(openJobFile(path, 'r')).toBeUndefined();
  });

  it('is not at its path until published: discarding it leaves a file already there alone', () => {
    const path = join(dir, 'taken');
    writeFileSync(path, 'not ours');
    const file = createJobFile(path, 4096);
    expect(code(() => publishJobFile(file, path))).toBe('EEXIST');
    discardJobFile(file, path);
    expect(lstatSync(path).isFile()).toBe(true);
    unlinkSync(path);
  });

  it('a link whose process is gone is an error naming the link, the reasons and the way out', () => {
    const path = join(dir, 'dangling');
    const gone = spawnSync(process.execPath, ['-e', '']).pid as number;
    symlinkSync(`/proc/${gone}/fd/3`, path);
    try {
      expect(() => openJobFile(path, 'r+')).toThrow(
        new RegExp(
          `^cannot open ${path}, the link to a sealed memory file of another rank \\(/proc/${gone}/fd/3\\): ` +
            'ENOENT\\. Its process ended, or runs in a PID namespace this one does not see\\. ' +
            `With ${SEALED_FILES_ENV}=0 on every rank, such files are plain files of the job directory instead\\.$`,
        ),
      );
    } finally {
      unlinkSync(path);
    }
  });

  it("isStillAt: true while the path links to the opened file, false once it is gone or another's", () => {
    const { path, file } = published('value');
    const fd = open(path, 'r');
    expect(isStillAt(path, fd)).toBe(true);
    removeJobFile(file.fd, path);
    expect(isStillAt(path, fd)).toBe(false);
    // The next value at the path, maybe under the same descriptor number: another file all the same.
    const next = published('value');
    try {
      expect(isStillAt(path, fd)).toBe(false);
    } finally {
      removeJobFile(next.file.fd, path);
    }
  });
});

describe('isStillAt on plain files', () => {
  it('true while the path names the opened file, false once removed or replaced', () => {
    const path = join(dir, 'plain');
    writeFileSync(path, 'first');
    const fd = open(path, 'r');
    expect(isStillAt(path, fd)).toBe(true);
    unlinkSync(path);
    expect(isStillAt(path, fd)).toBe(false);
    writeFileSync(path, 'second');
    expect(isStillAt(path, fd)).toBe(false);
    unlinkSync(path);
  });
});

describe(`${SEALED_FILES_ENV}=0`, () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  it('makes plain files at their paths, which can be truncated', async () => {
    vi.stubEnv(SEALED_FILES_ENV, '0');
    vi.resetModules();
    const plain = await import('../src/file-store/sealed-files.ts');
    expect(plain.makesSealedFiles()).toBe(false);
    const path = join(dir, 'plain-arena');
    const file = plain.createJobFile(path, 4096);
    try {
      expect(file.sealed).toBe(false);
      plain.publishJobFile(file, path);
      expect(lstatSync(path).isFile()).toBe(true);
      expect(lstatSync(path).size).toBe(4096);
      expect(plain.isSealed(file.fd)).toBe(false);
      truncateSync(path, 0);
    } finally {
      plain.removeJobFile(file.fd, path);
    }
  });
});

describe.skipIf(!canMakeNodes)('where sealed files cannot be made (no /proc)', () => {
  it('says so once on stderr, and the store hands values over through plain files', async () => {
    const script = await nodeScript('test/fixtures/sealed-files-fallback.ts');
    const run = await runOnNode([{ argv: [process.execPath, ...script] }], repo, {
      privateDirs: ['/proc'],
    });
    expect(exitCodes(run), run.out).toEqual([0]);
    const warnings = run.out.match(/^tensorcomm file store: .*$/gm);
    expect(warnings, run.out).toHaveLength(1);
    expect(warnings?.[0]).toMatch(
      /^tensorcomm file store: sealed memory files are unavailable \(ENOENT: .*'\/proc\/\d+\/fd\/\d+'\); the files ranks map are plain files of the job directory, .* \(SIGBUS\)\. TENSORCOMM_SEALED_FILES=0 chooses plain files without this warning\.$/,
    );
    const result = JSON.parse(/^result (.*)$/m.exec(run.out)?.[1] ?? 'null');
    const sum = ((1 << 18) * ((1 << 18) - 1)) / 2;
    expect(result).toEqual({
      makes: false,
      kinds: { 'v.in-file': 'file', 'tmp/arena.0': 'file' },
      sums: [sum, sum],
    });
  });
});
