/**
 * A test double of the gateway-thread entry point (loaded by ending-gateway-thread.mjs; the real one
 * is bin/voxmux.mjs): it runs the real gateway thread, and ends the thread (exit code 7) when the
 * main thread reports a call of this thread dispatched, so that the call is in the main thread's
 * hands when its thread is gone. Where a file `fail-start` exists in the config's gateway.tmpDir, it
 * removes it and fails to start instead (exit code 9, before listening): one failed start.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { runGatewayThread } from '../../src/app/gateway-threads/thread-main.js';
import type { GatewayThreadData, OwnerMessage } from '../../src/app/gateway-threads/thread-messages.js';

const data = workerData as GatewayThreadData;
const failOnce = join(data.config.gateway.tmpDir, 'fail-start');
if (data.config.gateway.tmpDir !== '' && existsSync(failOnce)) {
  rmSync(failOnce);
  process.exit(9);
}
parentPort?.on('message', (message: OwnerMessage) => {
  if (message.type === 'dispatched') process.exit(7);
});
await runGatewayThread(data);
