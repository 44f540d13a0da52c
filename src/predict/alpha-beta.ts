/**
 * The alpha-beta (Hockney) model, for links NCCL does not drive: Ethernet between nodes, host memory
 * between processes, "this machine" as calibration measures it. A message of S bytes costs
 * alpha + S / B; a collective costs what its schedule's critical path sends, with the classic closed
 * forms (Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations in
 * MPICH", 2005) for n ranks and S bytes counted as nccl-tests counts them:
 *
 *   allReduce (ring)               2(n-1) alpha + 2(n-1)/n S/B
 *   allGather, reduceScatter (ring)  (n-1) alpha +  (n-1)/n S/B
 *   broadcast, reduce (binomial tree)  ceil(log2 n) (alpha + S/B)
 *   allToAll (pairwise exchange)     (n-1) alpha +  (n-1)/n S/B
 *   gather, scatter (linear root)    (n-1) alpha +  (n-1)/n S/B
 *   send                                   alpha +          S/B
 */

/** One link: alpha in microseconds, B in GB/s (1e9 bytes/s). */
export interface AlphaBetaLink {
  alphaUs: number;
  bandwidthGBps: number;
}

export type AlphaBetaOp =
  | 'allReduce'
  | 'allGather'
  | 'reduceScatter'
  | 'broadcast'
  | 'reduce'
  | 'allToAll'
  | 'gather'
  | 'scatter'
  | 'send';

/** The schedule a time assumes, reported as the prediction's protocol. */
export type AlphaBetaSchedule = 'ring' | 'binomial-tree' | 'pairwise' | 'linear' | 'direct';

export interface AlphaBetaTime {
  us: number;
  schedule: AlphaBetaSchedule;
}

/** S bytes at B GB/s, in microseconds (1 GB/s is 1e3 bytes a microsecond). */
function transferUs(bytes: number, link: AlphaBetaLink): number {
  return bytes / (1000 * link.bandwidthGBps);
}

/** The time of one call on `ranks` ranks that all talk over `link`. */
export function alphaBetaTime(
  op: AlphaBetaOp,
  ranks: number,
  bytes: number,
  link: AlphaBetaLink,
): AlphaBetaTime {
  const n = ranks;
  const { alphaUs: alpha } = link;
  const share = (n - 1) / n;
  switch (op) {
    case 'allReduce':
      return { us: 2 * (n - 1) * alpha + 2 * share * transferUs(bytes, link), schedule: 'ring' };
    case 'allGather':
    case 'reduceScatter':
      return { us: (n - 1) * alpha + share * transferUs(bytes, link), schedule: 'ring' };
    case 'broadcast':
    case 'reduce':
      return { us: Math.ceil(Math.log2(n)) * (alpha + transferUs(bytes, link)), schedule: 'binomial-tree' };
    case 'allToAll':
      return { us: (n - 1) * alpha + share * transferUs(bytes, link), schedule: 'pairwise' };
    case 'gather':
    case 'scatter':
      return { us: (n - 1) * alpha + share * transferUs(bytes, link), schedule: 'linear' };
    case 'send':
      return { us: alpha + transferUs(bytes, link), schedule: 'direct' };
  }
}

/** The link a group's messages see when they cross several: the largest alpha, the smallest bandwidth. */
export function slowestLink(links: readonly AlphaBetaLink[]): AlphaBetaLink {
  return {
    alphaUs: Math.max(...links.map((l) => l.alphaUs)),
    bandwidthGBps: Math.min(...links.map((l) => l.bandwidthGBps)),
  };
}
