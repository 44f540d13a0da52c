/**
 * A seeded slice of the decoder fuzz (bench/fuzz.ts runs a million inputs per
 * decoder): every decoder of bytes another party writes accepts a malformed
 * message or refuses it with its own error class, never another exception;
 * plus the inputs that once raised one.
 */
import { describe, expect, it } from 'vitest';
import { main as fuzzBench, parseFuzzArgs } from '../bench/fuzz.ts';
import { FileStoreCorruptError } from '../src/file-store/errors.ts';
import { decodeRecord, valueRecord } from '../src/file-store/ring-records.ts';
import { P2PHeaderError } from '../src/p2p/errors.ts';
import { decodeHeader } from '../src/p2p/header.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { mulberry32 } from './fuzz/random.ts';
import { fuzzDecoder } from './fuzz/run-fuzz.ts';
import { DECODER_TARGETS } from './fuzz/targets/index.ts';

const INPUTS = 20_000;
const SEED = 2026;

describe.each(DECODER_TARGETS.map((target) => [target.name, target] as const))('%s decoder', (_, target) => {
  it('decodes the valid messages its fuzz description makes', () => {
    const rnd = mulberry32(SEED);
    for (let i = 0; i < 200; i++) {
      const { bytes } = target.sample(rnd);
      expect(() => target.decode(bytes), Buffer.from(bytes).toString('hex')).not.toThrow();
    }
  });

  it(`${INPUTS} seeded malformed inputs: each accepted or refused with its own error class`, () => {
    const report = fuzzDecoder(target, { inputs: INPUTS, seed: SEED });
    expect(report.offending).toEqual([]);
    expect(report.foreign).toBe(0);
    // Both outcomes occur, so the inputs reach past the first checks as well as into them.
    expect(report.refused).toBeGreaterThan(INPUTS / 2);
    expect(report.accepted).toBeGreaterThan(INPUTS / 100);
  });
});

describe('decoder inputs that once raised a foreign exception', () => {
  it("a p2p header whose earlier tensors' sizes push a later record past the end is a P2PHeaderError", () => {
    // The fuzz of issue 40 reported this input by its first 40 bytes; the rest, up to the 76 bytes it
    // declares, is zeros: tensor 0 has 3 sizes, so tensor 1's record starts at byte 64 and would end at 80.
    const bytes = new Uint8Array(76);
    bytes.set(
      Buffer.from('54435032030102006900000003000000030000004c00000000000000030000000000000000000000', 'hex'),
    );
    expect(() => decodeHeader(bytes)).toThrow(P2PHeaderError);
    expect(() => decodeHeader(bytes)).toThrow(
      /\(76 bytes\): tensor 1: its 16-byte record at byte 64 and the 3-byte skeleton run past the end/,
    );
  });

  const record = (key: Uint8Array) =>
    Buffer.concat(valueRecord(1, key, new Uint8Array(0), Tensor.zeros([2], 'int8'), { at: 'file' }));

  it('a ring record whose key is not UTF-8 is a FileStoreCorruptError naming the key', () => {
    const bytes = record(Uint8Array.of(0xff, 0xfe));
    expect(() => decodeRecord(bytes)).toThrow(FileStoreCorruptError);
    expect(() => decodeRecord(bytes)).toThrow(/a value record's key is not valid UTF-8/);
  });

  it('a ring record of an unknown dtype code is a FileStoreCorruptError naming the code', () => {
    const bytes = record(Uint8Array.of(0x6b));
    bytes[5] = 200;
    expect(() => decodeRecord(bytes)).toThrow(FileStoreCorruptError);
    expect(() => decodeRecord(bytes)).toThrow(/a value record has unknown dtype code 200/);
  });
});

describe('bench/fuzz', () => {
  it('prints a row per decoder and finds nothing foreign in a short run', async () => {
    const lines: string[] = [];
    const reports = await fuzzBench(['--inputs', '300', '--seed', '7'], (line) => lines.push(line));
    expect(reports.map((r) => r.decoder)).toEqual(DECODER_TARGETS.map((t) => t.name));
    expect(reports.every((r) => r.inputs === 300 && r.accepted + r.refused === 300)).toBe(true);
    for (const target of DECODER_TARGETS) {
      expect(lines.some((line) => line.trimStart().startsWith(`${target.name} `))).toBe(true);
    }
  });

  it('refuses a malformed option, naming it', () => {
    expect(() => parseFuzzArgs(['--inputs', 'many'])).toThrow(
      /--inputs must be a non-negative integer, got "many"/,
    );
    expect(() => parseFuzzArgs(['--rounds', '3'])).toThrow(/Unknown option '--rounds'/);
    expect(parseFuzzArgs([])).toEqual({ inputs: 1_000_000, seed: 12345, json: undefined });
  });
});
