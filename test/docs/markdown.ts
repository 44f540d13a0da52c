/**
 * The repository's Markdown as the docs tests read it: which pages there are,
 * their fenced code blocks (with the `<!-- snippet: … -->` marker before one),
 * their links, and the anchors GitHub gives their headings.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../../', import.meta.url));

/** A Markdown page: its path from the repository root, and its text. */
export interface Page {
  path: string;
  text: string;
}

export interface CodeBlock {
  /** The fence's info string, e.g. `ts`. */
  info: string;
  /** What `<!-- snippet: X -->` on the line before the fence says, if it is there. */
  marker?: string;
  /** 1-based line of the page where the block's first line is. */
  line: number;
  /** The block's lines, without the fence's indentation. */
  lines: string[];
}

export interface Link {
  target: string;
  line: number;
}

/** README.md and every page under docs/ but the generated API reference (docs/api/). */
export function pages(): Page[] {
  const under = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return path === 'docs/api' ? [] : under(path);
      return entry.name.endsWith('.md') ? [path] : [];
    });
  return ['README.md', ...under('docs')].map((path) => ({
    path,
    text: readFileSync(join(root, path), 'utf8'),
  }));
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)/;
const MARKER = /^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$/;

/** Lines outside fenced code blocks, with their 1-based numbers; the blocks themselves. */
function split(text: string): { prose: { text: string; line: number }[]; blocks: CodeBlock[] } {
  const lines = text.split('\n');
  const prose: { text: string; line: number }[] = [];
  const blocks: CodeBlock[] = [];
  let open: { fence: string; indent: number; block: CodeBlock } | undefined;
  lines.forEach((line, i) => {
    const fence = FENCE.exec(line);
    if (open) {
      const closes = line.trim().startsWith(open.fence) && /^(`+|~+)$/.test(line.trim());
      if (closes) open = undefined;
      else open.block.lines.push(line.slice(Math.min(open.indent, line.length - line.trimStart().length)));
      return;
    }
    if (!fence) {
      prose.push({ text: line, line: i + 1 });
      return;
    }
    const before = lines.slice(0, i).findLast((l) => l.trim() !== '');
    const marker = before === undefined ? undefined : MARKER.exec(before)?.[1];
    const block: CodeBlock = { info: fence[3], marker, line: i + 2, lines: [] };
    blocks.push(block);
    open = { fence: fence[2], indent: fence[1].length, block };
  });
  return { prose, blocks };
}

export function codeBlocks(text: string): CodeBlock[] {
  return split(text).blocks;
}

/** Inline code spans hold examples, not links. */
const withoutCodeSpans = (line: string) => line.replace(/(`+)[^`]*?\1/g, '');

/** Inline links and images, and reference definitions, outside code. */
export function links(text: string): Link[] {
  return split(text).prose.flatMap(({ text: line, line: number }) => {
    const bare = withoutCodeSpans(line);
    const inline = [...bare.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]);
    const reference = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(bare)?.[1];
    return [...inline, ...(reference ? [reference] : [])].map((target) => ({ target, line: number }));
  });
}

/**
 * A heading's anchor as GitHub makes it (github-slugger): the rendered text
 * lower-cased, everything but letters, digits, `-`, `_` and spaces dropped,
 * spaces made `-`.
 */
export function slug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim();
  return rendered
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a page has: its headings' (a repeated one gets -1, -2, …) and explicit `id`/`name` ones. */
export function anchors(text: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text: line } of split(text).prose) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      found.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s[^>]*(?:id|name)="([^"]+)"/g)) found.add(m[1]);
  }
  return found;
}

/** `path` (absolute) as messages name it: from the repository root. */
export const shown = (path: string) => relative(root, path);
