/**
 * Locating modules for rank threads. Workers start from a URL. spawnThreads'
 * threads load a bundle (rank-bundle.ts); where there is none, and in pooled
 * threads (which import test files as they come), TypeScript sources (entry
 * modules, or this library's own sources under vitest) are loaded through
 * tsx, registered inside the worker because Node 20 ignores `--import`
 * loaders in worker execArgv.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LaunchError } from './errors.ts';

export function resolveEntry(entry: string | URL, where: string): URL {
  const url =
    entry instanceof URL
      ? entry
      : /^[a-z][a-z0-9+.-]*:/i.test(entry) && !isAbsolute(entry)
        ? new URL(entry)
        : pathToFileURL(resolve(entry));
  if (url.protocol === 'file:' && !existsSync(fileURLToPath(url))) {
    throw new LaunchError(`${where}: entry module ${fileURLToPath(url)} does not exist`);
  }
  return url;
}

export function needsTypeScriptLoader(...urls: string[]): boolean {
  return urls.some((u) => /\.[cm]?tsx?$/.test(new URL(u).pathname));
}

function tsxRoot(): string {
  return dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
}

/** The `--import` loader a child process needs when any of these modules is TypeScript, else undefined. */
export function typeScriptLoaderUrl(...urls: string[]): string | undefined {
  return needsTypeScriptLoader(...urls) ? pathToFileURL(join(tsxRoot(), 'dist/loader.mjs')).href : undefined;
}

/** Code for an eval worker that registers tsx and then imports `bootstrapUrl`. */
export function typeScriptBootstrap(bootstrapUrl: string): string {
  const tsxApi = pathToFileURL(join(tsxRoot(), 'dist/esm/api/index.mjs')).href;
  return `(async () => {
    const { register } = await import(${JSON.stringify(tsxApi)});
    register();
    await import(${JSON.stringify(bootstrapUrl)});
  })();`;
}

/**
 * Code for an eval worker that turns source maps on (before any module loads,
 * so all follow them) and starts from `bootstrapUrl`: through `scriptLoader`
 * where the bundle converted it (script-chunks.ts), without Node's ES module
 * loader, else by importing it.
 */
export function sourceMapsBootstrap(bootstrapUrl: string, scriptLoader?: string): string {
  const url = JSON.stringify(bootstrapUrl);
  const start =
    scriptLoader === undefined
      ? `import(${url});`
      : `require(${JSON.stringify(scriptLoader)}).loadScriptChunk(${url});`;
  return `process.setSourceMapsEnabled(true);
  ${start}`;
}
