/** Every decoder of bytes another party writes, as the fuzz drives it (bench/fuzz.ts, test/decoder-fuzz.test.ts). */
import type { DecoderTarget } from '../target.ts';
import { fileStoreRingRecord } from './file-store-ring-record.ts';
import { fileStoreValueHeader } from './file-store-value-header.ts';
import { networkStoreFrame } from './network-store-frame.ts';
import { p2pHeader } from './p2p-header.ts';
import { rendezvousFrame } from './rendezvous-frame.ts';
import { weightSyncBucket } from './weight-sync-bucket.ts';
import { weightSyncStreamEnd } from './weight-sync-stream-end.ts';

export const DECODER_TARGETS: readonly DecoderTarget[] = [
  p2pHeader,
  weightSyncBucket,
  weightSyncStreamEnd,
  fileStoreValueHeader,
  fileStoreRingRecord,
  networkStoreFrame,
  rendezvousFrame,
];
