#!/usr/bin/env node
// The voxmux command (src/app/cli.ts), run from the build in dist/. The bench (bench/cli/, built
// into dist/bench/cli/) is imported only when `voxmux bench` is run.
//
// `voxmux serve` (or `voxmux` with no command, or a flag first) on Linux runs the gateway in a
// child process of this one, started with glibc's mmap threshold fixed at 64 KiB
// (MALLOC_MMAP_THRESHOLD_). With glibc's default, the threshold rises to the size of the largest
// block freed (up to 32 MiB), after which upload-sized blocks (64 KiB to a few MiB) come from the
// main heap, and a burst of uploads leaves it 18 to 25 MiB larger for good; with the threshold
// fixed, each such block is its own mapping and goes back to the system when freed (issue 16,
// measured in test/e2e/memory-idle.test.ts). The setting must be in the environment before the
// process starts, hence the child. It is dropped again from the environment that model instances
// inherit (src/config/env.ts), where large tensors would pay a mapping per allocation. The child is
// started in a session of its own, so that a terminal's Ctrl-C reaches it once, through this
// process; it drains when this process ends for any reason, SIGKILL included (it sees the IPC
// channel close). A user's own MALLOC_MMAP_THRESHOLD_ is left as it is, with no child.
//
// A gateway thread (gateway.threads) runs this same script in a worker thread; its workerData says
// so, and it runs the thread's gateway instead of the command.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { isMainThread, workerData } from 'node:worker_threads';

if (!isMainThread && workerData?.role === 'voxmux-gateway-thread') {
  const { runGatewayThread } = await import('../dist/src/app/gateway-threads/thread-main.js');
  await runGatewayThread(workerData);
} else {
  await runCommand();
}

async function runCommand() {
  const MALLOC = { MALLOC_MMAP_THRESHOLD_: '65536' };

  if (!existsSync(fileURLToPath(new URL('../dist/src/app/cli.js', import.meta.url)))) {
    process.stderr.write('voxmux is not built: run `npm run build` in its folder first\n');
    process.exit(1);
  }

  if (process.env.VOXMUX_GATEWAY_MALLOC !== undefined && process.channel !== undefined) {
    // The gateway child: drain once the launcher is gone.
    process.channel.unref();
    process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  } else if (isServe(process.argv.slice(2)) && process.platform === 'linux' && process.env.MALLOC_MMAP_THRESHOLD_ === undefined) {
    const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
      detached: true,
      env: { ...process.env, ...MALLOC, VOXMUX_GATEWAY_MALLOC: Object.keys(MALLOC).join(',') },
    });
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
    const [code, signal] = await new Promise((resolve) => child.once('exit', (...end) => resolve(end)));
    process.exit(code ?? 128 + (constants.signals[signal] ?? 0));
  }

  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const { runCli } = await import('../dist/src/app/cli.js');
  const loadBench = async () => (await import('../dist/bench/cli/cli.js')).runBenchCli;
  process.exit(await runCli(process.argv.slice(2), { version, loadBench }));
}

// The command's own rule (src/app/cli.ts): no command, or a flag first, means serve.
function isServe(argv) {
  const first = argv[0];
  return first === undefined || first === 'serve' || first.startsWith('-');
}
