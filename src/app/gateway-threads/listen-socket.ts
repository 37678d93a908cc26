/**
 * The clients' listening socket for gateway threads: opened on the main thread, then held as a
 * descriptor that no event loop polls (the net server that opened it is closed), so that only the
 * threads, each listening on a duplicate of it (duplicate-fd.ts), accept there.
 */
import { createServer, type AddressInfo } from 'node:net';
import { duplicateFd } from './duplicate-fd.js';

export interface ListenSocket {
  /** The descriptor the threads' duplicates are taken from; the caller closes it. */
  fd: number;
  /** The address it listens on, as a URL (`http://host:port`). */
  url: string;
}

export async function openListenSocket(host: string, port: number): Promise<ListenSocket> {
  const door = createServer();
  await new Promise<void>((resolve, reject) => door.once('error', reject).listen({ host, port }, resolve));
  const address = door.address() as AddressInfo;
  const doorFd: unknown = Reflect.get(Reflect.get(door, '_handle') ?? {}, 'fd');
  if (typeof doorFd !== 'number' || doorFd < 0) throw new Error('gateway.threads: the listening socket has no file descriptor');
  const fd = await duplicateFd(doorFd);
  await new Promise<void>((resolve) => door.close(() => resolve()));
  return { fd, url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}` };
}
