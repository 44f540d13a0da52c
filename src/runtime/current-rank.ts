/**
 * The rank this thread runs as, and its TensorStore, once its context is
 * built: for APIs whose contract passes neither (createTensorPromise,
 * TensorFuture.fromHandle). Set by the layer that builds rank contexts.
 */
import { RankLocal } from './rank-local.ts';
import type { TensorStore } from './tensor-store.ts';

export interface CurrentRank {
  rank: number;
  store: TensorStore;
}

const current = new RankLocal<CurrentRank | undefined>(() => undefined);

export function setCurrentRank(rank: CurrentRank | undefined): void {
  current.set(rank);
}

export function currentRank(): CurrentRank | undefined {
  return current.get();
}
