/**
 * The report a predicted job writes (`predict.report`): DESIGN's shape, every
 * call each rank made with its predicted start and end, and per-rank totals.
 * Times are microseconds of virtual time since the job started.
 */

/** One rank's totals. */
export interface PredictedRank {
  rank: number;
  /** Its clock when its main returned. */
  endUs: number;
  /** Declared compute (ctx.predict.compute). */
  computeUs: number;
  /** The model's time of every call it took part in, summed. */
  commUs: number;
  /** The part of commUs its clock waited for (not hidden behind its compute). */
  exposedCommUs: number;
  /** Time its clock waited for stragglers: from its arrival at a call to the call's start. */
  waitUs: number;
  /** Calls past the report's limit per rank (MAX_REPORTED_CALLS): in the totals, not listed. */
  droppedCalls?: number;
}

/** One call as one rank made it. */
export interface PredictedCall {
  rank: number;
  /** The group's name ("world", or the name newGroup gave it). */
  group: string;
  /** The call's number in its group's collective order; point-to-point calls count their own stream. */
  seq: number;
  op: string;
  /** As nccl-tests counts them (see predictCollective). */
  bytes: number;
  algorithm: string;
  protocol: string;
  startUs: number;
  endUs: number;
  busbwGBps: number;
  /** For point-to-point calls: the other side's global rank. */
  peer?: number;
}

export interface PredictReport {
  /** The topology's name (a preset's, or the spec's `name`). */
  topology: string;
  ranks: PredictedRank[];
  calls: PredictedCall[];
}
