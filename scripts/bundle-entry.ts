/**
 * The server bundle's entry (.bundle/voxmux.mjs). The bench is a bundle of its own,
 * .bundle/voxmux-bench.mjs, imported from beside this one only when `voxmux bench` is run; its
 * path is computed at run time, so esbuild leaves it out of the server bundle.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { runBenchCli } from '../bench/cli/cli.js';
import { isMainThread, workerData } from 'node:worker_threads';
import { runCli } from '../src/app/cli.js';
import { GATEWAY_THREAD_ROLE, runGatewayThread } from '../src/app/gateway-threads/thread-main.js';
// esbuild inlines the JSON, so the bundle needs no package.json beside it.
import packageJson from '../package.json' with { type: 'json' };

const BENCH_BUNDLE = new URL('./voxmux-bench.mjs', import.meta.url);

async function loadBench(): Promise<typeof runBenchCli> {
  const bench = (await import(BENCH_BUNDLE.href)) as { runBenchCli: typeof runBenchCli };
  return bench.runBenchCli;
}

const version = packageJson.version;
// A gateway thread (gateway.threads) runs this same file in a worker thread; its workerData says so.
if (!isMainThread && (workerData as { role?: unknown } | null)?.role === GATEWAY_THREAD_ROLE) {
  await runGatewayThread(workerData as Parameters<typeof runGatewayThread>[0]);
} else {
  process.exit(await runCli(process.argv.slice(2), existsSync(fileURLToPath(BENCH_BUNDLE)) ? { version, loadBench } : { version }));
}
