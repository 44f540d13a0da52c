/**
 * One trace for a job whose ranks no tensorcomm launcher started (torchrun,
 * mpirun, srun), across nodes too: before the job's end every other rank
 * hands rank 0 a copy of its part through the rendezvous, and once every
 * rank reached the end rank 0 writes the job's trace with them all, and
 * the others remove their parts (a tensorcomm launcher merges its node's
 * parts and hands them to node 0 itself). A part the rendezvous does not
 * take (over its value limit), and every part when the end never comes,
 * stays where the rank wrote it: beside the trace path, on its rank's
 * machine.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import {
  partShare,
  readTraceParts,
  type TracePart,
  type TraceShare,
  tracePartPath,
  writeTrace,
} from '../debug/trace.ts';
import type { RendezvousClient } from '../rendezvous/client.ts';

const keyOf = (rank: number) => `tensorcomm/trace/${rank}`;

/** A rank other than 0, before the job's end: a copy of its part to rank 0. Whether the rendezvous took it. */
export async function handTracePart(client: RendezvousClient, trace: string, rank: number): Promise<boolean> {
  const part = tracePartPath(trace, rank);
  if (!existsSync(part)) return false;
  try {
    await client.set(keyOf(rank), readFileSync(part));
    return true;
  } catch {
    // Not lost: a part rank 0 did not get stays on this rank's disk (only a handed one is dropped).
    return false;
  }
}

/** A rank other than 0 whose part rank 0 took, once every rank reached the job's end: none is left on disk. */
export function dropHandedPart(trace: string, rank: number): void {
  rmSync(tracePartPath(trace, rank), { force: true });
}

/** Rank 0, once every rank reached the job's end: the job's trace, from its own part and those handed over. */
export async function writeJobTrace(
  client: RendezvousClient,
  trace: string,
  worldSize: number,
): Promise<void> {
  const shares: TraceShare[] = [readTraceParts(trace, [0])];
  for (let rank = 1; rank < worldSize; rank++) {
    if (!(await client.check([keyOf(rank)]))) continue;
    // Handed over as the rank wrote it: a part, its network bytes not yet keyed by its rank.
    const part = JSON.parse(new TextDecoder().decode(await client.get(keyOf(rank)))) as TracePart;
    shares.push(partShare(rank, part));
    await client.delete(keyOf(rank));
  }
  writeTrace(trace, shares, worldSize);
}
