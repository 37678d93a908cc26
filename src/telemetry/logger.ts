/** The pino root logger factory; components receive children: log.child({ component }). */
import { pino, stdSerializers, type Logger, type DestinationStream } from 'pino';

export type { Logger };

export interface LoggerOptions {
  level: string;
  /** Where lines go; stdout when absent. */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'voxmux' },
      redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
      serializers: { err: stdSerializers.err },
    },
    options.destination,
  );
}
