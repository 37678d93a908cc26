/**
 * A duplicate of a file descriptor, closed on exec, through libc's fcntl(F_DUPFD_CLOEXEC) called
 * with koffi. Each gateway thread listens on a duplicate of the main thread's listening socket: a
 * thread that ends closes its own descriptor, never the one the others accept on (Node 20 has no
 * SO_REUSEPORT option and no way to hand a socket to a worker thread). Close-on-exec keeps the
 * socket out of the model instances and ffmpeg processes the server starts.
 */
import { loadLibc } from '../libc.js';

const F_DUPFD_CLOEXEC = 1030;

/** A new descriptor for the same open socket (or file); rejects when the call fails or koffi cannot load. */
export async function duplicateFd(fd: number): Promise<number> {
  const copy = (await loadLibc()).fcntl(fd, F_DUPFD_CLOEXEC, 'int', 0);
  if (copy < 0) throw new Error(`fcntl(${fd}, F_DUPFD_CLOEXEC) failed`);
  return copy;
}

/** Closes a descriptor made by duplicateFd that no thread took; rejects when the call fails. */
export async function closeFd(fd: number): Promise<void> {
  if ((await loadLibc()).close(fd) < 0) throw new Error(`close(${fd}) failed`);
}
