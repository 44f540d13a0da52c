/**
 * The alpha-beta (Hockney) model, for links NCCL does not drive: Ethernet between nodes, host memory
 * between processes, "this machine" as calibration measures it. A message of S bytes costs
 * alpha + S / B; a collective costs what its schedule's critical path sends, with the classic closed
 * forms (Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations in
 * MPICH", 2005) for n ranks and S bytes counted as nccl-tests counts them.
 *
 * Two optional rates make it describe CPUs as calibration finds them (docs/guides/prediction.md,
 * "Against tensorcomm's own runs"); without them the model is the plain one:
 * - D, GB/s each way while a rank sends and receives at once (ring steps, pairwise exchanges). Two
 *   ranks that share cores and a memory bus, or one loopback, get about half of B each way then.
 *   Default B: a full-duplex link.
 * - G, GB/s at which a rank reduces an operand into its result: the alpha-beta-gamma model's 1/gamma
 *   (Thakur et al. again), since summing on a CPU costs time per byte. Default: reductions are free.
 *
 *   allReduce (ring)               2(n-1) alpha + 2(n-1)/n S/D + (n-1)/n S/G
 *   allGather (ring)                (n-1) alpha +  (n-1)/n S/D
 *   reduceScatter (ring)            (n-1) alpha +  (n-1)/n S/D + (n-1)/n S/G
 *   broadcast (binomial tree)     ceil(log2 n) (alpha + S/B)
 *   reduce (binomial tree)        ceil(log2 n) (alpha + S/B + S/G)
 *   allToAll (pairwise exchange)    (n-1) alpha +  (n-1)/n S/D
 *   gather, scatter (linear root)   (n-1) alpha +  (n-1)/n S/B
 *   send                                  alpha +          S/B
 *
 * A tree's step and a root's messages go one way at a time, so they run at B.
 */

/** One link: alpha in microseconds, the rates in GB/s (1e9 bytes/s). */
export interface AlphaBetaLink {
  alphaUs: number;
  /** B: while data goes one way only. */
  bandwidthGBps: number;
  /** D: each way while a rank sends and receives at once; default B. */
  duplexGBps?: number;
  /** G: operand bytes a rank reduces into its result a second; default: reductions are free. */
  reduceGBps?: number;
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

/** What one call's critical path does, each count paid at its own rate: the closed form's terms. */
export interface AlphaBetaTerms {
  schedule: AlphaBetaSchedule;
  /** Messages, alpha each. */
  messages: number;
  /** Bytes sent while the other way is idle, at B. */
  simplexBytes: number;
  /** Bytes sent each way while both ways carry data, at D. */
  duplexBytes: number;
  /** Operand bytes reduced into a result, at G. */
  reducedBytes: number;
}

export interface AlphaBetaTime {
  us: number;
  schedule: AlphaBetaSchedule;
}

function termsOf(
  schedule: AlphaBetaSchedule,
  messages: number,
  simplexBytes: number,
  duplexBytes: number,
  reducedBytes: number,
): AlphaBetaTerms {
  return { schedule, messages, simplexBytes, duplexBytes, reducedBytes };
}

/** The terms of one call on `ranks` ranks of S = `bytes`: the table above, term by term. */
export function alphaBetaTerms(op: AlphaBetaOp, ranks: number, bytes: number): AlphaBetaTerms {
  const n = ranks;
  const shared = ((n - 1) / n) * bytes;
  const levels = Math.ceil(Math.log2(n));
  switch (op) {
    case 'allReduce':
      return termsOf('ring', 2 * (n - 1), 0, 2 * shared, shared);
    case 'allGather':
      return termsOf('ring', n - 1, 0, shared, 0);
    case 'reduceScatter':
      return termsOf('ring', n - 1, 0, shared, shared);
    case 'broadcast':
      return termsOf('binomial-tree', levels, levels * bytes, 0, 0);
    case 'reduce':
      return termsOf('binomial-tree', levels, levels * bytes, 0, levels * bytes);
    case 'allToAll':
      return termsOf('pairwise', n - 1, 0, shared, 0);
    case 'gather':
    case 'scatter':
      return termsOf('linear', n - 1, shared, 0, 0);
    case 'send':
      return termsOf('direct', 1, bytes, 0, 0);
  }
}

/** S bytes at `gbps` GB/s, in microseconds (1 GB/s is 1e3 bytes a microsecond); none at a free rate. */
function transferUs(bytes: number, gbps: number | undefined): number {
  return bytes === 0 || gbps === undefined ? 0 : bytes / (1000 * gbps);
}

/** The time of one call on `ranks` ranks that all talk over `link`. */
export function alphaBetaTime(
  op: AlphaBetaOp,
  ranks: number,
  bytes: number,
  link: AlphaBetaLink,
): AlphaBetaTime {
  const terms = alphaBetaTerms(op, ranks, bytes);
  const us =
    terms.messages * link.alphaUs +
    transferUs(terms.simplexBytes, link.bandwidthGBps) +
    transferUs(terms.duplexBytes, link.duplexGBps ?? link.bandwidthGBps) +
    transferUs(terms.reducedBytes, link.reduceGBps);
  return { us, schedule: terms.schedule };
}

/**
 * The link a group's messages see when they cross several: the largest alpha, the smallest of each
 * rate. An optional rate is in the result where some link has one (a link without D counts as D = B).
 */
export function slowestLink(links: readonly AlphaBetaLink[]): AlphaBetaLink {
  const slowest: AlphaBetaLink = {
    alphaUs: Math.max(...links.map((l) => l.alphaUs)),
    bandwidthGBps: Math.min(...links.map((l) => l.bandwidthGBps)),
  };
  if (links.some((l) => l.duplexGBps !== undefined)) {
    slowest.duplexGBps = Math.min(...links.map((l) => l.duplexGBps ?? l.bandwidthGBps));
  }
  const reducing = links.flatMap((l) => (l.reduceGBps === undefined ? [] : [l.reduceGBps]));
  if (reducing.length > 0) slowest.reduceGBps = Math.min(...reducing);
  return slowest;
}
