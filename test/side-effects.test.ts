/**
 * package.json's `sideEffects` names exactly the library's modules whose top
 * level runs something for its effect (a registration, a side-effect import,
 * an entry's start). Bundlers, rank bundles among them, leave out every other
 * module none of whose exports is used, so a module missing from the list
 * would lose its registration in a bundle, and one listed without need keeps
 * its leftovers in every user's entry.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE = fileURLToPath(new URL('../', import.meta.url));
const SRC = join(PACKAGE, 'src');

/** How a top-level line that runs nothing begins, as the formatter writes it: declarations, comments, closers. */
const INERT =
  /^(import\s+(type\s+)?[{*\w]|export\s|const\s|let\s|var\s|function\s|async function\s|class\s|abstract class\s|interface\s|type\s|enum\s|declare\s|\/\/|\/\*|\*|#!|[}\])>])/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The top-level lines of `text` that run something, template literals' lines aside. */
function effectLines(text: string): string[] {
  const found: string[] = [];
  let inTemplate = false;
  for (const line of text.split('\n')) {
    const starts = !inTemplate;
    // A backtick not escaped opens or closes a template literal (none of the sources nests one in another over lines).
    for (const match of line.matchAll(/\\?`/g)) if (match[0] === '`') inTemplate = !inTemplate;
    if (!starts || line === '' || /^\s/.test(line) || INERT.test(line)) continue;
    found.push(line);
  }
  return found;
}

describe('sideEffects', () => {
  it('tells a line that runs something from declarations, comments and template text', () => {
    const text = [
      "import './setup.ts';",
      "import { a } from './a.ts';",
      'const usage = `tensorcomm run',
      'options: none`;',
      'registerThing(a);',
      '/** a comment */',
      'export function f() {}',
      'if (ready) void start();',
    ].join('\n');
    expect(effectLines(text)).toEqual([
      "import './setup.ts';",
      'registerThing(a);',
      'if (ready) void start();',
    ]);
  });

  it('package.json lists exactly the modules with top-level effects, in src/ and dist/ alike', () => {
    const withEffects = sourceFiles(SRC)
      .filter((file) => effectLines(readFileSync(file, 'utf8')).length > 0)
      .map((file) => relative(SRC, file).slice(0, -'.ts'.length))
      .sort();
    const listed = (
      JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { sideEffects: string[] }
    ).sideEffects;
    expect(withEffects).toContain('thread-group/ops');
    expect([...listed].sort()).toEqual(
      withEffects.flatMap((module) => [`./dist/${module}.js`, `./src/${module}.ts`]).sort(),
    );
  });
});
