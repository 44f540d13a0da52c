/**
 * Where a group's members meet in predict mode for a collective's start: the
 * latest member's clock as it issued the call, and the largest size a member
 * knew of it (an object's size is known only where it is serialised). Each
 * member posts its own as it issues the group's next collective, and meets
 * the others' once the call ended, in the order of the group's collectives.
 * How they meet depends on what the members share (thread-group/clock-meetings.ts,
 * clock-board.ts); what they meet on is the same.
 */
export interface MetClocks {
  latestUs: number;
  bytes: number;
}

export interface ClockMeeting {
  /** This member's clock and bytes for the group's collective `index` (0, 1, ... in order). */
  post(index: number, clockUs: number, bytes: number): void;
  /** Every member's, once all have posted; called in index order, after this member's post of it. */
  meet(index: number): Promise<MetClocks>;
  /** `meet`, where it can be done at once (every post there); undefined, having done nothing, where not. */
  metNow?(index: number): MetClocks | undefined;
}
