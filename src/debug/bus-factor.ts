/**
 * nccl-tests' bus bandwidth factors: how many times the busiest link carries
 * the buffer, relative to its size (the size being what nccl-tests reports:
 * the gathered output for allGather, the input for reduceScatter).
 */
export function busFactor(op: string, n: number): number {
  switch (op) {
    case 'allReduce':
      return (2 * (n - 1)) / n;
    case 'allGather':
    case 'allGatherInto':
    case 'allGatherObject':
    case 'reduceScatter':
    case 'reduceScatterTensor':
    case 'allToAll':
    case 'allToAllSingle':
      return (n - 1) / n;
    case 'barrier':
      return 0;
    default:
      // broadcast, reduce, gather, scatter, point-to-point
      return 1;
  }
}
