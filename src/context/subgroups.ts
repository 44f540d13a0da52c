/**
 * The member lists of torch's new_subgroups and split_group, checked: every
 * rank computes the same lists from the same arguments, without talking.
 */

/** newSubgroups: the job's ranks in consecutive blocks of `groupSize`. */
export function subgroupBlocks(worldSize: number, groupSize: unknown): number[][] {
  const where = 'newSubgroups';
  if (!Number.isInteger(groupSize) || (groupSize as number) <= 0) {
    throw new RangeError(`${where}: groupSize must be a positive integer, got ${String(groupSize)}`);
  }
  const size = groupSize as number;
  if (size > worldSize) {
    throw new RangeError(`${where}: groupSize ${size} exceeds the world size ${worldSize}`);
  }
  if (worldSize % size !== 0) {
    throw new RangeError(`${where}: the world size ${worldSize} is not divisible by groupSize ${size}`);
  }
  return Array.from({ length: worldSize / size }, (_, block) =>
    Array.from({ length: size }, (_, i) => block * size + i),
  );
}

/**
 * splitGroup: each list of the parent's group ranks as global ranks, in the
 * list's order (which is the new group's rank order). Lists must be
 * non-empty and disjoint, of the parent's ranks.
 */
export function splitMembers(
  splitRanks: unknown,
  parentRanks: readonly number[],
  parentName: string,
): number[][] {
  const where = 'splitGroup';
  if (!Array.isArray(splitRanks) || splitRanks.some((list) => !Array.isArray(list))) {
    throw new TypeError(`${where}: splitRanks must be an array of arrays of group ranks of "${parentName}"`);
  }
  const splitOf = new Map<number, number>();
  return (splitRanks as unknown[][]).map((list, split) => {
    if (list.length === 0) throw new RangeError(`${where}: split ${split} is empty`);
    return list.map((r) => {
      if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= parentRanks.length) {
        throw new RangeError(
          `${where}: ${String(r)} in split ${split} is not a rank of group "${parentName}" (size ${parentRanks.length})`,
        );
      }
      const earlier = splitOf.get(r as number);
      if (earlier !== undefined) {
        throw new RangeError(
          earlier === split
            ? `${where}: group rank ${r} is listed twice in split ${split}`
            : `${where}: group rank ${r} is in split ${earlier} and split ${split}; splits must not overlap`,
        );
      }
      splitOf.set(r as number, split);
      return parentRanks[r as number];
    });
  });
}
