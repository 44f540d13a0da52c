/**
 * Reads a value file a consumer opened: first its header (so the consumer can
 * claim a get before paying for the payload), then the payload as a tensor
 * (for values in the file; arena values are read through ArenaViews).
 * Small values cost one read into a reused scratch buffer and one small copy;
 * large ones are mapped (or read straight into their own buffer where mapping
 * is unavailable).
 */
import { fstatSync, readSync } from 'node:fs';
import { Tensor } from '../tensor/tensor.ts';
import { FileStoreCorruptError } from './errors.ts';
import { canMapFiles, type Mapping, mapFile } from './mapped-file.ts';
import { decodeValueHeader, IPC_HANDLE_BYTES, type ValueHeader } from './value-header.ts';

/** Files up to this size are read whole in one call. */
export const SMALL_FILE_BYTES = 64 << 10;
const scratch = Buffer.allocUnsafeSlow(SMALL_FILE_BYTES);
/** Whether large values are mapped: asked on first use, as it loads libc's bindings. */
let mapping: boolean | undefined;

export interface OpenedValue {
  header: ValueHeader;
  /** Bytes of the file already in `scratch`. */
  buffered: number;
}

export interface ReadValue {
  tensor: Tensor;
  /** What to release when the get finishes: a file mapping or an opened IPC handle. */
  mapping: Pick<Mapping, 'release'> | undefined;
}

/**
 * One read: a file shorter than the scratch buffer is all there (a read of a
 * regular file stops short only at its end), so only a larger one costs an
 * fstat for its size.
 */
export function readValueHeader(fd: number, describe: string): OpenedValue {
  const buffered = readSync(fd, scratch, 0, SMALL_FILE_BYTES, 0);
  const size = buffered < SMALL_FILE_BYTES ? buffered : fstatSync(fd).size;
  const header = decodeValueHeader(scratch, buffered, describe);
  const expected = header.fileBytes;
  if (size !== expected) {
    throw new FileStoreCorruptError(
      `${describe} is corrupt: ${size} bytes on disk, the header describes ${expected} ` +
        `(${size < expected ? 'truncated payload' : 'trailing bytes'})`,
    );
  }
  return { header, buffered };
}

/** Call right after readValueHeader, before anything else uses the scratch buffer. */
export function readValuePayload(fd: number, opened: OpenedValue, describe: string): ReadValue {
  const { header, buffered } = opened;
  const start = header.headerBytes;
  const end = start + header.payloadBytes;
  if (end <= buffered) {
    const own = scratch.buffer.slice(scratch.byteOffset + start, scratch.byteOffset + end);
    return { tensor: Tensor.fromBuffer(own, 0, header.shape, header.dtype), mapping: undefined };
  }
  mapping ??= canMapFiles();
  if (mapping) {
    const mapped = mapFile(fd, end, describe);
    return { tensor: Tensor.fromBuffer(mapped.buffer, start, header.shape, header.dtype), mapping: mapped };
  }
  const own = new ArrayBuffer(header.payloadBytes);
  const read = readFully(fd, new Uint8Array(own), header.payloadBytes, start);
  if (read !== header.payloadBytes) {
    throw new FileStoreCorruptError(
      `${describe} is corrupt: payload ended after ${read} of ${header.payloadBytes} bytes`,
    );
  }
  return { tensor: Tensor.fromBuffer(own, 0, header.shape, header.dtype), mapping: undefined };
}

/** The cudaIpcMemHandle after a cudaIpc header; call right after readValueHeader. */
export function readIpcHandle(opened: OpenedValue): Uint8Array {
  const start = opened.header.headerBytes;
  return Uint8Array.from(scratch.subarray(start, start + IPC_HANDLE_BYTES));
}

function readFully(fd: number, into: Uint8Array, length: number, position: number): number {
  let done = 0;
  while (done < length) {
    const n = readSync(fd, into, done, length - done, position + done);
    if (n === 0) break;
    done += n;
  }
  return done;
}
