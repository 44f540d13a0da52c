/**
 * Every call a ThreadGroup makes, in one table: whether it is point-to-point
 * (matched per stream, outside the group's collective order) and which keys of
 * the first exchange it touches, from the roles its caller gave. The arrival
 * pattern is what a call that failed its local checks uses to tell its peers,
 * so they fail with its error instead of waiting. Adding an op is one row here.
 */
import { registerOpNames } from '../debug/call-record.ts';
import { type ArrivalPattern, MONITORED_BARRIER_ROOT } from './backend.ts';

/** Roles of a call as the caller gave them, before they are validated. */
export interface RawRoles {
  src?: unknown;
  dst?: unknown;
  tag?: unknown;
}

export interface OpSpec {
  /** Point-to-point: outside the collective order, so the call takes no sequence number. */
  readonly p2p: boolean;
  /** The role that names the other end of a point-to-point call. */
  readonly peerRole?: 'src' | 'dst';
  /** The first-exchange keys the call touches; undefined when its roles are invalid (nobody to tell). */
  arrival(roles: RawRoles, size: number): ArrivalPattern | undefined;
}

function groupRankOf(value: unknown, size: number): number | undefined {
  return Number.isInteger(value) && (value as number) >= 0 && (value as number) < size
    ? (value as number)
    : undefined;
}

/** Every member publishes to every other ('all'), or one value per peer ('pairwise'). */
function everyone(kind: 'all' | 'pairwise'): OpSpec {
  const pattern: ArrivalPattern = { kind };
  return { p2p: false, arrival: () => pattern };
}

function rooted(kind: 'fromRoot' | 'fromRootPairwise' | 'toRoot', role: 'src' | 'dst'): OpSpec {
  return {
    p2p: false,
    arrival(roles, size) {
      const root = groupRankOf(roles[role], size);
      return root === undefined ? undefined : { kind, root };
    },
  };
}

function pointToPoint(kind: 'send' | 'recv'): OpSpec {
  const peerRole = kind === 'send' ? 'dst' : 'src';
  return {
    p2p: true,
    peerRole,
    arrival(roles, size) {
      const peer = groupRankOf(roles[peerRole], size);
      const tag = roles.tag;
      if (peer === undefined || !Number.isSafeInteger(tag) || (tag as number) < 0) return undefined;
      return { kind, peer, tag: tag as number };
    },
  };
}

/** monitoredBarrier's rank 0 hears from every other rank and answers each; it never waits for all to all. */
const VIA_MONITOR_ROOT: ArrivalPattern = { kind: 'viaRoot', root: MONITORED_BARRIER_ROOT };

export const OPS = {
  allReduce: everyone('all'),
  broadcast: rooted('fromRoot', 'src'),
  reduce: rooted('toRoot', 'dst'),
  allGather: everyone('all'),
  allGatherInto: everyone('all'),
  reduceScatter: everyone('pairwise'),
  reduceScatterTensor: everyone('all'),
  allToAll: everyone('pairwise'),
  allToAllSingle: everyone('pairwise'),
  gather: rooted('toRoot', 'dst'),
  scatter: rooted('fromRootPairwise', 'src'),
  barrier: everyone('all'),
  send: pointToPoint('send'),
  recv: pointToPoint('recv'),
  recvObject: pointToPoint('recv'),
  broadcastObject: rooted('fromRoot', 'src'),
  allGatherObject: everyone('all'),
  sendViews: pointToPoint('send'),
  recvViews: pointToPoint('recv'),
  monitoredBarrier: { p2p: false, arrival: () => VIA_MONITOR_ROOT },
  gatherObject: rooted('toRoot', 'dst'),
  scatterObject: rooted('fromRootPairwise', 'src'),
  // From any peer: no one in particular to tell when its own checks fail.
  recvFromAny: { p2p: true, arrival: () => undefined },
} satisfies Record<string, OpSpec>;

export type OpName = keyof typeof OPS;

// The status board records ops by their index here.
registerOpNames(Object.keys(OPS));
