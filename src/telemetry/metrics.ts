/**
 * The metrics catalogue: the only place metric names, help texts, labels and buckets are
 * declared. Components receive typed handles. docs/metrics.md lists each (a test checks).
 */
import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const BATCH_SIZE_BUCKETS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256];
const BOOT_BUCKETS_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 300];
const LATENCY_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export interface MetricsOptions {
  /**
   * A gateway thread's name (`gateway-1`, ...): its registry then holds what the thread records,
   * its own loop's busy time under that name, and neither the process metrics nor the main
   * thread's loop, which the main thread's registry reports once. Absent: the main thread.
   */
  thread?: string;
}

export function createMetrics(options: MetricsOptions = {}) {
  const registry = new Registry();
  const r = [registry];
  const isMainThread = options.thread === undefined;
  const handles = {
    registry,
    gatewayCalls: new Counter({
      name: 'voxmux_gateway_calls_total',
      help: 'API calls by endpoint and outcome (ok or the error kind).',
      labelNames: ['endpoint', 'outcome'] as const,
      registers: r,
    }),
    gatewayCallDuration: new Histogram({
      name: 'voxmux_gateway_call_duration_seconds',
      help: 'Time from a call arriving to its answer, by endpoint.',
      labelNames: ['endpoint'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    gatewayDecodeDuration: new Histogram({
      name: 'voxmux_gateway_audio_decode_seconds',
      help: 'Time spent decoding uploaded audio to 16 kHz mono, by format.',
      labelNames: ['format'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    uploadPoolBytes: new Gauge({
      name: 'voxmux_gateway_upload_pool_bytes',
      help: 'Memory held for reuse by uploads (at most gateway.uploadPoolBytes).',
      registers: r,
    }),
    uploadAllocatedBytes: new Counter({
      name: 'voxmux_gateway_upload_allocated_bytes_total',
      help: 'Memory allocated for uploads because the pool had none to reuse; growing under steady load means the pool is too small.',
      registers: r,
    }),
    requests: new Counter({
      name: 'voxmux_scheduler_requests_total',
      help: 'Requests submitted to the scheduler by model and outcome (ok or the error code).',
      labelNames: ['model', 'outcome'] as const,
      registers: r,
    }),
    requestsQueued: new Gauge({
      name: 'voxmux_scheduler_requests_queued',
      help: 'Requests accepted and not yet dispatched, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    requestsRunning: new Gauge({
      name: 'voxmux_scheduler_requests_running',
      help: 'Requests dispatched to an instance and not yet finished, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    queueWait: new Histogram({
      name: 'voxmux_scheduler_queue_wait_seconds',
      help: 'Time a request waited in the queue before dispatch, by model.',
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    batchSize: new Histogram({
      name: 'voxmux_scheduler_batch_size',
      help: 'Requests per dispatched batch, by model.',
      labelNames: ['model'] as const,
      buckets: BATCH_SIZE_BUCKETS,
      registers: r,
    }),
    retries: new Counter({
      name: 'voxmux_scheduler_retries_total',
      help: 'Requests re-queued after their instance failed, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    sessionsActive: new Gauge({
      name: 'voxmux_scheduler_sessions_active',
      help: 'Sessions (sequence work) the scheduler holds, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    sessionsExpired: new Counter({
      name: 'voxmux_scheduler_sessions_expired_total',
      help: 'Sessions dropped after sessionIdleTimeoutMs without items, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    sequenceItems: new Counter({
      name: 'voxmux_scheduler_sequence_items_total',
      help: 'Sequence items submitted to the scheduler by model and outcome (ok or the error code); resubmitted duplicates are not counted.',
      labelNames: ['model', 'outcome'] as const,
      registers: r,
    }),
    streamsQueued: new Gauge({
      name: 'voxmux_scheduler_streams_queued',
      help: 'Streams accepted and not yet started on an instance, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    streamsRunning: new Gauge({
      name: 'voxmux_scheduler_streams_running',
      help: 'Streams started on an instance and not yet ended, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    streams: new Counter({
      name: 'voxmux_scheduler_streams_total',
      help: 'Streams opened through the scheduler by model and outcome (ok or the error code).',
      labelNames: ['model', 'outcome'] as const,
      registers: r,
    }),
    inferences: new Counter({
      name: 'voxmux_instance_inferences_total',
      help: 'Requests executed by instances, by model; divided by executions it gives the mean batch size.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    executions: new Counter({
      name: 'voxmux_instance_executions_total',
      help: 'Batches executed by instances, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    computeDuration: new Histogram({
      name: 'voxmux_instance_compute_seconds',
      help: 'Time an instance spent computing one batch, by model.',
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    batchSendDuration: new Histogram({
      name: 'voxmux_instance_batch_send_seconds',
      help: "Time to write one batch (its audio included) into its instance's socket, from its frame handed to the socket (behind any frames still queued there) until the kernel took its last byte, by model.",
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    sequenceItemsExecuted: new Counter({
      name: 'voxmux_instance_sequence_items_total',
      help: 'Sequence items executed by instances, by model; divided by sequence executions it gives the mean sequence batch size.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    sequenceExecutions: new Counter({
      name: 'voxmux_instance_sequence_executions_total',
      help: 'Sequence batches executed by instances, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    sequenceComputeDuration: new Histogram({
      name: 'voxmux_instance_sequence_compute_seconds',
      help: 'Time an instance spent computing one sequence batch, by model.',
      labelNames: ['model'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    instanceStreams: new Counter({
      name: 'voxmux_instance_streams_total',
      help: 'Streams ended on instances, by model and outcome (ok or the error code).',
      labelNames: ['model', 'outcome'] as const,
      registers: r,
    }),
    streamChunks: new Counter({
      name: 'voxmux_instance_stream_chunks_total',
      help: 'Stream chunks received from instances, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    instanceResources: new Gauge({
      name: 'voxmux_instance_resources',
      help: 'Named resources (voices) held by the live instances of a model, summed, as last reported.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    instances: new Gauge({
      name: 'voxmux_instances',
      help: 'Instance slots by model and state: restarting while a slot waits out its restart backoff, closed for each slot of a stopped model.',
      labelNames: ['model', 'state'] as const,
      registers: r,
    }),
    instanceRestarts: new Counter({
      name: 'voxmux_instance_restarts_total',
      help: 'Instances restarted after a crash or wedge, by model and reason (exited, wedged, failed_to_start): counted when the new instance is spawned, so a restart that a stop or a close cancels during its backoff is not.',
      labelNames: ['model', 'reason'] as const,
      registers: r,
    }),
    instanceMemory: new Gauge({
      name: 'voxmux_instance_memory_bytes',
      help: 'Device memory held by the instances of a model, summed, as last reported.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    instanceWarmup: new Histogram({
      name: 'voxmux_instance_warmup_seconds',
      help: 'Time an instance took to load and warm up, by model.',
      labelNames: ['model'] as const,
      buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600],
      registers: r,
    }),
    // issue 20: boot time, measured
    instanceBootPhase: new Histogram({
      name: 'voxmux_instance_boot_phase_seconds',
      help: 'Phases of an instance boot, by model and phase: process_start (spawn to Hello), load, warmup_wait (the exclusive warmup gate) and warmup; they add up to voxmux_instance_warmup_seconds.',
      labelNames: ['model', 'phase'] as const,
      buckets: BOOT_BUCKETS_S,
      registers: r,
    }),
    instanceBootStage: new Histogram({
      name: 'voxmux_instance_boot_stage_seconds',
      help: 'Parts of the load and warmup an adapter timed, by model and stage (import, device_init, weight_read, model_build, device_upload, compile, warmup, graph_capture).',
      labelNames: ['model', 'stage'] as const,
      buckets: BOOT_BUCKETS_S,
      registers: r,
    }),
    instanceWeightReadBytes: new Gauge({
      name: 'voxmux_instance_weight_read_bytes',
      help: 'Bytes of weight files the last instance of a model to become ready read while it loaded.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    instanceWeightReadRate: new Gauge({
      name: 'voxmux_instance_weight_read_bytes_per_second',
      help: 'How fast the last instance of a model to become ready read its weight files (bytes over the weight_read stages).',
      labelNames: ['model'] as const,
      registers: r,
    }),
    graphsCaptured: new Gauge({
      name: 'voxmux_instance_graphs_captured',
      help: 'CUDA graphs captured at warmup by the instances of a model, summed.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    eagerBatches: new Gauge({
      name: 'voxmux_instance_eager_batches',
      help: 'Batches run eagerly (outside a captured shape) by the live instances of a model, summed, as of their last heartbeats.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    graphReplays: new Gauge({
      name: 'voxmux_instance_graph_replays',
      help: 'Batches run by replaying a CUDA graph by the live instances of a model, summed, as of their last heartbeats.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    audioProcessed: new Counter({
      name: 'voxmux_audio_processed_seconds_total',
      help: 'Seconds of audio transcribed, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    // scheduler: admission by predicted completion
    admissionRejected: new Counter({
      name: 'voxmux_scheduler_admission_rejected_total',
      help: 'Batch requests refused at once with deadline_unreachable because their predicted completion passed their deadline less the margin, by model and priority.',
      labelNames: ['model', 'priority'] as const,
      registers: r,
    }),
    admissionPredictionError: new Histogram({
      name: 'voxmux_scheduler_admission_prediction_error_seconds',
      help: 'Actual minus predicted completion time of admitted batch requests that finished with a result, by model (positive: later than predicted).',
      labelNames: ['model'] as const,
      buckets: [-30, -10, -5, -2, -1, -0.5, -0.25, -0.1, 0, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers: r,
    }),
    // issue 16: long recordings in pieces
    audioCuts: new Counter({
      name: 'voxmux_gateway_audio_cuts_total',
      help: 'Cuts made in long recordings, by kind: pause, short_pause (the longest pause in reach was short) or no_pause (cut inside speech).',
      labelNames: ['kind'] as const,
      registers: r,
    }),
    audioPieces: new Counter({
      name: 'voxmux_gateway_audio_pieces_total',
      help: 'Pieces that long recordings were cut into, each submitted as its own request, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    diarizationSessionsExpired: new Counter({
      name: 'voxmux_gateway_diarization_sessions_expired_total',
      help: 'Diarization sessions closed after their model sessionIdleTimeoutMs without chunks, by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    voiceActivityDuration: new Histogram({
      name: 'voxmux_gateway_voice_activity_seconds',
      help: 'Time spent finding pauses in a recording longer than gateway.splitAboveMs, by detector (silero or energy).',
      labelNames: ['detector'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    engineEvents: new Counter({
      name: 'voxmux_instance_engine_events_total',
      help:
        "An engine's own counts by model, instance index and name, from the counters each heartbeat carries " +
        '(whisper: clips, windows, encoderCalls, encoderWindows, decodeSteps, tokens, fallbacks, audioSeconds; see docs/adapters.md).',
      labelNames: ['model', 'instance_index', 'name'] as const,
      registers: r,
    }),
    // issue 18: voice residency, per instance slot (instance_index: the slot's bounded index in its
    // model, kept across restarts), exported from the counters each heartbeat carries
    resourceHits: new Counter({
      name: 'voxmux_instance_resource_hits_total',
      help: 'Resource lookups (voices) that found the resource resident, by model and instance index.',
      labelNames: ['model', 'instance_index'] as const,
      registers: r,
    }),
    resourceMisses: new Counter({
      name: 'voxmux_instance_resource_misses_total',
      help: 'Resource lookups (voices) that found the resource not resident and loaded it, by model and instance index.',
      labelNames: ['model', 'instance_index'] as const,
      registers: r,
    }),
    resourceLoads: new Counter({
      name: 'voxmux_instance_resource_loads_total',
      help: 'Resource loads by model, instance index and source (disk, or a copy kept in host memory).',
      labelNames: ['model', 'instance_index', 'source'] as const,
      registers: r,
    }),
    resourceLoadDuration: new Counter({
      name: 'voxmux_instance_resource_load_seconds_total',
      help: 'Time spent loading resources, by model, instance index and source (disk or host); divided by the loads it gives the mean load time.',
      labelNames: ['model', 'instance_index', 'source'] as const,
      registers: r,
    }),
    resourceEvictions: new Counter({
      name: 'voxmux_instance_resource_evictions_total',
      help: 'Resources evicted to stay within the residency budget (or on request), by model and instance index.',
      labelNames: ['model', 'instance_index'] as const,
      registers: r,
    }),
    resourceResidentBytes: new Gauge({
      name: 'voxmux_instance_resource_resident_bytes',
      help: 'Bytes of resources (voice weights) resident on the device, by model and instance index, as last reported; 0 while the slot has no live instance.',
      labelNames: ['model', 'instance_index'] as const,
      registers: r,
    }),
    resourceBudgetBytes: new Gauge({
      name: 'voxmux_instance_resource_budget_bytes',
      help: 'The residency budget for resources on the device, by model and instance index (0: none set).',
      labelNames: ['model', 'instance_index'] as const,
      registers: r,
    }),
    // speech synthesis (POST /v1/audio/speech)
    speechFirstByte: new Histogram({
      name: 'voxmux_gateway_speech_first_byte_seconds',
      help: "Time from a speech call's arrival to its first audio bytes leaving (the response head with them), by model and response_format.",
      labelNames: ['model', 'format'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    speechAudio: new Counter({
      name: 'voxmux_gateway_speech_audio_seconds_total',
      help: 'Seconds of audio synthesized for speech calls (at 24 kHz, as sent), by model.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    speechCalls: new Counter({
      name: 'voxmux_gateway_speech_calls_total',
      help: 'Speech calls by response_format, stream_format and outcome (ok or the error code).',
      labelNames: ['format', 'stream_format', 'outcome'] as const,
      registers: r,
    }),
    requestLogLines: new Counter({
      name: 'voxmux_request_log_lines_total',
      help: 'Request log lines by outcome: written, or dropped (the write failed, or too many lines were queued).',
      labelNames: ['outcome'] as const,
      registers: r,
    }),
    modelState: new Gauge({
      name: 'voxmux_model_state',
      help: "1 for each model's lifecycle state (stopped, starting, ready, stopping), 0 for the others.",
      labelNames: ['model', 'state'] as const,
      registers: r,
    }),
    modelWakes: new Counter({
      name: 'voxmux_model_wakes_total',
      help: 'Wakes of a stopped model by outcome: ok, failed (no instance could start) or timeout (not ready within wakeTimeoutMs), refused (budget hard stop).',
      labelNames: ['model', 'outcome'] as const,
      registers: r,
    }),
    modelSleeps: new Counter({
      name: 'voxmux_model_sleeps_total',
      help: 'Stops of a model by reason: idle (idleStopAfterMs passed without requests) or requested (POST /v1/models/{id}/sleep).',
      labelNames: ['model', 'reason'] as const,
      registers: r,
    }),
    modelWakeDuration: new Histogram({
      name: 'voxmux_model_wake_seconds',
      help: 'Time from a wake to the first ready instance of the model.',
      labelNames: ['model'] as const,
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 300],
      registers: r,
    }),
    modelHeldRequests: new Counter({
      name: 'voxmux_model_held_requests_total',
      help: 'Requests, sequence items and streams that arrived for a stopped or starting model and were held for its wake.',
      labelNames: ['model'] as const,
      registers: r,
    }),
    budgetGpuHours: new Gauge({
      name: 'voxmux_budget_gpu_hours',
      help: 'GPU hours accrued this calendar month (UTC): hours during which at least one instance held each GPU.',
      registers: r,
    }),
    budgetSpend: new Gauge({
      name: 'voxmux_budget_spend_usd',
      help: "GPU spend accrued this calendar month (UTC): the month's GPU hours times budget.gpuHourPriceUsd.",
      registers: r,
    }),
    budgetUptimeHours: new Gauge({
      name: 'voxmux_budget_uptime_hours',
      help: 'Hours today (UTC) during which at least one instance held a GPU.',
      registers: r,
    }),
    budgetAlerts: new Counter({
      name: 'voxmux_budget_alerts_total',
      help: 'Budget thresholds crossed, by guard (monthly_spend, daily_uptime) and percent (80, 100).',
      labelNames: ['guard', 'percent'] as const,
      registers: r,
    }),
    // realtime sessions (WebSocket /v1/realtime)
    realtimeSessions: new Gauge({
      name: 'voxmux_realtime_sessions_active',
      help: 'Realtime sessions (voice calls and transcription sessions) open now.',
      registers: r,
    }),
    realtimeTurnStage: new Histogram({
      name: 'voxmux_realtime_turn_stage_seconds',
      help: "Per turn, time of each stage: transcript (end of speech to final transcript), llm_first_token (transcript to the LLM's first token), first_audio (first token to the first audio byte sent) and end_to_first_audio (end of speech to the first audio byte).",
      labelNames: ['stage'] as const,
      buckets: LATENCY_BUCKETS_S,
      registers: r,
    }),
    realtimeAudioStalls: new Counter({
      name: 'voxmux_realtime_audio_stalls_total',
      help: 'Times a response ran out of audio: its next audio left after the audio sent before it had finished playing.',
      registers: r,
    }),
    realtimeTurns: new Counter({
      name: 'voxmux_realtime_turns_total',
      help: 'Responses by who answered (llm, demo, or fallback) and outcome (completed, cancelled, failed).',
      labelNames: ['responder', 'outcome'] as const,
      registers: r,
    }),
    realtimeLlmTokens: new Counter({
      name: 'voxmux_realtime_llm_tokens_total',
      help: 'LLM tokens used by realtime turns, by direction (input or output).',
      labelNames: ['direction'] as const,
      registers: r,
    }),
    realtimeLlmCost: new Counter({
      name: 'voxmux_realtime_llm_cost_usd_total',
      help: 'LLM spend of realtime turns at realtime.llm token prices, in US dollars.',
      registers: r,
    }),
    realtimeLlmTurnsRemaining: new Gauge({
      name: 'voxmux_realtime_llm_turns_remaining',
      help: "Turns the rest of today's LLM budget pays for at the average cost per turn (-1: no limit or no priced turn yet).",
      registers: r,
    }),
    realtimeCallSeconds: new Counter({
      name: 'voxmux_realtime_call_seconds_total',
      help: 'Duration of finished realtime sessions; cost per call minute is voxmux_realtime_call_cost_usd_total over this, times 60.',
      registers: r,
    }),
    realtimeCallCost: new Counter({
      name: 'voxmux_realtime_call_cost_usd_total',
      help: 'Cost of finished realtime sessions: GPU-seconds of their instance busy time at realtime.gpuHourUsd, plus LLM tokens, in US dollars.',
      registers: r,
    }),
    realtimeGpuSeconds: new Counter({
      name: 'voxmux_realtime_gpu_seconds_total',
      help: 'Busy time of GPU instances on behalf of realtime sessions (transcription and speech requests, dispatch to end).',
      registers: r,
    }),
    eventLoopBusy: eventLoopBusyCounter(isMainThread ? r : []),
    gatewayThreadBusy: gatewayThreadBusyCounter(r, options.thread),
    // issue 21: autoscaling, exported at each scrape from the supervisor's and scheduler's stats
    instanceBusy: new Counter({
      name: 'voxmux_instance_busy_seconds_total',
      help: "Time an instance slot had work running (batches, sequence batches, streams), by model and instance index; its rate is the slot's busy ratio (0 to 1).",
      labelNames: ['model', 'instance_index'] as const,
      registers: r,
    }),
    gpuBusy: new Counter({
      name: 'voxmux_gpu_busy_seconds_total',
      help: 'Time at least one instance on a GPU had work running, by GPU index; its rate is the GPU busy ratio (0 to 1) as voxmux sees it (work outstanding, not kernel occupancy).',
      labelNames: ['gpu'] as const,
      registers: r,
    }),
    busyInstances: new Gauge({
      name: 'voxmux_ops_busy_instances',
      help: 'Mean busy instances of a model on this node over telemetry.scaleWindowMs (0 to its instance count).',
      labelNames: ['model'] as const,
      registers: r,
    }),
    capacity: new Gauge({
      name: 'voxmux_ops_capacity_requests_per_second',
      help: "Requests per second a model's instances on this node complete when all are busy, measured over telemetry.scaleWindowMs (0 until one completed).",
      labelNames: ['model'] as const,
      registers: r,
    }),
    desiredReplicas: new Gauge({
      name: 'voxmux_ops_desired_replicas',
      help: "Replicas of this node a model's load needs, with its instances busy telemetry.scaleTargetBusyPercent of the time and its queue run within telemetry.scaleBacklogDrainMs; summed over a pool's nodes, the pool's replica count.",
      labelNames: ['model'] as const,
      registers: r,
    }),
  };
  if (isMainThread) collectDefaultMetrics({ register: registry, prefix: 'voxmux_process_' });
  return handles;
}

/**
 * One exposition of several registries' JSON (the main thread's and each gateway thread's, from
 * `registry.getMetricsAsJSON()`): series with the same name and labels are summed, so a counter
 * counts every thread's calls once.
 */
export async function aggregateMetricsText(registries: readonly unknown[][]): Promise<string> {
  return AggregatorRegistry.aggregate(registries as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
}

export type Metrics = ReturnType<typeof createMetrics>;

/** A gateway thread's busy time, read at each scrape, labelled with the thread's name; the main thread's registry has the metric without series. */
function gatewayThreadBusyCounter(registers: Registry[], thread: string | undefined): Counter<'thread'> {
  let counted = performance.eventLoopUtilization();
  return new Counter({
    name: 'voxmux_gateway_thread_busy_seconds_total',
    help: "Time each gateway thread (gateway.threads) spent running callbacks rather than waiting, by thread; its rate is that thread's loop utilization.",
    labelNames: ['thread'] as const,
    registers,
    collect() {
      if (thread === undefined) return;
      const now = performance.eventLoopUtilization();
      this.inc({ thread }, performance.eventLoopUtilization(now, counted).active / 1000);
      counted = now;
    },
  });
}

/**
 * The main thread's busy time, read at each scrape: all JavaScript (HTTP, uploads, scheduling,
 * the host protocol) runs on that one thread, so its growth over a window divided by the window
 * is how close the server is to its own CPU limit (1 = saturated), whatever the core count.
 */
function eventLoopBusyCounter(registers: Registry[]): Counter {
  let counted = performance.eventLoopUtilization();
  return new Counter({
    name: 'voxmux_event_loop_busy_seconds_total',
    help: 'Time the main thread (the event loop) spent running callbacks rather than waiting; its rate is the loop utilization.',
    registers,
    collect() {
      const now = performance.eventLoopUtilization();
      this.inc(performance.eventLoopUtilization(now, counted).active / 1000);
      counted = now;
    },
  });
}
