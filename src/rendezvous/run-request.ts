/**
 * One decoded request run against the rendezvous table, apart from the
 * sockets: its answers go to `reply`, at once or, for a call that parks
 * (get, wait, barrier), when it is ready, times out or fails. What the table
 * refuses (a full store, a counter that is not an integer) is answered as an
 * error; the connection stays open.
 */
import { RendezvousError } from './errors.ts';
import { type FrameWriter, Op, Status } from './protocol.ts';
import type { Request } from './request.ts';
import type { Parked, RendezvousTable } from './table.ts';

export type Reply = (status: number, write?: (w: FrameWriter) => void) => void;

/** Whose request it is: the owner of what it parks, with a count of its calls parked now. */
export interface Caller {
  readonly rank: number;
  parked: number;
}

/** Runs `request`; `answered` is told each time a parked call of the caller is answered. */
export function runRequest(
  table: RendezvousTable,
  caller: Caller,
  request: Request,
  reply: Reply,
  answered: () => void,
): void {
  const park = (call: (parked: Parked) => void, ready?: () => void) =>
    parkCall(caller, reply, answered, call, ready);
  try {
    switch (request.op) {
      case Op.set:
        table.set(request.key, request.value);
        reply(Status.ok);
        break;
      case Op.get: {
        const { key } = request;
        const ready = () => reply(Status.ok, (w) => w.bytes(table.get(key) ?? new Uint8Array()));
        park((p) => table.wait(caller, [key], request.timeoutMs, p), ready);
        break;
      }
      case Op.wait:
        park((p) => table.wait(caller, request.keys, request.timeoutMs, p));
        break;
      case Op.check: {
        const all = request.keys.every((k) => table.has(k));
        reply(Status.ok, (w) => w.u8(all ? 1 : 0));
        break;
      }
      case Op.add: {
        const { key, delta } = request;
        if (!Number.isSafeInteger(delta))
          throw new RendezvousError(`add('${key}'): delta ${delta} is not a safe integer`);
        const sum = table.add(key, delta);
        reply(Status.ok, (w) => w.f64(sum));
        break;
      }
      case Op.compareSet: {
        const now = table.compareSet(request.key, request.expected, request.desired);
        reply(Status.ok, (w) => w.bytes(now));
        break;
      }
      case Op.delete: {
        const existed = table.delete(request.key);
        reply(Status.ok, (w) => w.u8(existed ? 1 : 0));
        break;
      }
      case Op.barrier:
        park((p) =>
          table.barrier(caller, request.name, request.worldSize, caller.rank, request.timeoutMs, p),
        );
        break;
      case Op.ping:
        reply(Status.ok);
        break;
    }
  } catch (error) {
    if (!(error instanceof RendezvousError)) throw error;
    reply(Status.error, (w) => w.text(error.message));
  }
}

/**
 * Runs a call that may park, counted on its caller while it is parked (a
 * connection waiting for an answer is not idle); a call the table refused
 * never parked.
 */
function parkCall(
  caller: Caller,
  reply: Reply,
  answered: () => void,
  call: (parked: Parked) => void,
  ready: () => void = () => reply(Status.ok),
): void {
  let done = false;
  const answer = (send: () => void) => {
    if (done) return;
    done = true;
    caller.parked--;
    send();
    answered();
  };
  caller.parked++;
  try {
    call({
      ready: () => answer(ready),
      timedOut: (missing, arrived) =>
        answer(() => reply(Status.timeout, (w) => w.u32(arrived).keys(missing))),
      failed: (message) => answer(() => reply(Status.error, (w) => w.text(message))),
    });
  } catch (error) {
    if (!done) {
      done = true;
      caller.parked--;
    }
    throw error;
  }
}
