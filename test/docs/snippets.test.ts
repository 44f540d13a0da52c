/**
 * Every TypeScript block of README.md and docs/** type-checks against the
 * package as a user imports it (`tensorcomm`, `tensorcomm/testing`: the
 * package's exports, i.e. dist/, which `npm test` builds first), in one tsc
 * program; the blocks marked runnable run. A block is a module of its own
 * unless marked:
 *
 * - `<!-- snippet: fragment -->`: lines from inside a program. It sees the
 *   library's and vitest's names it uses without importing them, and the
 *   variables of FRAGMENT_SCOPE, the names the guides' text puts in scope
 *   ("in a rank": `ctx`, a group `g`, a tensor `t`).
 * - `<!-- snippet: run -->`: a complete program, run; each
 *   `console.log(…); // shown` in it must print `shown`.
 *
 * A block whose first line is a comment naming a file (`// rank.ts`) is
 * written as that file, so the blocks of one page can import each other.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CodeBlock, codeBlocks, type Page, pages, root } from './markdown.ts';

const run = promisify(execFile);

/** The variables a fragment may use undeclared, with their types (in a rank of a job). */
const FRAGMENT_SCOPE: Record<string, string> = {
  ctx: 'RankContext',
  g: 'ThreadGroup',
  entry: 'URL',
  t: 'Tensor',
  tensor: 'Tensor',
  buffer: 'Tensor',
  grad: 'Tensor',
  grads: 'Tensor',
  weights: 'Tensor',
  full: 'Tensor',
  partial: 'Tensor',
  input: 'Tensor',
  output: 'Tensor',
  left: 'Tensor',
  right: 'Tensor',
  inputs: 'Tensor[]',
  outputs: 'Tensor[]',
  gatherList: 'Tensor[]',
  scatterList: 'Tensor[]',
  inputSplits: 'number[]',
  outputSplits: 'number[]',
  model: 'Iterable<[string, Tensor]>',
  params: 'Record<string, Tensor>',
  shards: 'unknown[]',
  loss: 'number',
  value: 'unknown',
  rank: 'number',
  consumer: 'number',
  producer: 'number',
  secret: 'string',
  peers: '{ rank: number; host: string; port: number }[]',
};

/** Modules whose exported names a fragment may use without importing them. */
const FRAGMENT_MODULES: Record<string, string[]> = {
  tensorcomm: exportedNames('src/index.ts'),
  'tensorcomm/testing': exportedNames('src/testing/index.ts'),
  vitest: ['describe', 'expect', 'it'],
};

/** The names an import or export list `{ a, type B, c as d }` binds: a, B, d. */
function boundNames(list: string): string[] {
  return list
    .split(',')
    .map(
      (item) =>
        item
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)
          .at(-1)!,
    )
    .filter((name) => name !== '');
}

/** The names a barrel module re-exports (`export { a, type B } from …`), as its source lists them. */
function exportedNames(path: string): string[] {
  const source = readFileSync(join(root, path), 'utf8');
  return [...source.matchAll(/^export (?:type )?\{([^}]*)\}/gm)].flatMap((m) => boundNames(m[1]));
}

/** A block as a file of the program: its text, and the page line of each of its lines (0 where none). */
interface SnippetFile {
  page: string;
  block: CodeBlock;
  path: string;
  text: string;
  pageLines: number[];
}

const isTypeScript = (block: CodeBlock) => block.info === 'ts' || block.info === 'typescript';
const MARKERS = new Set([undefined, 'fragment', 'run']);

/** The import statements at a fragment's start, and the rest of it. */
function splitImports(lines: string[]): { imports: number; imported: Set<string> } {
  let imports = 0;
  while (imports < lines.length && /^import\s|^\s*$|^\/\//.test(lines[imports])) {
    if (lines[imports].startsWith('import') && !/from\s+'[^']+';?\s*$|^import\s+'/.test(lines[imports])) {
      throw new Error(`a fragment's import must fit on one line: ${lines[imports]}`);
    }
    imports++;
  }
  const imported = new Set(
    lines.slice(0, imports).flatMap((line) => boundNames(/\{([^}]*)\}/.exec(line)?.[1] ?? '')),
  );
  return { imports, imported };
}

/**
 * A fragment as a module: imports of the names it uses, its own imports, the
 * variables it uses declared, and its lines in a block of their own, so a
 * name it declares itself shadows a declared one instead of clashing.
 */
function fragmentFile(block: CodeBlock): { text: string; pageLines: number[] } {
  const { imports, imported } = splitImports(block.lines);
  const body = block.lines.slice(imports).join('\n');
  const uses = (name: string) => new RegExp(`(?<![\\w$.])${name.replace('$', '\\$')}(?![\\w$])`).test(body);
  const head: string[] = [];
  for (const [module, names] of Object.entries(FRAGMENT_MODULES)) {
    const wanted = names.filter((name) => !imported.has(name) && uses(name));
    if (wanted.length > 0) head.push(`import { ${wanted.join(', ')} } from '${module}';`);
  }
  // Under names of their own, so the fragment's own imports of them cannot clash.
  head.push(
    "import type { RankContext as RankContext_, Tensor as Tensor_, ThreadGroup as ThreadGroup_ } from 'tensorcomm';",
  );
  const declared = Object.entries(FRAGMENT_SCOPE)
    .filter(([name]) => uses(name))
    .map(
      ([name, type]) =>
        `declare const ${name}: ${type.replace(/\b(RankContext|ThreadGroup|Tensor)\b/g, '$1_')};`,
    );
  const lines = [
    ...head,
    ...block.lines.slice(0, imports),
    ...declared,
    '{',
    ...block.lines.slice(imports),
    '}',
    'export {};',
  ];
  const pageLines = [
    ...head.map(() => 0),
    ...block.lines.slice(0, imports).map((_, i) => block.line + i),
    ...declared.map(() => 0),
    0,
    ...block.lines.slice(imports).map((_, i) => block.line + imports + i),
    0,
    0,
  ];
  return { text: lines.join('\n'), pageLines };
}

/** The files of `page`'s TypeScript blocks, under `dir`. */
function snippetFiles(page: Page, dir: string): SnippetFile[] {
  const pageDir = join(dir, page.path.replace(/\.md$/, '').replaceAll('/', '__'));
  return codeBlocks(page.text)
    .filter(isTypeScript)
    .map((block) => {
      if (!MARKERS.has(block.marker)) {
        throw new Error(`${page.path}:${block.line - 1}: unknown snippet marker "${block.marker}"`);
      }
      const named = /^\/\/ ([\w./-]+\.ts)\b/.exec(block.lines[0] ?? '')?.[1];
      const path = join(pageDir, named ?? `line-${block.line}.ts`);
      const file =
        block.marker === 'fragment'
          ? fragmentFile(block)
          : {
              // A module of its own even when it has no import or export.
              text: `${block.lines.join('\n')}\nexport {};`,
              pageLines: [...block.lines.map((_, i) => block.line + i), 0],
            };
      return { page: page.path, block, path, ...file };
    });
}

/** tsc's errors as `page:line: message`, each on the page line it is about. */
async function typeCheck(files: readonly SnippetFile[], dir: string): Promise<string[]> {
  for (const file of files) {
    mkdirSync(dirname(file.path), { recursive: true });
    writeFileSync(file.path, file.text);
  }
  // The repository's compiler options; `tensorcomm` resolves through package.json's exports, to dist/.
  const config = {
    extends: join(root, 'tsconfig.json'),
    compilerOptions: { noEmit: true, rootDir: '.', sourceMap: false, declaration: false },
    include: ['**/*.ts'],
  };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(config));
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const output = await run(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], {
    cwd: dir,
    maxBuffer: 16 << 20,
  }).then(
    ({ stdout }) => stdout,
    (error: { stdout?: string; code?: unknown }) => {
      // tsc exits 1 or 2 when it found errors, and prints them.
      if (typeof error.stdout !== 'string' || typeof error.code !== 'number') throw error;
      return error.stdout;
    },
  );
  const byPath = new Map(files.map((file) => [file.path, file]));
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const m = /^(.+?)\((\d+),(\d+)\): (.*)$/.exec(line);
      const file = m && byPath.get(join(dir, m[1]));
      if (!m || !file) return line;
      const at = file.pageLines[Number(m[2]) - 1] || file.block.line;
      return `${file.page}:${at}: ${m[4]}`;
    });
}

describe('code blocks of the docs', () => {
  let dir: string;
  let files: SnippetFile[];
  let errors: string[];

  beforeAll(async () => {
    expect(existsSync(join(root, 'dist/index.d.ts')), 'run npm run build first').toBe(true);
    mkdirSync(join(root, 'tmp'), { recursive: true });
    // Inside the repository, so `tensorcomm` and `vitest` resolve as in a project that depends on them.
    dir = mkdtempSync(join(root, 'tmp', 'snippets-'));
    // A page with one mistake of each kind a snippet can make, checked in the same program.
    const broken: Page = {
      path: 'broken.md',
      text: [
        '```ts',
        "import { Tensor } from 'tensorcomm';",
        "Tensor.zeros([2]).allReduce('sum');",
        '```',
        '<!-- snippet: fragment -->',
        '```ts',
        "await g.allReduce(t, { op: 'average' });",
        'notDeclared.x;',
        '```',
      ].join('\n'),
    };
    files = [...pages(), broken].flatMap((page) => snippetFiles(page, dir));
    errors = await typeCheck(files, dir);
  }, 120_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every TypeScript block type-checks against the package', () => {
    expect(files.filter((file) => file.page !== 'broken.md').length).toBeGreaterThan(40);
    expect(errors.filter((error) => !error.startsWith('broken.md:'))).toEqual([]);
  });

  it('a block that misuses the API, or a fragment that uses what is not in scope, fails it', () => {
    expect(
      errors.filter((error) => error.startsWith('broken.md:')).map((e) => /^.*? error TS\d+/.exec(e)?.[0]),
    ).toEqual([
      'broken.md:3: error TS2339', // no such method
      'broken.md:7: error TS2322', // no such reduce op
      'broken.md:8: error TS2304', // no such name
    ]);
  });

  it('the runnable blocks run, and print what their comments say', async () => {
    const runnable = files.filter((file) => file.block.marker === 'run');
    expect(runnable.length).toBeGreaterThan(0);
    for (const file of runnable) {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', file.path], {
        cwd: dirname(file.path),
        timeout: 60_000,
      });
      const shown = file.block.lines.flatMap(
        (line) => /console\.log\(.*\);\s*\/\/\s*(.+)$/.exec(line)?.[1] ?? [],
      );
      for (const text of shown) expect(stdout, `${file.page}:${file.block.line}`).toContain(text);
    }
  }, 120_000);
});
