/**
 * What point-to-point receives do with a message that came inline through
 * the mailbox (mailbox.ts): the same checks and copies as for one taken from
 * the keyed store (p2p.ts), in the same words when they fail.
 */
import { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo, GroupView } from '../backend.ts';
import { layoutMismatchError } from './call-failure.ts';
import type { MailRecord } from './mailbox.ts';
import { copyElements } from './slices.ts';

/** The inline payload as a tensor over the record's bytes (valid while the record is being consumed). */
export function inlineTensor(record: MailRecord): Tensor {
  const bytes = record.bytes as Uint8Array;
  return Tensor.fromBuffer(bytes.buffer, bytes.byteOffset, record.shape, record.dtype);
}

/** Checks an inline message against `expected` (what this rank receives into) and returns it as a tensor. */
export function expectInline(
  group: GroupView,
  call: CallInfo,
  record: MailRecord,
  expected: Tensor,
  src: number,
): Tensor {
  if (!sameLayout(record, expected)) {
    const sent = `${record.dtype}[${record.shape.join(',')}]`;
    throw layoutMismatchError(group, call, expected.describe(), src, sent);
  }
  return inlineTensor(record);
}

/** Receives an inline message into `tensor`, checked as recv checks one from the store. */
export function landInline(
  group: GroupView,
  call: CallInfo,
  record: MailRecord,
  tensor: Tensor,
  src: number,
): void {
  copyElements(tensor, 0, expectInline(group, call, record, tensor, src));
}

function sameLayout(record: MailRecord, tensor: Tensor): boolean {
  const shape = tensor.shape;
  if (record.dtype !== tensor.dtype || record.shape.length !== shape.length) return false;
  for (let d = 0; d < shape.length; d++) if (record.shape[d] !== shape[d]) return false;
  return true;
}
