/**
 * A chunk of the user's code as CommonJS, line for line (src/launch/module-chunk.ts):
 * every import form esbuild writes becomes the matching require, the export
 * statement an assignment to module.exports, every other line stays as it
 * was (so the chunk's source map still fits), and what it does not know
 * keeps the chunk a module.
 */
import { Module } from 'node:module';
import { describe, expect, it } from 'vitest';
import { commonJsChunk } from '../src/launch/module-chunk.ts';

// Written in two parts: a whole map comment in this file would be taken for the test file's own.
const MAP_COMMENT = '//# sourceMapping' + 'URL=entry.mjs.map';
const CHUNK = `import "./chunk-A.mjs";
import {
  Tensor,
  __name as nameOf
} from "./chunk-B.mjs";
import * as fs from "node:fs";
import path, { join } from "node:path";
import helper from "./chunk-C.mjs";

// src/entry.ts
async function main(ctx) {
  return [Tensor, nameOf, fs, path, join, helper, ctx];
}
export {
  main as default,
  Tensor
};
${MAP_COMMENT}
`;

/** Runs CommonJS `text` with `modules` for what it requires; returns its exports. */
function run(text: string, modules: Record<string, unknown>): Record<string, unknown> {
  const module = { exports: {} as Record<string, unknown> };
  // Without its source map comment: there is no map beside this test.
  const wrapped = new Function(
    'exports',
    'require',
    'module',
    text.replace(/^\/\/# sourceMappingURL=.*$/m, ''),
  );
  wrapped(module.exports, (specifier: string) => modules[specifier], module);
  return module.exports;
}

describe('commonJsChunk', () => {
  it('turns each import form and the export statement into CommonJS, every line where it was', () => {
    const text = commonJsChunk(CHUNK) as string;
    const before = CHUNK.split('\n');
    const after = text.split('\n');
    expect(after.length).toBe(before.length);
    // The user's code keeps its lines, so its source map still fits.
    for (let i = 9; i <= 12; i++) expect(after[i]).toBe(before[i]);
    expect(after.at(-2)).toBe(MAP_COMMENT);
    expect(text.startsWith(`'use strict';require("./chunk-A.mjs");`)).toBe(true);
    expect(text).not.toMatch(/^(import|export)\b/m);

    const required: string[] = [];
    const modules: Record<string, unknown> = {
      './chunk-A.mjs': {},
      './chunk-B.mjs': { Tensor: 'T', __name: 'N' },
      'node:fs': { fs: true },
      'node:path': { join: 'J' },
      './chunk-C.mjs': { default: 'H' },
    };
    const exports = run(
      text,
      new Proxy(modules, {
        get: (m, k: string) => {
          required.push(k);
          return m[k];
        },
      }),
    );
    expect(required).toEqual([
      './chunk-A.mjs',
      './chunk-B.mjs',
      'node:fs',
      'node:path',
      'node:path',
      './chunk-C.mjs',
    ]);
    expect(exports.Tensor).toBe('T');
    return expect((exports.default as (ctx: string) => Promise<unknown[]>)('ctx')).resolves.toEqual([
      'T',
      'N',
      { fs: true },
      // A built-in's default import is the module itself; a chunk's is its default export.
      { join: 'J' },
      'J',
      'H',
      'ctx',
    ]);
  });

  it('compiles as Node wraps a module, and runs strict', () => {
    const text = commonJsChunk('// a.ts\nfunction f() { return this; }\nexport { f };\n') as string;
    expect(text).toBeDefined();
    expect(() => new Function(Module.wrap(text))).not.toThrow();
    const f = run(text, {}).f as () => unknown;
    expect(f()).toBeUndefined();
  });

  it('keeps a chunk a module where it holds what it does not know', () => {
    // An import-like line inside the user's template literal is left alone, and so the chunk stays a module.
    expect(
      commonJsChunk('// a.ts\nconst code = `\nimport { x } from "y";\n`;\nexport { code };\n'),
    ).toBeUndefined();
    expect(commonJsChunk('export * from "./chunk-A.mjs";\n')).toBeUndefined();
    expect(commonJsChunk('import { a as } from "./chunk-A.mjs";\nexport { a };\n')).toBeUndefined();
    expect(commonJsChunk('// a.ts\nexport default 1;\n')).toBeUndefined();
    // A name the CommonJS wrapper binds, declared at the top: the rewritten requires would call the user's.
    expect(
      commonJsChunk('// a.ts\nfunction require(x) { return x; }\nexport { require as r };\n'),
    ).toBeUndefined();
    expect(commonJsChunk('// a.ts\nvar module = 1;\nexport { module as m };\n')).toBeUndefined();
    // Line 1 must be an import or esbuild's file comment: 'use strict' goes on it.
    expect(commonJsChunk('var x = 1;\nexport { x };\n')).toBeUndefined();
  });
});
