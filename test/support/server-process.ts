/**
 * Starts the built server (dist/src/app/main.js, as `npm start` does) as a real process on
 * 127.0.0.1 with a free port, and waits until /health/ready answers 200.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../bin/voxmux.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../../dist/src/app/cli.js', import.meta.url));

export interface RunningServer {
  url: string;
  process: ChildProcess;
  logs: Record<string, unknown>[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  readiness(): Promise<{ status: number; body: Record<string, unknown> }>;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /**
   * The gateway's own process id: on Linux, `voxmux serve` runs the gateway in a child of the
   * launcher (bin/voxmux.mjs); elsewhere, or with MALLOC_MMAP_THRESHOLD_ set, it is the launcher.
   */
  gatewayPid(): number;
}

export async function startServer(
  options: {
    config?: unknown;
    env?: Record<string, string>;
    args?: string[];
    waitReady?: boolean;
    timeoutMs?: number;
    /** Start it as `voxmux --host ...`, serve being the default command. @default false */
    isCommandOmitted?: boolean;
  } = {},
): Promise<RunningServer> {
  if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: run npm run build first`);
  const args = [
    MAIN,
    ...(options.isCommandOmitted === true ? [] : ['serve']),
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    ...(options.args ?? []),
  ];
  if (options.config !== undefined) {
    const file = join(mkdtempSync(join(tmpdir(), 'voxmux-test-')), 'config.json');
    writeFileSync(file, JSON.stringify(options.config));
    args.push('--config', file);
  }
  const child = spawn(process.execPath, args, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', VOXMUX_LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const address = await new Promise<string>((resolve, reject) => {
    let pending = '';
    const timer = setTimeout(() => reject(new Error(`server did not listen; stderr: ${stderr}`)), 20_000);
    child.once('exit', (code) => reject(new Error(`server exited with ${code} before listening; stderr: ${stderr}`)));
    child.stdout!.on('data', (d: Buffer) => {
      pending += d.toString();
      let nl: number;
      while ((nl = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          logs.push(entry);
          if (entry.msg === 'listening') {
            clearTimeout(timer);
            resolve(String(entry.address));
          }
        } catch {
          // not a log line
        }
      }
    });
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const server: RunningServer = {
    url: address,
    process: child,
    logs,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
    async readiness() {
      const res = await fetch(`${address}/health/ready`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    },
    gatewayPid() {
      const pid = child.pid!;
      const children = `/proc/${pid}/task/${pid}/children`;
      const ids = existsSync(children)
        ? readFileSync(children, 'utf8')
            .trim()
            .split(/\s+/)
            .filter((id) => id !== '')
        : [];
      // The gateway child runs the launcher's script too; model instances do not.
      const gateway = ids.find((id) => readFileSync(`/proc/${id}/cmdline`, 'utf8').includes('voxmux.mjs'));
      return gateway === undefined ? pid : Number(gateway);
    },
    async metric(name, labels = {}) {
      const text = await (await fetch(`${address}/metrics`)).text();
      let total = 0;
      for (const line of text.split('\n')) {
        if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
        const match = /^([^{ ]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
        if (match === null || match[1] !== name) continue;
        const lineLabels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
        if (Object.entries(labels).every(([k, v]) => lineLabels[k] === v)) total += Number(match[3]);
      }
      return total;
    },
  };
  if (options.waitReady !== false) {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    for (;;) {
      try {
        if ((await server.readiness()).status === 200) break;
      } catch {
        // not answering yet
      }
      if (Date.now() > deadline) {
        await server.stop('SIGKILL');
        throw new Error(`server not ready in time; stderr: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return server;
}
