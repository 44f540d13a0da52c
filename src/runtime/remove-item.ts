/**
 * Removes the first `item` from `list` in place, keeping the order of the
 * rest; whether it was there. For the few-entry lists a call adds itself to
 * and leaves (pending calls, in-flight collectives): a Set allocates a new
 * table each time it shrinks back to empty, once per call.
 */
export function removeItem<T>(list: T[], item: T): boolean {
  const at = list.indexOf(item);
  if (at < 0) return false;
  for (let i = at; i < list.length - 1; i++) list[i] = list[i + 1];
  list.pop();
  return true;
}
