/**
 * allToAll of small host tensors in the group's shared region
 * (region-call.ts): each rank brings, ahead of its pieces, a table of where
 * in its record the piece for each rank starts, and takes its own piece of
 * every peer's record. Ranks may send different amounts, so whether a call
 * fits the region is each rank's to say (RegionSteps.fits): a rank whose
 * pieces do not fit its record goes straight to the keyed store's algorithm,
 * and its peers follow once the verdict is in (CallRegion.decline).
 * Between 2 thread ranks a 4 KiB allToAllSingle took 45-70 µs through the
 * keyed store, whose handshakes cost the same as a broadcast's twice over.
 */
import type { Tensor } from '../../tensor/tensor.ts';
import { fitsRecord, type RegionSteps } from './region-call.ts';
import { copyElements } from './slices.ts';

/** Bytes of the table ahead of the pieces: n + 1 offsets (32-bit), rounded up so the pieces start 8-byte aligned. */
const tableBytes = (ranks: number) => Math.ceil(((ranks + 1) * 4) / 8) * 8;

/** outputs[q] receives rank q's piece for this rank; inputs[p] goes to rank p. */
export const allToAllSteps: RegionSteps<readonly Tensor[], readonly Tensor[]> = {
  fits(region, outputs, inputs) {
    const bytes = inputs.reduce((sum, t) => sum + t.nbytes, tableBytes(region.size));
    return fitsRecord(region, bytes, [...outputs, ...inputs]);
  },
  bring(region, slot, _outputs, inputs) {
    const table = new Uint32Array(region.size + 1);
    const start = tableBytes(region.size);
    for (let p = 0; p < inputs.length; p++) {
      region.bring(slot, start + table[p], inputs[p].bytes());
      table[p + 1] = table[p] + inputs[p].nbytes;
    }
    region.bring(slot, 0, new Uint8Array(table.buffer));
  },
  take(region, slot, call, outputs, inputs) {
    const me = region.rank;
    const start = tableBytes(region.size);
    for (let q = 0; q < region.size; q++) {
      if (q === me) {
        copyElements(outputs[q], 0, inputs[q]);
        continue;
      }
      const from = region.dataWord(slot, q, me);
      const sent = region.dataWord(slot, q, me + 1) - from;
      const into = outputs[q];
      if (sent !== into.nbytes)
        throw region.layoutMismatch(call, q, `${into.describe()} (${into.nbytes} bytes)`, `${sent} bytes`);
      region.take(slot, q, start + from, into.bytes());
    }
  },
};
