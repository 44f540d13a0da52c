/**
 * Where a message's parts travel between two members of a CollectiveGroup.
 * Each (sender, receiver, tag) stream of a ThreadGroup keeps order, so a
 * direction of a CollectiveGroup is a handful of streams: the lead stream
 * (one header or one sendTensor tensor per message, in message order) and one
 * data stream per device kind, so CPU and GPU tensors of one message take
 * their own paths. `dataPath` is the per-device selection point the GPU path
 * plugs into.
 */
import type { Device } from '../tensor/dtype.ts';
import { assertCommTensor } from '../tensor/validate.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';

/** Tags at and above this are p2p's on a shared ThreadGroup, far above what users pick. */
const P2P_TAG_BASE = 2 ** 40;
const CHANNELS = { lead: 0, cpu: 1, gpu: 2 } as const;
const CHANNELS_PER_GROUP = 4;

export interface Stream {
  group: ThreadGroup;
  tag: number;
}

export interface Link {
  /** The sending or receiving peer as a group rank of `group`. */
  peer: number;
  /** The peer's worker name and global rank for messages, e.g. `"rollout-0" (rank 1)`. */
  peerLabel: string;
  lead: Stream;
  dataPath(device: Device, where: string): Stream;
}

/** Tag block of a CollectiveGroup: a 32-bit FNV-1a hash of its name, so both ends agree without talking. */
export function tagBlockOf(groupName: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(groupName)) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  return h;
}

export function makeLink(group: ThreadGroup, block: number, peer: number, peerLabel: string): Link {
  const tag = (channel: number) => P2P_TAG_BASE + block * CHANNELS_PER_GROUP + channel;
  const cpu = { group, tag: tag(CHANNELS.cpu) };
  return {
    peer,
    peerLabel,
    lead: { group, tag: tag(CHANNELS.lead) },
    dataPath(device, where) {
      if (device === 'cpu') return cpu;
      throw new Error(
        `${where}: tensors on '${device}' need the GPU p2p path (channel ${CHANNELS.gpu}), which is not in this build`,
      );
    },
  };
}

/**
 * Why a lone tensor (sendTensor / recvTensor) cannot travel on this link now:
 * the direction already broke, or the tensor is unfit; undefined when it can.
 */
export function loneTensorProblem(
  link: Link,
  tensor: unknown,
  where: string,
  broken: Error | undefined,
): unknown {
  if (broken) return broken;
  try {
    assertCommTensor(tensor, where);
    link.dataPath(tensor.device, where);
    return undefined;
  } catch (error) {
    return error;
  }
}
