import { describe, expect, it } from 'vitest';
import { SlotTable } from '../src/memory-store/slot-table.ts';

const key = (text: string) => new TextEncoder().encode(text);

function tableOf(slots: number): SlotTable {
  return new SlotTable(SlotTable.create({ slots, buckets: 2, inlineBytes: 64 }));
}

function insert(table: SlotTable, name: string): number {
  const bytes = key(name);
  const { bucket, hash } = table.bucketOf(bytes);
  return table.insert(bytes, bucket, hash);
}

function find(table: SlotTable, name: string): number {
  const bytes = key(name);
  const { bucket, hash } = table.bucketOf(bytes);
  return table.find(bytes, bucket, hash);
}

function remove(table: SlotTable, name: string): void {
  table.remove(find(table, name), table.bucketOf(key(name)).bucket);
}

describe('SlotTable', () => {
  it('hands out every slot of a new table once, then reports it full', () => {
    const table = tableOf(3);
    expect(table.countInUse()).toBe(0);
    const slots = ['a', 'b', 'c'].map((name) => insert(table, name));
    expect(new Set(slots).size).toBe(3);
    expect(slots.every((s) => s >= 0 && s < 3)).toBe(true);
    expect(table.countInUse()).toBe(3);
    expect(insert(table, 'd')).toBe(-1);
    expect(['a', 'b', 'c'].map((name) => find(table, name))).toEqual(slots);
  });

  it('reuses a removed slot before reporting full again, and keeps the other keys', () => {
    const table = tableOf(3);
    for (const name of ['a', 'b', 'c']) insert(table, name);
    const b = find(table, 'b');
    remove(table, 'b');
    expect(table.countInUse()).toBe(2);
    expect(find(table, 'b')).toBe(-1);
    expect(insert(table, 'd')).toBe(b);
    expect(insert(table, 'e')).toBe(-1);
    for (const name of ['a', 'c', 'd']) remove(table, name);
    expect(table.countInUse()).toBe(0);
    const again = ['f', 'g', 'h'].map((name) => insert(table, name));
    expect(new Set(again)).toEqual(new Set([0, 1, 2]));
    expect(insert(table, 'i')).toBe(-1);
  });
});
