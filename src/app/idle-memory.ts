/**
 * Memory back to the system once the gateway goes idle (its upload pool has let go of its memory,
 * gateway.uploadPoolIdleMs after the last upload): a full garbage collection of this thread's
 * JavaScript heap, then glibc's malloc_trim(0) (libc.ts).
 *
 * Why the collection: a burst's ArrayBuffers and Buffers keep their backing stores in the C heap
 * until V8 collects them, and an idle process allocates nothing, so V8 has no reason to collect;
 * the trim can only give back what is already free. In test/e2e/memory-idle.test.ts on a 2-core
 * machine, glibc's main heap ended -1.6 to 5.0 MiB above idle in 5 runs with the trim alone (in an
 * earlier series, one run of 9 at 13.2 MiB), 0.2 to 0.3 MiB in 7 runs with a collection first at
 * the pool's release, and -0.4 to 6.1 MiB in 7 runs (0.0 to 0.2 in 5) with the collection
 * waiting for the last calls (src/gateway/idle-release.ts), so that its pause (tens of
 * milliseconds) delays none.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { trimNativeHeap } from './libc.js';

let collect: (() => void) | undefined;

/**
 * V8's `gc()`: exposed to contexts created after --expose-gc is set, so a fresh context hands it
 * over without starting Node with the flag (the flag changes nothing else).
 */
function collectGarbage(): void {
  if (collect === undefined) {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  collect();
}

/**
 * The collection, unless calls are in progress (`isServing`: its pause, tens of milliseconds, would
 * hold them up; a realtime call's audio, say), then the trim.
 */
export async function releaseIdleMemory(p: { isServing: boolean }): Promise<void> {
  if (!p.isServing) collectGarbage();
  await trimNativeHeap();
}
