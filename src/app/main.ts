/**
 * Process entry for `voxmux serve`: load config, build, listen, start instances, handle signals.
 * Exit codes: 0 after a clean drain, 1 on a fatal error, 2 on bad arguments, 78 on invalid configuration.
 */
import { parseArgs } from 'node:util';
import { systemClock } from '../core/clock.js';
import { readEnvironment, readProcessEnvironment } from '../config/env.js';
import { ConfigError, loadConfig, readConfigFile, redact } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { spawnInstance } from '../supervisor/index.js';
import { createLogger } from '../telemetry/logger.js';
import { buildServer, type Server } from './build-server.js';
import { openListenSocket } from './gateway-threads/listen-socket.js';
import { modelReadiness, readyMessage } from './ready-message.js';

export const EXIT_CONFIG = 78;
/** Bad arguments (an unknown flag, a missing value), as every other voxmux command exits for them. */
export const EXIT_USAGE = 2;

export function parseServeArgs(argv: readonly string[]): { config: Config; printConfig: boolean } {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      config: { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      'print-config': { type: 'boolean', default: false },
      set: { type: 'string', multiple: true },
    },
    strict: true,
    allowPositionals: false,
  });
  const env = readEnvironment();
  const filePath = values.config ?? env.VOXMUX_CONFIG;
  const flags: Record<string, string> = {};
  if (values.host !== undefined) flags['gateway.host'] = values.host;
  if (values.port !== undefined) flags['gateway.port'] = values.port;
  if (values['log-level'] !== undefined) flags['telemetry.logLevel'] = values['log-level'];
  if (values['log-format'] !== undefined) flags['telemetry.logFormat'] = values['log-format'];
  for (const pair of values.set ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new ConfigError([`--set ${pair}: expected path=value`]);
    flags[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const config = loadConfig({
    file: filePath === undefined ? undefined : readConfigFile(filePath),
    filePath,
    env,
    flags,
  });
  return { config, printConfig: values['print-config'] === true };
}

export async function main(argv: readonly string[]): Promise<number> {
  let parsed: { config: Config; printConfig: boolean };
  try {
    parsed = parseServeArgs(argv);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`voxmux serve: ${(err as Error).message} (voxmux serve --help)\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`${err instanceof ConfigError ? err.message : `Invalid arguments: ${(err as Error).message}`}\n`);
    return EXIT_CONFIG;
  }
  const { config } = parsed;
  if (parsed.printConfig) {
    process.stdout.write(`${JSON.stringify(redact(config), null, 2)}\n`);
    return 0;
  }
  const log = createLogger({ level: config.telemetry.logLevel, format: config.telemetry.logFormat, isTTY: process.stdout.isTTY === true });
  let server: Awaited<ReturnType<typeof buildServer>>;
  try {
    server = await buildServer(config, {
      log,
      clock: systemClock,
      spawn: spawnInstance,
      baseEnv: readProcessEnvironment(),
      // Gateway threads run the script this process runs (bin/voxmux.mjs or the bundle).
      ...(process.argv[1] === undefined ? {} : { gatewayThreadEntry: process.argv[1] }),
    });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return EXIT_CONFIG;
  }
  let signals = 0;
  const done = new Promise<number>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: stopping now');
        void server.destroy().finally(() => resolve(1));
        return;
      }
      log.info({ signal }, 'draining');
      server.close().then(
        () => {
          log.info({}, 'closed');
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err }, 'close failed');
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  let address: string;
  try {
    address = await listen(server, config);
    log.info({ address, models: Object.keys(config.models), gatewayThreads: config.gateway.threads }, 'listening');
  } catch (err) {
    log.fatal({ err }, 'listen failed');
    await server.destroy();
    return 1;
  }
  server.startInstances().then(
    () => {
      if (signals > 0) return;
      const models = modelReadiness(config, server.supervisor.stats().instances);
      // NOTE: the one message with values in its text: it is the line a person starting voxmux
      // looks for. The same values are in its fields for collectors.
      log.info({ url: address, models }, readyMessage(address, models));
    },
    (err: unknown) => {
      log.fatal({ err }, 'instances failed to start');
      void server.destroy().finally(() => process.exit(1));
    },
  );
  return done;
}

/**
 * Listens on gateway.host and gateway.port; resolves with the address. With gateway.threads, only
 * the threads accept there: the main thread keeps a descriptor of the socket that no loop polls
 * (each thread, one started later too, gets a duplicate of it), and its own gateway listens at a
 * loopback port for the calls the threads pass on.
 */
async function listen(server: Server, config: Config): Promise<string> {
  const { host, port, threads } = config.gateway;
  if (threads === 0) return server.app.listen({ host, port });
  const socket = await openListenSocket(host, port);
  const ownerUrl = await server.app.listen({ host: '127.0.0.1', port: 0 });
  await server.startGatewayThreads({ listenFd: socket.fd, ownerUrl });
  return socket.url;
}
