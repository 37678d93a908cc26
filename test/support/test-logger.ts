/** A silent logger for tests, or one that captures lines when asked. */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';

export function silentLogger(): Logger {
  return createLogger({ level: 'silent' });
}

export function captureLogger(): { log: Logger; lines: () => Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ level: 'debug', destination }), lines: () => lines };
}
