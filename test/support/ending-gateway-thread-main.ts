/**
 * A test double of the gateway-thread entry point (loaded by ending-gateway-thread.mjs) (the real one is bin/voxmux.mjs): it runs the
 * real gateway thread, and ends the thread (exit code 7) when the main thread reports a call of
 * this thread dispatched, so that the call is in the main thread's hands when its thread is gone.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { runGatewayThread } from '../../src/app/gateway-threads/thread-main.js';
import type { GatewayThreadData, OwnerMessage } from '../../src/app/gateway-threads/thread-messages.js';

parentPort?.on('message', (message: OwnerMessage) => {
  if (message.type === 'dispatched') process.exit(7);
});
await runGatewayThread(workerData as GatewayThreadData);
