/**
 * A duplicate of a file descriptor, closed on exec, through libc's fcntl(F_DUPFD_CLOEXEC) called
 * with koffi. Each gateway thread listens on a duplicate of the main thread's listening socket: a
 * thread that ends closes its own descriptor, never the one the others accept on (Node 20 has no
 * SO_REUSEPORT option and no way to hand a socket to a worker thread). Close-on-exec keeps the
 * socket out of the model instances and ffmpeg processes the server starts.
 */
const F_DUPFD_CLOEXEC = 1030;

type Fcntl = (fd: number, cmd: number, ...args: unknown[]) => number;
let fcntl: Promise<Fcntl> | undefined;

async function loadFcntl(): Promise<Fcntl> {
  // Imported when first needed: a server without gateway threads never loads the native module.
  const { default: koffi } = (await import('koffi')) as unknown as {
    default: { load(path: string): { func(signature: string): Fcntl } };
  };
  return koffi.load('libc.so.6').func('int fcntl(int fd, int cmd, ...)');
}

/** A new descriptor for the same open socket (or file); rejects when the call fails or koffi cannot load. */
export async function duplicateFd(fd: number): Promise<number> {
  fcntl ??= loadFcntl();
  const copy = (await fcntl)(fd, F_DUPFD_CLOEXEC, 'int', 0);
  if (copy < 0) throw new Error(`fcntl(${fd}, F_DUPFD_CLOEXEC) failed`);
  return copy;
}
