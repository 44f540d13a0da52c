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
  /** The op's name and its code on the status board (its place in OPS), set once OPS is made. */
  readonly name: OpName;
  readonly code: number;
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

/** What a row of OPS is made with: everything but its name and code. */
type OpRow = Omit<OpSpec, 'name' | 'code'>;

/** Every member publishes to every other ('all'), or one value per peer ('pairwise'). */
function everyone(kind: 'all' | 'pairwise'): OpRow {
  const pattern: ArrivalPattern = { kind };
  return { p2p: false, arrival: () => pattern };
}

function rooted(kind: 'fromRoot' | 'fromRootPairwise' | 'toRoot', role: 'src' | 'dst'): OpRow {
  return {
    p2p: false,
    arrival(roles, size) {
      const root = groupRankOf(roles[role], size);
      return root === undefined ? undefined : { kind, root };
    },
  };
}

function pointToPoint(kind: 'send' | 'recv'): OpRow {
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

const ROWS = {
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
} satisfies Record<string, OpRow>;

export type OpName = keyof typeof ROWS;

/**
 * Every op's spec by name. Calls hand ThreadGroup's #call the spec itself
 * (OPS.allReduce), not its name: a lookup by a name that varies from call
 * to call is a megamorphic keyed load on every call.
 */
export const OPS = Object.fromEntries(
  Object.entries(ROWS).map(([name, row], code) => [name, { ...row, name, code }]),
) as { readonly [K in OpName]: OpSpec };

// The status board records ops by their index here.
registerOpNames(Object.keys(OPS));
