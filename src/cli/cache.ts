/**
 * `tensorcomm cache [--clear]`: where the rank bundles are cached
 * (launch/cached-bundles.ts), how many and how large, and a way to empty it.
 * The cache bounds itself; clearing is for a disk that is short, or a doubt.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BUNDLE_DIR_NAME } from '../launch/cached-bundles.ts';
import { BUNDLE_CACHE_DIR } from '../runtime/bundle-cache.ts';

export const CACHE_USAGE = `usage: tensorcomm cache [--clear]

Prints where the rank-thread bundles are cached, how many there are and their size.
--clear removes them all (run it when no job is starting: a job rebuilds what it needs).`;

function bytesUnder(path: string): number {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return 0;
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, name) => sum + bytesUnder(join(path, name)), 0);
}

export async function cacheCommand(
  argv: string[],
  log: (line: string) => void = console.log,
  dir = BUNDLE_CACHE_DIR,
): Promise<number> {
  if (argv[0] === '--help' || argv[0] === '-h') {
    log(CACHE_USAGE);
    return 0;
  }
  if (argv.length > 1 || (argv.length === 1 && argv[0] !== '--clear')) {
    console.error(`tensorcomm cache: unknown arguments ${argv.join(' ')}\n\n${CACHE_USAGE}`);
    return 2;
  }
  const bundles = statSync(dir, { throwIfNoEntry: false })
    ? readdirSync(dir).filter((name) => BUNDLE_DIR_NAME.test(name)).length
    : 0;
  const megabytes = (bytesUnder(dir) / 2 ** 20).toFixed(1);
  if (argv[0] === '--clear') {
    rmSync(dir, { recursive: true, force: true });
    log(`removed ${dir}: ${bundles} bundles, ${megabytes} MiB`);
  } else {
    log(`${dir}: ${bundles} bundles, ${megabytes} MiB`);
  }
  return 0;
}
