/** Names and key prefixes of groups, derived only from their members so every rank agrees without talking. */

export function checkMembers(ranks: unknown, worldSize: number, where: string): number[] {
  if (!Array.isArray(ranks) || ranks.length === 0) {
    throw new TypeError(`${where}: ranks must be a non-empty array of global ranks`);
  }
  for (const r of ranks) {
    if (!Number.isInteger(r) || r < 0 || r >= worldSize) {
      throw new RangeError(`${where}: ${String(r)} is not a rank of this job (world size ${worldSize})`);
    }
  }
  const sorted = [...(ranks as number[])].sort((a, b) => a - b);
  const duplicate = sorted.find((r, i) => i > 0 && sorted[i - 1] === r);
  if (duplicate !== undefined) throw new RangeError(`${where}: rank ${duplicate} is listed twice`);
  return sorted;
}

function fnv1a(text: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** `text` itself when at most `max` characters long, else a 64-bit hash of it (the same on every rank). */
export function shortForm(text: string, max: number): string {
  return text.length <= max
    ? text
    : `#${fnv1a(text, 0x811c9dc5).toString(36)}${fnv1a(text, 0x01000193).toString(36)}`;
}

/** A short key prefix: the member list itself when short, else a 64-bit hash of it. */
export function groupKeyPrefix(kind: string, members: string, instance: number): string {
  return `${kind}${shortForm(members, 48)}.${instance}`;
}
