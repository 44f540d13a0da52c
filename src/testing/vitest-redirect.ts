/**
 * Points every `import … from 'vitest'` of a rank thread at the stand-in
 * (vitest-stand-in.ts), through a Node module resolve hook registered in the
 * thread, so a test file imported there runs its top level without vitest's
 * runner (whose test() throws outside it) while `expect` stays vitest's own.
 * The stand-in itself gets the real vitest. The stand-in's URL goes on down
 * the chain, so a TypeScript loader registered before (tsx) loads it.
 *
 * The hook is synchronous and runs in the thread (module.registerHooks, Node
 * 22.15 and later): Node 26 deprecates module.register's hooks, which run in a
 * loader thread of their own and were one more thread per rank. Node 20 has
 * only those, so there the hook is a data: URL module (in the loader thread,
 * a .ts file of its own would need a loader too).
 */
import * as nodeModule from 'node:module';

let registered = false;

function standInUrl(): string {
  return new URL(`./vitest-stand-in${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
}

export function redirectVitest(): void {
  if (registered) return;
  registered = true;
  const standIn = standInUrl();
  // Read off the namespace: a named import of registerHooks fails to link on Node 20.
  const { registerHooks } = nodeModule as Partial<typeof nodeModule>;
  if (registerHooks !== undefined) {
    registerHooks({
      resolve: (specifier, context, next) =>
        next(specifier === 'vitest' && context.parentURL !== standIn ? standIn : specifier, context),
    });
    return;
  }
  const hooks = `
    const standIn = ${JSON.stringify(standIn)};
    export async function resolve(specifier, context, next) {
      if (specifier === 'vitest' && context.parentURL !== standIn) return next(standIn, context);
      return next(specifier, context);
    }`;
  nodeModule.register(`data:text/javascript,${encodeURIComponent(hooks)}`);
}
