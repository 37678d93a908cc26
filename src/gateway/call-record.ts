/**
 * What a finished API call leaves in the request log. Routes fill a CallRecord on the request as
 * they learn things (model, audio, dispatch); the gateway's onResponse hook turns it into one
 * RequestLogLine. No audio, text or prompt ever goes in.
 */
import type { RequestLogKind, RequestLogLine } from '../api/request-log.js';
import type { Dispatch } from '../scheduler/index.js';

export interface CallRecord {
  kind: RequestLogKind;
  /** Canonical once resolved; the name asked for until then ('' before the body is read). */
  model: string;
  audioInSeconds: number;
  audioOutSeconds: number;
  /** The first dispatch of the call's work, on the gateway clock (milliseconds). */
  firstDispatchMs: number | undefined;
  /** How long the first request waited in the queue, in milliseconds. */
  queueMs: number | undefined;
  /** The instance of the latest dispatch (a retry moves a request to another). */
  instanceId: string | undefined;
  /** When the result was in (the last audio for speech), on the gateway clock; else the answer's end counts. */
  resultMs: number | undefined;
}

export function createCallRecord(kind: RequestLogKind): CallRecord {
  return {
    kind,
    model: '',
    audioInSeconds: 0,
    audioOutSeconds: 0,
    firstDispatchMs: undefined,
    queueMs: undefined,
    instanceId: undefined,
    resultMs: undefined,
  };
}

/** Records a dispatch of the call's work at `nowMs` (the scheduler's onDispatched). */
export function noteDispatch(record: CallRecord, dispatch: Dispatch, nowMs: number): void {
  if (record.firstDispatchMs === undefined) {
    record.firstDispatchMs = nowMs;
    record.queueMs = dispatch.queuedMs;
  }
  record.instanceId = dispatch.instanceId;
}

export interface CallEnd {
  /** When the call arrived, wall-clock milliseconds since the epoch. */
  arrivedWallMs: number;
  durationMs: number;
  /** When the answer ended, on the gateway clock (milliseconds). */
  endMs: number;
  status: number;
  code: string | undefined;
  /** The GPU of an instance; undefined on CPU or when the instance is gone. */
  gpuOf: (instanceId: string) => number | undefined;
}

const roundMs = (ms: number) => Math.round(ms * 1000) / 1000;

export function toRequestLogLine(record: CallRecord, end: CallEnd): RequestLogLine {
  const serviceMs = record.firstDispatchMs === undefined ? undefined : Math.max(0, (record.resultMs ?? end.endMs) - record.firstDispatchMs);
  const gpu = record.instanceId === undefined ? undefined : end.gpuOf(record.instanceId);
  return {
    time: new Date(end.arrivedWallMs).toISOString(),
    durationMs: roundMs(end.durationMs),
    model: record.model,
    kind: record.kind,
    audioInSeconds: record.audioInSeconds,
    audioOutSeconds: record.audioOutSeconds,
    queueMs: record.queueMs === undefined ? null : roundMs(record.queueMs),
    serviceMs: serviceMs === undefined ? null : roundMs(serviceMs),
    status: end.status,
    code: end.code ?? null,
    instanceId: record.instanceId ?? null,
    gpu: gpu ?? null,
    gpuSeconds: gpu === undefined || serviceMs === undefined ? 0 : roundMs(serviceMs) / 1000,
  };
}
