/**
 * The launcher's bookkeeping of its rank processes against the order in
 * which Node delivers a child's events: a report the child sent before it
 * exited may be read after the 'exit' event (Node reads the channel to its
 * end, up to 'close'), and must still count. Children are stand-ins that
 * emit the events in the order a test picks.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { errorReport, type RankReport } from '../src/launch/rank-report.ts';
import { packTensors } from '../src/launch/tensor-transfer.ts';

const children = vi.hoisted(
  () => [] as Array<import('node:events').EventEmitter & { exitCode: number | null }>,
);

vi.mock('node:child_process', async (original) => {
  const { EventEmitter: Emitter } = await import('node:events');
  const { PassThrough: Stream } = await import('node:stream');
  return {
    ...(await original<typeof import('node:child_process')>()),
    fork: () => {
      const child = Object.assign(new Emitter(), {
        stdout: new Stream(),
        stderr: new Stream(),
        exitCode: null as number | null,
        signalCode: null,
        send: (_message: unknown, sent: (error: Error | null) => void) => sent(null),
        kill: () => true,
      });
      children.push(child);
      return child;
    },
  };
});

const { RankProcesses } = await import('../src/launch/rank-processes.ts');

function start(size: number) {
  children.length = 0;
  return new RankProcesses({
    bootstrap: new URL('file:///rank-bootstrap.js'),
    execArgv: [],
    scriptArgs: [],
    ranks: Array.from({ length: size }, (_, r) => r),
    worldSize: size,
    names: Array.from({ length: size }, (_, r) => `rank-${r}`),
    env: () => ({}),
    args: undefined,
    sink: () => {},
    graceMs: 60_000,
    abortRanks: () => {},
    onOwnAbort: () => {},
    earlyExit: () => undefined,
  });
}

/** The child of local rank `r` exits with `code`, then its report is read, then its channels close. */
function exitThenReport(r: number, code: number, report: RankReport): void {
  const child = children[r];
  child.exitCode = code;
  child.emit('exit', code, null);
  child.emit('message', report);
  child.emit('close', code, null);
}

let running: InstanceType<typeof RankProcesses> | undefined;
afterEach(() => running?.kill());

describe('RankProcesses, a report read after its exit', () => {
  it("keeps a result that came after the rank's clean exit", async () => {
    running = start(2);
    exitThenReport(0, 0, { kind: 'result', value: packTensors({ sum: 42 }) });
    exitThenReport(1, 0, { kind: 'result', value: packTensors('done') });
    await running.closed;
    expect(running.failures).toEqual([]);
    expect(running.results).toEqual([{ sum: 42 }, 'done']);
  });

  it("names the rank's own error, not its exit code, when the error came after the exit", async () => {
    running = start(2);
    exitThenReport(1, 1, errorReport(new RangeError('boom in rank 1')));
    exitThenReport(0, 0, { kind: 'result', value: 0 });
    await running.closed;
    expect(running.failures).toHaveLength(1);
    expect(running.failures[0].rank).toBe(1);
    expect(running.failures[0].error.message).toMatch(/boom in rank 1/);
  });

  it('takes no report after a failure the launcher recorded itself', async () => {
    running = start(1);
    running.stopRunning('stopped by the test');
    exitThenReport(0, 0, { kind: 'result', value: 7 });
    await running.closed;
    expect(running.results).toEqual([undefined]);
    expect(running.failures[0].error.message).toMatch(/stopped by the test/);
  });
});
