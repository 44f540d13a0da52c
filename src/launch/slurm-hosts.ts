/**
 * Slurm's compressed host lists (`SLURM_JOB_NODELIST`): `gpu[01-04,07],cpu3`
 * names gpu01 … gpu04, gpu07 and cpu3; ranges keep their zero padding, and a
 * name may hold several bracket groups (`rack[1-2]-n[1-2]`, expanded as a
 * product). Bounded, so a hostile or mistyped list cannot allocate without end.
 */

/** More hosts than any Slurm job of this library's reach; a list expanding past it is refused. */
const MAX_HOSTS = 65_536;

/** Splits at the commas outside brackets. */
function topLevelParts(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (c === '[') depth++;
    else if (c === ']') depth--;
    if (depth < 0 || depth > 1) throw new SyntaxError(`unbalanced brackets at position ${i}`);
    if (c === ',' && depth === 0) {
      parts.push(list.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw new SyntaxError('an opening bracket is never closed');
  parts.push(list.slice(start));
  return parts;
}

/** `01-04,07` → ['01', '02', '03', '04', '07']. */
function expandRanges(ranges: string): string[] {
  return ranges.split(',').flatMap((range) => {
    const m = /^(\d+)(?:-(\d+))?$/.exec(range);
    if (!m) throw new SyntaxError(`"${range}" is not a number or a range of numbers`);
    const [, first, last = first] = m;
    const from = Number(first);
    const to = Number(last);
    if (to < from) throw new SyntaxError(`range "${range}" runs backwards`);
    if (to - from >= MAX_HOSTS) throw new RangeError(`range "${range}" names more than ${MAX_HOSTS} hosts`);
    const width = first.length;
    return Array.from({ length: to - from + 1 }, (_, i) => String(from + i).padStart(width, '0'));
  });
}

function expandName(name: string): string[] {
  const m = /^([^[]*)\[([^\]]*)\](.*)$/.exec(name);
  if (!m) return [name];
  const [, prefix, ranges, rest] = m;
  const tails = expandName(rest);
  const heads = expandRanges(ranges);
  if (heads.length * tails.length > MAX_HOSTS) throw new RangeError(`names more than ${MAX_HOSTS} hosts`);
  return heads.flatMap((head) => tails.map((tail) => `${prefix}${head}${tail}`));
}

export function expandSlurmHosts(list: string): string[] {
  try {
    const hosts: string[] = [];
    for (const part of topLevelParts(list.trim())) {
      if (part === '') throw new SyntaxError('an empty host name');
      hosts.push(...expandName(part));
      if (hosts.length > MAX_HOSTS) throw new RangeError(`names more than ${MAX_HOSTS} hosts`);
    }
    return hosts;
  } catch (error) {
    const e = error as Error;
    const Kind = e instanceof RangeError ? RangeError : SyntaxError;
    throw new Kind(`SLURM_JOB_NODELIST=${JSON.stringify(list)}: ${e.message}`);
  }
}
