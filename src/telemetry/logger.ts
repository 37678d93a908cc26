/** The pino root logger factory; components receive children: log.child({ component }). */
import { pino, stdSerializers, type Logger, type DestinationStream } from 'pino';
import { PinoPretty } from 'pino-pretty';

export type { Logger };

/** `auto`: pretty when stdout is a terminal, JSON otherwise. */
export type LogFormat = 'auto' | 'json' | 'pretty';

export interface LoggerOptions {
  level: string;
  /** @default 'json' */
  format?: LogFormat;
  /** Whether the destination is a terminal: decides `auto`, and colours pretty lines. @default false */
  isTTY?: boolean;
  /** Where lines go; stdout when absent. */
  destination?: DestinationStream;
}

/** The format `auto` stands for: pretty on a terminal (a person reads it), JSON otherwise (a collector does). */
export function resolveLogFormat(format: LogFormat, isTTY: boolean): 'json' | 'pretty' {
  return format === 'auto' ? (isTTY ? 'pretty' : 'json') : format;
}

export function createLogger(options: LoggerOptions): Logger {
  const isTTY = options.isTTY === true;
  const format = resolveLogFormat(options.format ?? 'json', isTTY);
  // Pretty lines are formatted in this thread (a stream, not a worker-thread transport): the
  // bundle then needs no module resolved at run time, and nothing is lost when the process exits
  // right after a line, as the synchronous writes guarantee.
  const destination =
    format === 'pretty'
      ? PinoPretty({
          destination: options.destination ?? 1,
          sync: true,
          colorize: isTTY,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname,service',
          singleLine: true,
        })
      : options.destination;
  return pino(
    {
      level: options.level,
      base: { service: 'voxmux' },
      redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
      serializers: { err: stdSerializers.err },
    },
    destination,
  );
}
