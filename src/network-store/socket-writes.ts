/**
 * Writing a connection's bytes straight from the rank's thread. A write
 * through a socket's stream takes Node's Writable machinery, tens of
 * microseconds a small write in a fresh process and several in a warm one,
 * on each message of a small call; libc's send hands the kernel what it
 * takes at once. Bytes go that way only while nothing waits in the stream
 * before them, so the connection's bytes keep their order; what the kernel
 * does not take, and a failed send (the peer gone), go to the stream, which
 * writes them when the socket has room, or reports the connection's end.
 */
import type net from 'node:net';
import { hasLibc, libc, MSG_DONTWAIT, MSG_NOSIGNAL } from '../runtime/libc.ts';

/** The part of a net.Socket's TCP handle that names its file descriptor (Node's own, not typed). */
interface SocketHandle {
  fd?: number;
}

/** The socket's file descriptor, where its handle has one (TCP on Linux and macOS). */
export function socketFd(socket: net.Socket): number | undefined {
  const fd = (socket as unknown as { _handle: SocketHandle | null })._handle?.fd;
  return fd === undefined || fd < 0 ? undefined : fd;
}

let direct: boolean | undefined;

/**
 * Writes `bytes` to `socket`, what the kernel takes now from this thread, the
 * rest through its stream; `written` runs once all of them left: at once
 * where the kernel took them all.
 */
export function writeToSocket(socket: net.Socket, bytes: Uint8Array, written?: () => void): void {
  direct ??= hasLibc();
  const fd = direct && socket.writableLength === 0 ? socketFd(socket) : undefined;
  const sent =
    fd === undefined ? 0 : Number(libc().send(fd, bytes, bytes.byteLength, MSG_DONTWAIT | MSG_NOSIGNAL));
  if (sent === bytes.byteLength) written?.();
  else socket.write(sent > 0 ? bytes.subarray(sent) : bytes, written);
}
