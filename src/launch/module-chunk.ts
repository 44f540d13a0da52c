/**
 * An esbuild chunk of the user's code as CommonJS, line for line: its
 * import statements become `require` calls and its export statement an
 * assignment to `module.exports`, each on the lines it held, so the chunk's
 * source map still fits. A rank thread then loads the entry without Node's
 * ES module loader, whose start costs each thread more than the rest of the
 * entry (script-chunk-loader.ts). esbuild writes a chunk's imports at its top
 * and its exports at its end in a few fixed forms; a chunk with any other
 * form, or with another `import`/`export` line left, or declaring a name the
 * CommonJS wrapper binds (`require`, `module`, ...), is not converted.
 */
import { isBuiltin } from 'node:module';

/** One import statement, over one or more lines: `import <clause> from "<specifier>";` or `import "<specifier>";`. */
const IMPORT = /^import (?:([^;"]*?) from )?"([^"]+)";$/;
/** The export statement, over one or more lines: `export { a, b as c };`. */
const EXPORT = /^export \{([^}]*)\};$/;
/** What an import clause names: a default binding, then a namespace or a list of names. */
const CLAUSE = /^(?:([A-Za-z_$][\w$]*)(?:,\s*|$))?(?:\*\s+as\s+([A-Za-z_$][\w$]*)|\{([^}]*)\})?$/;
const NAME = /^[A-Za-z_$][\w$]*$/;
/** A top-level declaration of a name the CommonJS wrapper binds: the twin's own require and module would be the user's. */
const WRAPPER_NAME =
  /^(?:(?:async )?function\*?|class|var|let|const)\s+(?:require|module|exports|__filename|__dirname)\b/m;

/** `a as b` (an import or export list's entry, its line breaks kept) as `a: b`; undefined if it is no such entry. */
function renamed(list: string, flip: boolean): string | undefined {
  let failed = false;
  const text = list.replace(/([^,\n]+)/g, (entry) => {
    const [from, as] = entry.trim().split(/\s+as\s+/);
    if (!NAME.test(from) || (as !== undefined && !NAME.test(as))) {
      if (entry.trim() !== '') failed = true;
      return entry;
    }
    const lead = entry.slice(0, entry.indexOf(from));
    if (as === undefined) return entry;
    return flip ? `${lead}${as}: ${from}` : `${lead}${from}: ${as}`;
  });
  return failed ? undefined : text;
}

function requireOf(clause: string | undefined, specifier: string): string | undefined {
  const source = `require(${JSON.stringify(specifier)})`;
  if (clause === undefined) return `${source};`;
  const parts = CLAUSE.exec(clause.trim());
  if (!parts) return undefined;
  const [, defaultName, namespace, list] = parts;
  // A built-in's default export is the module itself; a chunk's is its `default`.
  const whole = isBuiltin(specifier) ? source : `${source}.default`;
  const bindings: string[] = [];
  if (defaultName) bindings.push(`${defaultName} = ${whole}`);
  if (namespace) bindings.push(`${namespace} = ${source}`);
  if (list !== undefined) {
    const names = renamed(list, false);
    if (names === undefined) return undefined;
    bindings.push(`{${names}} = ${source}`);
  }
  return bindings.length === 0 ? undefined : `const ${bindings.join(', ')};`;
}

/** Lines from `from` that make one statement, ending with the first that ends with `;`. */
function statementAt(lines: readonly string[], from: number): number {
  let end = from;
  while (end < lines.length - 1 && !lines[end].endsWith(';')) end++;
  return end;
}

/** Puts `text` in place of lines `first` to `last`, if it has as many lines (the source map must still fit). */
function replace(lines: string[], first: number, last: number, text: string): boolean {
  const replacement = text.split('\n');
  if (replacement.length !== last - first + 1) return false;
  lines.splice(first, replacement.length, ...replacement);
  return true;
}

/**
 * The chunk's text as CommonJS with the same lines, or undefined where it
 * holds a form this does not know. Only the leading import statements and
 * a closing export statement are rewritten, so a line of the user's own text
 * that looks like one (in a template literal) is never touched, and keeps
 * the chunk a module.
 */
export function commonJsChunk(text: string): string | undefined {
  if (WRAPPER_NAME.test(text)) return undefined;
  const lines = text.split('\n');
  let at = 0;
  for (; at < lines.length; at++) {
    if (lines[at] === '' || lines[at].startsWith('//')) continue;
    if (!lines[at].startsWith('import ')) break;
    const end = statementAt(lines, at);
    const parts = IMPORT.exec(lines.slice(at, end + 1).join('\n'));
    const replaced = parts && requireOf(parts[1], parts[2]);
    if (!replaced || !replace(lines, at, end, replaced)) return undefined;
    at = end;
  }
  let last = lines.length - 1;
  while (last > at && (lines[last] === '' || lines[last].startsWith('//# sourceMappingURL='))) last--;
  if (lines[last] === '};') {
    let first = last;
    while (first > at && !lines[first].startsWith('export {')) first--;
    const parts = EXPORT.exec(lines.slice(first, last + 1).join('\n'));
    const entries = parts && renamed(parts[1], true);
    if (entries) replace(lines, first, last, `module.exports = {${entries}};`);
  } else if (/^export \{.*\};$/.test(lines[last])) {
    const entries = renamed(EXPORT.exec(lines[last])?.[1] ?? '', true);
    if (entries) replace(lines, last, last, `module.exports = {${entries}};`);
  }
  const converted = lines.join('\n');
  if (/^(import|export)\b/m.test(converted)) return undefined;
  // Strict as the module was; line 1 is an import or esbuild's comment naming a file, never the user's code.
  if (!/^(const |require\(|\/\/)/.test(converted)) return undefined;
  return `'use strict';${converted}`;
}
