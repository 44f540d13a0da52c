/**
 * Where a message's parts travel between two members of a CollectiveGroup.
 * Each (sender, receiver, tag) stream of a ThreadGroup keeps order, so a
 * direction of a CollectiveGroup is a handful of streams: the lead stream
 * (one header or one sendTensor tensor per message, in message order) and one
 * data stream per device kind, so CPU and GPU tensors of one message take
 * their own paths. GPU tensors go on a group of their own per direction
 * (ThreadGroupManager.getDirectionGroup): NCCL between distinct GPUs, the
 * store (device pointers, CUDA IPC) when both workers share one.
 */
import { fnv1a } from '../runtime/fnv1a.ts';
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
  /** The peer's rank in `group`. */
  peer: number;
}

export interface Link {
  /** The peer's worker name and global rank for messages, e.g. `"rollout-0" (rank 1)`. */
  peerLabel: string;
  lead: Stream;
  dataPath(device: Device): Stream;
  /**
   * Where a lone tensor (sendTensor / recvTensor) travels: the lead stream
   * for a CPU tensor, its device's stream for a GPU one (a communicator must
   * not carry both directions).
   */
  loneStream(device: Device): Stream;
  /** Where a received tensor the peer sent from `device` lands: a GPU one on this worker's GPU. */
  landing(device: Device): Device;
}

/** The groups a link's streams run on: the members' group, and the direction's own group for GPU tensors. */
export interface LinkGroups {
  group: ThreadGroup;
  gpu: () => ThreadGroup;
  /** This worker's device. */
  device: Device;
}

/** Tag block of a CollectiveGroup: a 32-bit FNV-1a hash of its name, so both ends agree without talking. */
export function tagBlockOf(groupName: string): number {
  return fnv1a(new TextEncoder().encode(groupName));
}

/** `peerRank` is the peer's global rank; each stream addresses it by its rank in that stream's group. */
export function makeLink(groups: LinkGroups, block: number, peerRank: number, peerLabel: string): Link {
  const tag = (channel: number) => P2P_TAG_BASE + block * CHANNELS_PER_GROUP + channel;
  const stream = (group: ThreadGroup, channel: number): Stream => ({
    group,
    tag: tag(channel),
    peer: group.ranks.indexOf(peerRank),
  });
  const cpu = stream(groups.group, CHANNELS.cpu);
  const lead = stream(groups.group, CHANNELS.lead);
  let gpu: Stream | undefined;
  const gpuStream = () => (gpu ??= stream(groups.gpu(), CHANNELS.gpu));
  return {
    peerLabel,
    lead,
    dataPath: (device) => (device === 'cpu' ? cpu : gpuStream()),
    loneStream: (device) => (device === 'cpu' ? lead : gpuStream()),
    landing: (device) => (device === 'cpu' || groups.device === 'cpu' ? device : groups.device),
  };
}

/**
 * Why a lone tensor (sendTensor / recvTensor) cannot travel on this link now:
 * the direction already broke, or the tensor is unfit; undefined when it can.
 */
export function loneTensorProblem(tensor: unknown, where: string, broken: Error | undefined): unknown {
  if (broken) return broken;
  try {
    assertCommTensor(tensor, where);
    return undefined;
  } catch (error) {
    return error;
  }
}
