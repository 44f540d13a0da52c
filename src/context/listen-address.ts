/**
 * The address a rank's network store listens on: the interface that
 * TENSORCOMM_SOCKET_IFNAME names (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME's
 * counterpart), else the address this machine uses to reach the master,
 * which is the one other nodes can reach it on in the usual cluster.
 */
import { createSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';
import { LaunchError } from '../launch/errors.ts';
import { isLoopbackHost } from '../rendezvous/auth.ts';

export const SOCKET_IFNAME_ENV = 'TENSORCOMM_SOCKET_IFNAME';

export async function listenAddress(
  master: { host: string; port: number },
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const ifname = env[SOCKET_IFNAME_ENV];
  if (ifname) {
    const interfaces = networkInterfaces();
    const addresses = interfaces[ifname];
    if (!addresses || addresses.length === 0) {
      throw new LaunchError(
        `initProcess: ${SOCKET_IFNAME_ENV}=${ifname} names no network interface of this machine ` +
          `(it has ${Object.keys(interfaces).join(', ')})`,
      );
    }
    return (addresses.find((a) => a.family === 'IPv4') ?? addresses[0]).address;
  }
  if (isLoopbackHost(master.host)) return '127.0.0.1';
  // A connected UDP socket picks the route's source address without sending anything.
  const socket = createSocket(isIPv6(master.host) ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.connect(master.port, master.host, () => resolve());
    });
    return socket.address().address;
  } catch (error) {
    throw new LaunchError(
      `initProcess: no route to the master ${master.host}:${master.port} to pick an address to listen on ` +
        `(${(error as Error).message}); set ${SOCKET_IFNAME_ENV} to the interface other nodes reach this one on`,
    );
  } finally {
    socket.close();
  }
}
