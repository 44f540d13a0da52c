/**
 * The rank this thread runs as, and its TensorStore, once its context is
 * built: for APIs whose contract passes neither (createTensorPromise,
 * TensorFuture.fromHandle). Set by the layer that builds rank contexts.
 */
import type { TensorStore } from './tensor-store.ts';

export interface CurrentRank {
  rank: number;
  store: TensorStore;
}

let current: CurrentRank | undefined;

export function setCurrentRank(rank: CurrentRank | undefined): void {
  current = rank;
}

export function currentRank(): CurrentRank | undefined {
  return current;
}
