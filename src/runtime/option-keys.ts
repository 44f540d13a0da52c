/**
 * A key nobody reads is a mistake (`wordSize` for `worldSize`, `timeout` for
 * `timeoutMs`), not a default: a TypeError naming it, and the known key it is
 * closest to. Shared by the job launchers and every TensorStore call.
 */

/**
 * Throws unless every own key of `options` is one of `known`. `where` names
 * the call; a function is called only to build the message, since stores
 * check the options of every handshake.
 */
export function checkOptionKeys(
  options: object,
  known: Record<string, true>,
  where: string | (() => string),
): void {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(
      `${said(where)}: options must be an object, got ${options === null ? 'null' : typeof options}`,
    );
  }
  // for-in rather than Object.keys: no array per call on the stores' hot path.
  for (const key in options) {
    if (!Object.hasOwn(options, key) || Object.hasOwn(known, key)) continue;
    const near = closest(key, Object.keys(known));
    throw new TypeError(
      `${said(where)}: unknown option "${key}"${near ? ` (did you mean "${near}"?)` : ''}; known options: ${Object.keys(known).join(', ')}`,
    );
  }
}

const said = (where: string | (() => string)) => (typeof where === 'string' ? where : where());

/** The known key within two edits of `key`, if one is. */
function closest(key: string, known: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(key.toLowerCase(), name.toLowerCase());
    if (distance <= 2 && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length];
}
