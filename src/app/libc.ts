/**
 * The C library's functions voxmux calls, through koffi (loaded at the first call, so a server
 * that never needs them never loads the native module): fcntl and close for gateway threads'
 * sockets (gateway-threads/duplicate-fd.ts) and malloc_trim for memory back to idle.
 */
type Fcntl = (fd: number, cmd: number, ...args: unknown[]) => number;
type MallocTrim = (pad: number) => number;
type Close = (fd: number) => number;

interface Libc {
  fcntl: Fcntl;
  close: Close;
  mallocTrim: MallocTrim;
}

let libc: Promise<Libc> | undefined;

export function loadLibc(): Promise<Libc> {
  libc ??= (async () => {
    const { default: koffi } = (await import('koffi')) as unknown as {
      default: { load(path: string): { func(signature: string): (...args: unknown[]) => number } };
    };
    const lib = koffi.load('libc.so.6');
    return {
      fcntl: lib.func('int fcntl(int fd, int cmd, ...)') as Fcntl,
      close: lib.func('int close(int fd)') as Close,
      mallocTrim: lib.func('int malloc_trim(size_t pad)') as MallocTrim,
    };
  })();
  return libc;
}

/**
 * Gives the C heap's free pages back to the system (glibc's malloc_trim(0), which also releases
 * free pages inside the heap, not only at its top). Called when the gateway goes idle
 * (idle-memory.ts): after a burst, small blocks freed below a live one otherwise stay resident for
 * good (the main heap then ends 18 to 29 MiB above idle; test/e2e/memory-idle.test.ts). Where glibc
 * or koffi is missing it does nothing.
 */
export async function trimNativeHeap(): Promise<void> {
  try {
    (await loadLibc()).mallocTrim(0);
  } catch {
    // not glibc, or koffi cannot load: nothing to give back this way
  }
}
