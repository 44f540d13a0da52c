/**
 * What 'vitest' is in a rank thread (vitest-redirect.ts points the import of
 * a test file there): vitest's own exports (expect, assert, vi, …: they work
 * outside its runner), except that describe blocks are collected for the
 * rank tests inside them (registry.ts), while tests and hooks register
 * nothing: only rank test bodies run in rank threads, one per job.
 */
import { addSuite } from './registry.ts';

export * from 'vitest';

type Call = (args: unknown[]) => void;

/** vitest's table form (describe.each`a | b ${1} | ${2}`): one object per row, keyed by the header. */
function tableCases(strings: TemplateStringsArray, values: unknown[]): object[] {
  const header = strings.join('').trim().replace(/ /g, '').split('\n')[0].split('|');
  const rows: object[] = [];
  for (let i = 0; i + header.length <= values.length; i += header.length) {
    rows.push(Object.fromEntries(header.map((key, j) => [key, values[i + j]])));
  }
  return rows;
}

/** `.each(cases)` / `.for(cases)`: the call once per case, its function given the case as vitest gives it. */
function perCase(call: Call, spread: boolean) {
  return (cases: unknown, ...values: unknown[]) => {
    const list: unknown[] =
      Array.isArray(cases) && 'raw' in cases
        ? tableCases(cases as TemplateStringsArray, values)
        : (cases as unknown[]);
    const arrays = spread && list.every(Array.isArray);
    return (name: unknown, ...rest: unknown[]) => {
      const fn = rest.find((a) => typeof a === 'function') as ((...a: unknown[]) => unknown) | undefined;
      for (const item of list) {
        call([name, fn && (() => (arrays ? fn(...(item as unknown[])) : fn(item)))]);
      }
    };
  };
}

/** describe / test with every modifier vitest chains (.skip, .only, .concurrent, .skipIf(c), .each, …). */
function chainable(call: Call): unknown {
  const proxy: unknown = new Proxy((...args: unknown[]) => call(args), {
    get(_target, key) {
      if (key === 'each') return perCase(call, true);
      if (key === 'for') return perCase(call, false);
      if (key === 'skipIf' || key === 'runIf') return () => proxy;
      // Not a thenable, not a primitive.
      if (typeof key === 'symbol' || key === 'then') return undefined;
      return proxy;
    },
  });
  return proxy;
}

const none = () => {};

export const describe = chainable((args) => {
  addSuite(args.find((a) => typeof a === 'function') as (() => unknown) | undefined);
});
export const suite = describe;
export const test = chainable(none);
export const it = test;
export const bench = test;
export const beforeAll = none;
export const afterAll = none;
export const beforeEach = none;
export const afterEach = none;
export const aroundAll = none;
export const aroundEach = none;
export const onTestFailed = none;
export const onTestFinished = none;
