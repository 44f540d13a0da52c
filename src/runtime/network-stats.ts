/**
 * What a rank moved over the network (ctx.networkStats()): the bytes its
 * network store's TCP connections carried, frame headers included, so a user
 * can check how often a payload crossed between nodes. Shared memory and the
 * rendezvous are not the network store's and are not counted.
 */

/** Bytes one way and the other. */
export interface NetworkBytes {
  sentBytes: number;
  receivedBytes: number;
}

/** A rank's network bytes in all, and per peer (by global rank). */
export interface NetworkStats extends NetworkBytes {
  peers: Record<number, NetworkBytes>;
}

/** The totals and a copy of each peer's counts, as they stand now. */
export function networkStatsOf(peers: ReadonlyMap<number, NetworkBytes>): NetworkStats {
  const stats: NetworkStats = { sentBytes: 0, receivedBytes: 0, peers: {} };
  for (const [rank, bytes] of peers) {
    stats.peers[rank] = { sentBytes: bytes.sentBytes, receivedBytes: bytes.receivedBytes };
    stats.sentBytes += bytes.sentBytes;
    stats.receivedBytes += bytes.receivedBytes;
  }
  return stats;
}

/** A rank that never used the network: zeros and no peers. */
export function noNetworkStats(): NetworkStats {
  return networkStatsOf(new Map());
}
