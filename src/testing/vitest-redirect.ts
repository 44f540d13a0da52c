/**
 * Points every `import … from 'vitest'` of a rank thread at the stand-in
 * (vitest-stand-in.ts), through a Node module resolve hook registered in the
 * thread, so a test file imported there runs its top level without vitest's
 * runner (whose test() throws outside it) while `expect` stays vitest's own.
 * The stand-in itself gets the real vitest. The stand-in's URL goes on down
 * the chain, so a TypeScript loader registered before (tsx) loads it. The
 * hook is a data: URL module: it loads in Node's loader thread, where a .ts
 * file of its own would need a loader too.
 */
import { register } from 'node:module';

let registered = false;

export function redirectVitest(): void {
  if (registered) return;
  registered = true;
  const standIn = new URL(
    `./vitest-stand-in${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  ).href;
  const hooks = `
    const standIn = ${JSON.stringify(standIn)};
    export async function resolve(specifier, context, next) {
      if (specifier === 'vitest' && context.parentURL !== standIn) return next(standIn, context);
      return next(specifier, context);
    }`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
}
