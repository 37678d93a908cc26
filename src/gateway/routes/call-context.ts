/**
 * What every API call starts with: an abort signal that fires when the client goes away, its
 * arrival time, and the priority and deadline it asked for in its headers.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../../core/error-catalog.js';
import type { Priority } from '../../scheduler/index.js';
import type { GatewayDeps, GatewayOptions } from '../gateway-types.js';

/** Callers that share a server can mark latency-critical calls; everything else is `normal`. */
export const PRIORITY_HEADER = 'voxmux-priority';
export function priorityOf(value: string | string[] | undefined): Priority {
  if (value === undefined) return 'normal';
  if (value === 'high' || value === 'normal') return value;
  throw errors.invalidParameter({ param: PRIORITY_HEADER, expected: 'high or normal', got: value });
}

/**
 * A call may ask for its own deadline, in milliseconds from its arrival, up to
 * gateway.maxRequestTimeoutMs; without the header, gateway.requestTimeoutMs applies.
 */
export const DEADLINE_HEADER = 'voxmux-deadline-ms';
const DEFAULT_MAX_REQUEST_TIMEOUT_MS = 600_000;

export function deadlineOf(value: string | string[] | undefined, options: GatewayOptions): number {
  if (value === undefined) return options.requestTimeoutMs;
  const maxMs = options.maxRequestTimeoutMs ?? DEFAULT_MAX_REQUEST_TIMEOUT_MS;
  const expected = `an integer number of milliseconds from 1 to ${maxMs}`;
  if (typeof value !== 'string' || !/^[0-9]{1,10}$/.test(value.trim())) {
    throw errors.invalidParameter({ param: DEADLINE_HEADER, expected, got: value });
  }
  const deadlineMs = Number(value.trim());
  if (deadlineMs < 1 || deadlineMs > maxMs) {
    throw errors.invalidParameter({ param: DEADLINE_HEADER, expected, got: value });
  }
  return deadlineMs;
}

export interface CallContext {
  /** Aborted with client_disconnected when the connection closes before the response is finished. */
  abort: AbortController;
  arrivedMs: number;
  priority: Priority;
  /** The call's deadline in milliseconds from its arrival. */
  deadlineMs: number;
}

/**
 * Opens a call. The abort reason is a cancelled-kind error, so whatever waits on the signal (a
 * decode, the queue) fails as cancelled and is neither answered nor logged as an internal error.
 * @throws invalid_parameter for a malformed priority or deadline header
 */
export function openCall(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: Pick<GatewayDeps, 'clock'>,
  options: GatewayOptions,
): CallContext {
  const abort = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) abort.abort(errors.clientDisconnected({ requestId: String(request.id) }));
  });
  return {
    abort,
    arrivedMs: deps.clock.nowMs(),
    priority: priorityOf(request.headers[PRIORITY_HEADER]),
    deadlineMs: deadlineOf(request.headers[DEADLINE_HEADER], options),
  };
}
