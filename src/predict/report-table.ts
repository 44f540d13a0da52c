/**
 * The figures `tensorcomm predict show` prints, from a report: one row per
 * kind of call (group, op, size) in nccl-tests' terms, one per rank with its
 * totals, and the job's predicted end. Printing is the CLI's (src/cli/predict.ts).
 *
 * A report lists each call once per rank that made it, so a collective of 8
 * ranks counts 8 calls, as `tensorcomm trace` counts them. Bandwidths over
 * several calls are bytes over their summed time: algbw = calls × bytes /
 * time, busbw = the calls' bus bytes (busbw × time each) / time, so a row of
 * identical calls shows exactly their figures and a mixed row weighs each by
 * its time.
 */
import type { PredictedCall, PredictedRank, PredictReport } from './report.ts';

/** Calls added up: how many, their bytes and time, and the bytes their busiest links carried. */
export interface CallTotals {
  calls: number;
  bytes: number;
  totalUs: number;
  busBytes: number;
}

export function emptyTotals(): CallTotals {
  return { calls: 0, bytes: 0, totalUs: 0, busBytes: 0 };
}

export function addCall(totals: CallTotals, call: PredictedCall): void {
  const us = call.endUs - call.startUs;
  totals.calls++;
  totals.bytes += call.bytes;
  totals.totalUs += us;
  // GB/s × µs = 1e3 bytes
  totals.busBytes += call.busbwGBps * us * 1e3;
}

/** GB/s over the totals' time; 0 when they took none (empty messages). */
export function perTime(bytes: number, totals: CallTotals): number {
  return totals.totalUs > 0 ? bytes / totals.totalUs / 1e3 : 0;
}

export interface PredictedOpRow {
  group: string;
  op: string;
  /** Of one call, as nccl-tests counts them. */
  bytes: number;
  /** One per rank that made such a call. */
  calls: number;
  /** The model's choice; several, joined by ',', when the row's calls differ (groups placed differently). */
  algorithm: string;
  protocol: string;
  /** Mean time of one call. */
  timeUs: number;
  algbwGBps: number;
  busbwGBps: number;
}

/** Rows by (group, op) in the order the report first lists them, each op's sizes ascending as in nccl-tests. */
export function predictedOpRows(report: PredictReport): PredictedOpRow[] {
  const rows = new Map<
    string,
    {
      group: string;
      op: string;
      bytes: number;
      totals: CallTotals;
      algorithms: Set<string>;
      protocols: Set<string>;
    }
  >();
  const firstSeen = new Map<string, number>();
  for (const call of report.calls) {
    const kind = `${call.group}\0${call.op}`;
    if (!firstSeen.has(kind)) firstSeen.set(kind, firstSeen.size);
    const key = `${kind}\0${call.bytes}`;
    let row = rows.get(key);
    if (!row) {
      row = { ...call, totals: emptyTotals(), algorithms: new Set(), protocols: new Set() };
      rows.set(key, row);
    }
    addCall(row.totals, call);
    row.algorithms.add(call.algorithm);
    row.protocols.add(call.protocol);
  }
  const order = (r: { group: string; op: string }) => firstSeen.get(`${r.group}\0${r.op}`)!;
  return [...rows.values()]
    .sort((a, b) => order(a) - order(b) || a.bytes - b.bytes)
    .map(({ group, op, bytes, totals, algorithms, protocols }) => ({
      group,
      op,
      bytes,
      calls: totals.calls,
      algorithm: [...algorithms].join(','),
      protocol: [...protocols].join(','),
      timeUs: totals.totalUs / totals.calls,
      algbwGBps: perTime(totals.bytes, totals),
      busbwGBps: perTime(totals.busBytes, totals),
    }));
}

export interface PredictedRankRow extends PredictedRank {
  /** The part of commUs hidden behind the rank's compute: commUs − exposedCommUs. */
  overlappedCommUs: number;
}

export function predictedRankRows(report: PredictReport): PredictedRankRow[] {
  return [...report.ranks]
    .sort((a, b) => a.rank - b.rank)
    .map((r) => ({
      ...r,
      // not below 0: the two sums may round apart when nothing overlapped
      overlappedCommUs: Math.max(0, r.commUs - r.exposedCommUs),
    }));
}

/** The job's predicted end: the latest rank's clock when its main returned. */
export function predictedEnd(report: PredictReport): { endUs: number; rank: number } {
  if (report.ranks.length === 0) throw new RangeError('a report without ranks has no predicted end');
  const last = report.ranks.reduce((a, b) => (b.endUs > a.endUs ? b : a));
  return { endUs: last.endUs, rank: last.rank };
}
