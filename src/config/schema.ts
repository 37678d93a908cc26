/**
 * The one configuration schema. Every field has a description, a default and a unit in its
 * name; docs/config.md is generated from this file (scripts/gen-docs.ts).
 */
import { Type, type Static } from '@sinclair/typebox';

/** The shortest supervisor.restartMaxBackoffMs: a crash loop restarts at this pace at the fastest. */
const MIN_RESTART_MAX_BACKOFF_MS = 1000;

const Ms = (description: string, def: number, min = 0) => Type.Integer({ description, default: def, minimum: min });

export const GatewaySchema = Type.Object(
  {
    host: Type.String({ description: 'Address to listen on.', default: '127.0.0.1' }),
    port: Type.Integer({ description: 'TCP port to listen on (0 picks a free one).', default: 8000, minimum: 0, maximum: 65535 }),
    maxBodyBytes: Type.Integer({ description: 'Largest accepted upload, in bytes.', default: 25 * 1024 * 1024, minimum: 1024 }),
    maxAudioDurationMs: Ms('Longest accepted audio, in milliseconds.', 600_000, 1),
    apiKeys: Type.Array(Type.String({ minLength: 8 }), {
      description: 'Bearer keys; when not empty every endpoint but health and metrics requires one. Secret.',
      default: [],
    }),
    ffmpegPath: Type.String({
      description: 'ffmpeg binary used to decode compressed audio and to encode speech (mp3, opus, aac, flac).',
      default: 'ffmpeg',
    }),
    ffmpegTimeoutMs: Ms('Longest an ffmpeg decode may run, in milliseconds.', 60_000, 1),
    tmpDir: Type.String({ description: 'Folder for temporary upload files; empty means the OS default.', default: '' }),
    requestTimeoutMs: Ms(
      'Deadline of one transcription or speech call from arrival to its answer (for speech: until its audio is made, and, past speechBufferBytes held for a slow reader, until the client has read it), in milliseconds.',
      120_000,
      1,
    ),
    speechBufferBytes: Type.Integer({
      description:
        'Encoded speech a call may hold ahead of a client that reads slower than it is made (one playing it in real time), in bytes: within it the synthesis runs at its own pace and frees its instance; beyond it the reader holds the stream back, up to requestTimeoutMs.',
      default: 16 * 1024 * 1024,
      minimum: 0,
    }),
    uploadPoolBytes: Type.Integer({
      description:
        'Memory kept for reuse by uploads once their results are in, in bytes (0: none). Each upload then needs no fresh buffer, which spares the garbage collector.',
      default: 512 * 1024 * 1024,
      minimum: 0,
    }),
    // issue 16: malformed input and memory
    uploadPoolIdleMs: Ms(
      'How long the upload pool keeps its memory while no upload arrives, in milliseconds; then it frees all of it.',
      10_000,
      1,
    ),
    bodyTimeoutMs: Ms(
      "Longest time from a call's arrival until its whole body is received, in milliseconds (then body_timeout, 408).",
      60_000,
      1,
    ),
    // per-call deadlines (issue 16)
    maxRequestTimeoutMs: Ms(
      'Longest deadline a call may ask for with the voxmux-deadline-ms header, in milliseconds; longer ones get 400.',
      600_000,
      1,
    ),
    // issue 16: long recordings in pieces
    splitAboveMs: Ms(
      'Audio longer than this is cut at pauses into pieces that run as separate requests and are stitched back, in milliseconds (0: never cut).',
      30_000,
      0,
    ),
    pieceTargetMs: Ms(
      'Length each piece of a cut recording aims at, in milliseconds; no piece exceeds the largest scheduler.lengthBucketsMs.',
      15_000,
      1000,
    ),
    // speaker diarization (issue 17)
    maxDiarizationChunkMs: Ms(
      'Longest audio chunk a diarization session accepts, in milliseconds (longer ones get 413 chunk_too_long).',
      60_000,
      1,
    ),
    voiceActivity: Type.Union([Type.Literal('silero'), Type.Literal('energy')], {
      description:
        'How pauses are found before cutting: silero (Silero VAD on onnxruntime, CPU) or energy (frame energy; also the fallback where onnxruntime cannot load).',
      default: 'silero',
    }),
    // issue 21: a gateway that uses every core
    threads: Type.Integer({
      description:
        'HTTP threads beside the main one, sharing its port: each reads uploads, decodes audio and formats answers, and hands the requests to the main thread, which alone schedules them onto the instances and keeps the diarization sessions (0: the main thread does everything). Realtime calls and /admin/llm are passed on to the main thread.',
      default: 0,
      minimum: 0,
      maximum: 64,
    }),
  },
  { additionalProperties: false, default: {} },
);

export const SchedulerSchema = Type.Object(
  {
    maxQueuedRequests: Type.Integer({
      description: 'Requests that may wait per model before new ones get 429 queue_full.',
      default: 512,
      minimum: 1,
    }),
    retryAfterMs: Ms('Retry-After sent with 429 and 503 answers, in milliseconds.', 1000, 0),
    lengthBucketsMs: Type.Array(Type.Integer({ minimum: 1 }), {
      description:
        'Audio length bucket bounds, in milliseconds: a batch holds requests of one bucket only. At least one; the largest also bounds the pieces of a cut recording.',
      default: [5_000, 15_000, 30_000, 45_000, 60_000],
      minItems: 1,
    }),
    maxRunningBatchesPerInstance: Type.Integer({
      description: 'Batches sent to one instance before it answers; 1 lets batches grow while instances are busy.',
      default: 1,
      minimum: 1,
      maximum: 16,
    }),
    // admission by predicted completion (issue 16)
    admissionMarginPercent: Type.Integer({
      description:
        "Share of a request's deadline kept in reserve when predicting its completion, in percent: a batch request predicted to finish later than its deadline less this share gets 429 deadline_unreachable at once.",
      default: 20,
      minimum: 0,
      maximum: 90,
    }),
    admissionPriorBatchMs: Ms(
      'Service time assumed per batch before a model has completed one, in milliseconds (deliberately pessimistic; measured batches replace it).',
      1000,
    ),
    admissionPriorMsPerAudioSecond: Ms(
      'Service time assumed per second of audio in a batch before a model has completed one, in milliseconds (deliberately pessimistic; measured batches replace it).',
      500,
    ),
    admissionByPrediction: Type.Boolean({
      description:
        'Refuse at once a batch request predicted to miss its deadline (429 deadline_unreachable); false leaves only maxQueuedRequests (the behaviour before issue 16, kept for comparison runs).',
      default: true,
    }),
  },
  { additionalProperties: false, default: {} },
);

export const MpsSchema = Type.Object(
  {
    enabled: Type.Boolean({ description: 'Start an NVIDIA MPS control daemon for GPU instances.', default: false }),
    controlPath: Type.String({ description: 'The nvidia-cuda-mps-control binary.', default: 'nvidia-cuda-mps-control' }),
    directory: Type.String({
      description: 'Private folder for the MPS pipe and log directories; empty means a fresh temporary folder.',
      default: '',
    }),
  },
  { additionalProperties: false, default: {} },
);

export const SupervisorSchema = Type.Object(
  {
    pythonPath: Type.String({ description: 'Python interpreter for model hosts.', default: '/usr/bin/python3' }),
    hostPath: Type.String({ description: 'Folder holding the voxmux_host package; empty means the bundled one.', default: '' }),
    handshakeTimeoutMs: Ms('Time for a new instance to say Hello, in milliseconds.', 20_000, 1),
    loadTimeoutMs: Ms('Time for an instance to load its model, in milliseconds.', 300_000, 1),
    warmupTimeoutMs: Ms('Time for an instance to warm up, in milliseconds.', 600_000, 1),
    heartbeatIntervalMs: Ms('Time between heartbeats to each instance, in milliseconds.', 1000, 10),
    heartbeatMissLimit: Type.Integer({
      description: 'Unanswered heartbeats in a row that mark a ready instance wedged (loading and warmup are bounded by their timeouts).',
      default: 5,
      minimum: 1,
    }),
    probeIntervalMs: Ms(
      'How often each instance probes its device (a tiny kernel on its CUDA stream); 0 turns probes off, in milliseconds.',
      5000,
      0,
    ),
    probeTimeoutMs: Ms('How long a device probe may take before the instance reports itself wedged, in milliseconds.', 2000, 1),
    batchTimeoutMs: Ms('Longest one batch may run before its instance is declared wedged, in milliseconds.', 120_000, 1),
    restartInitialBackoffMs: Ms('First delay before restarting a failed instance, in milliseconds.', 500, 0),
    restartMaxBackoffMs: Ms(
      'Largest delay between restarts of a failing instance, and the delay of every restart in a crash loop, in milliseconds (at least 1000, so a crash loop never spins).',
      30_000,
      MIN_RESTART_MAX_BACKOFF_MS,
    ),
    crashLoopWindowMs: Ms('Window in which repeated failures count as a crash loop, in milliseconds.', 60_000, 1),
    crashLoopMaxFailures: Type.Integer({ description: 'Failures within the window that report a crash loop.', default: 5, minimum: 1 }),
    closeTimeoutMs: Ms('Time an instance gets to finish its work on close before it is killed, in milliseconds.', 30_000, 1),
    loadLockPath: Type.String({ description: 'Lock file serializing model loading; empty means one in the OS temp folder.', default: '' }),
    gpus: Type.Array(Type.Integer({ minimum: 0 }), {
      description: 'GPU indices this node uses; empty means every GPU nvidia-smi lists (none when it is absent).',
      default: [],
    }),
    mps: MpsSchema,
  },
  { additionalProperties: false, default: {} },
);

export type ModelTask = 'transcription' | 'speech' | 'diarization';

/** The tasks an adapter serves; the first is its default (`task: auto`). An adapter not listed serves transcription. */
export const ADAPTER_TASKS: Readonly<Record<string, readonly ModelTask[]>> = {
  pocketsphinx: ['transcription'],
  parakeet: ['transcription'],
  whisper: ['transcription'],
  'debian-voices': ['speech'],
  vits: ['speech'],
  sortformer: ['diarization'],
  'classical-diarizer': ['diarization'],
  test: ['transcription', 'speech', 'diarization'],
};

export const ModelSchema = Type.Object(
  {
    adapter: Type.String({
      description: `Model-host adapter: ${Object.keys(ADAPTER_TASKS)
        .filter((name) => name !== 'test')
        .join(', ')}, or test (a test double).`,
      minLength: 1,
    }),
    aliases: Type.Array(Type.String({ minLength: 1 }), { description: 'Other names clients may use.', default: [] }),
    instances: Type.Integer({
      description: 'Instances (processes) of this model, placed round-robin over its GPUs.',
      default: 2,
      minimum: 0,
      maximum: 64,
    }),
    instancesPerGpu: Type.Integer({
      description: 'Instances on each of the model GPUs; 0 means `instances` in all. Ignored on a node without GPUs.',
      default: 0,
      minimum: 0,
      maximum: 64,
    }),
    gpus: Type.Array(Type.Integer({ minimum: 0 }), {
      description:
        'GPUs this model runs on; empty means every GPU of the node. Each instance gets CUDA_VISIBLE_DEVICES. Ignored on a node without GPUs, where `instances` run unpinned (one config may serve GPU and CPU nodes).',
      default: [],
    }),
    maxBatchSize: Type.Integer({
      description: 'Most requests in one batch; 0 means the largest preferred size.',
      default: 0,
      minimum: 0,
      maximum: 256,
    }),
    preferredBatchSizes: Type.Array(Type.Integer({ minimum: 1, maximum: 256 }), {
      description: 'Batch sizes dispatched at once when reached; empty means [maxBatchSize].',
      default: [],
    }),
    maxQueueDelayMs: Ms('Longest a request waits for a fuller batch, in milliseconds.', 5, 0),
    maxRunningBatchesPerInstance: Type.Integer({
      description:
        'Batches sent to one instance of this model before it answers; 0 means scheduler.maxRunningBatchesPerInstance. An engine that takes new requests while it decodes others (whisper) may want more than one that runs a batch at a time.',
      default: 0,
      minimum: 0,
      maximum: 16,
    }),
    dispatchWhenIdle: Type.Boolean({
      description:
        'Dispatch at once, without waiting maxQueueDelayMs, while an instance of this model has nothing running: batches then form only while every instance is busy (lowest latency at low load).',
      default: false,
    }),
    sessionIdleTimeoutMs: Ms(
      'Longest a session (sequence work, such as a diarization session) may go without items before it is dropped and its instance told to forget it, in milliseconds.',
      600_000,
      1,
    ),
    maxStreamsPerInstance: Type.Integer({
      description: 'Most streams one instance of this model runs at once; more wait in the queue.',
      default: 4,
      minimum: 1,
      maximum: 1024,
    }),
    streamCreditChunks: Type.Integer({
      description: "Chunks an instance may send ahead of a stream's reader; each chunk the reader takes grants one more.",
      default: 8,
      minimum: 1,
      maximum: 4096,
    }),
    options: Type.Record(Type.String(), Type.Unknown(), { description: 'Adapter options passed to the model host.', default: {} }),
    // speech synthesis (issue 18)
    task: Type.Union([Type.Literal('auto'), Type.Literal('transcription'), Type.Literal('speech'), Type.Literal('diarization')], {
      description:
        "What the model serves: transcription (POST /v1/audio/transcriptions), speech (POST /v1/audio/speech) or diarization (POST /v1/audio/diarization and its sessions); auto takes the adapter's (ADAPTER_TASKS: speech for debian-voices and vits, diarization for sortformer and classical-diarizer, transcription otherwise). Only the test adapter serves any.",
      default: 'auto',
    }),
    // speaker diarization (issue 17)
    diarizationModel: Type.String({
      description:
        'Transcription models: the diarization model that finds the speakers of response_format=diarized_json; empty means the first diarization model.',
      default: '',
    }),
    voiceAliases: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 }), {
      description:
        "Speech models: voice names clients may use (such as OpenAI's alloy) mapped to engine voice ids; empty means the adapter's defaults (debian-voices: the 13 OpenAI names to flite, Festival and espeak-ng voices; vits: the 13 OpenAI names in order onto the voices its instances declare, in catalogue order, starting again from the first voice when there are fewer than 13).",
      default: {},
    }),
    command: Type.Array(Type.String({ minLength: 1 }), {
      description: 'Model-host command line (program, then arguments); empty means the bundled Python host with this adapter.',
      default: [],
    }),
    exclusiveWarmup: Type.Boolean({
      description:
        'While an instance of this model warms up, dispatch nothing to any instance and wait for running batches: CUDA graph capture must not overlap work of sibling MPS instances.',
      default: false,
    }),
    mpsActiveThreadPercentages: Type.Array(Type.Integer({ minimum: 1, maximum: 100 }), {
      description: 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE by instance index on its GPU (cycled); empty leaves it unset.',
      default: [],
    }),
    cpuThreads: Type.Integer({
      minimum: 0,
      maximum: 1024,
      description:
        "Intra-op CPU threads of each instance (OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS). 0: on a node with GPUs the instances share the node's cores evenly (at least 1 each; `sortformer` instances 1 each: their host work is many small operations that more threads slow) unless the environment sets OMP_NUM_THREADS; on a node without GPUs the libraries' default (one per core).",
      default: 0,
    }),
    // model lifecycle (issue 20)
    idleStopAfterMs: Ms(
      "Stop the model's instances (freeing their memory) after this long without requests, in milliseconds; the next request wakes it. 0 never stops it.",
      0,
      0,
    ),
    wakeTimeoutMs: Ms(
      'Longest a request for a stopped model is held while the model wakes, in milliseconds; a wake not ready by then answers its held requests 503 model_wake_timeout.',
      90_000,
      1,
    ),
  },
  { additionalProperties: false },
);

export const TelemetrySchema = Type.Object(
  {
    logLevel: Type.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
      { description: 'Lowest log level written.', default: 'info' },
    ),
    logFormat: Type.Union([Type.Literal('auto'), Type.Literal('json'), Type.Literal('pretty')], {
      description:
        'Log line format: json (one object a line), pretty (for people), or auto: pretty when stdout is a terminal, JSON otherwise.',
      default: 'auto',
    }),
    // autoscaling hint (issue 21): voxmux_ops_desired_replicas
    scaleTargetBusyPercent: Type.Integer({
      description:
        'Share of the time each instance should be busy when a pool has the replicas voxmux_ops_desired_replicas asks for, in percent; the rest is headroom for bursts.',
      default: 70,
      minimum: 1,
      maximum: 100,
    }),
    scaleBacklogDrainMs: Ms(
      'Time within which voxmux_ops_desired_replicas plans to run the queued requests, on top of the running load, in milliseconds.',
      10_000,
      1,
    ),
    scaleWindowMs: Ms(
      'Window over which the busy ratios and the capacity behind voxmux_ops_desired_replicas are measured, in milliseconds.',
      30_000,
      1000,
    ),
  },
  { additionalProperties: false, default: {} },
);

export const RequestLogSchema = Type.Object(
  {
    path: Type.String({
      description:
        'File that gets one JSON line per finished transcription or speech call (docs/operations.md#request-log); empty turns the log off.',
      default: '',
    }),
    maxBytes: Type.Integer({
      description: 'Size a request log file may reach, in bytes; the line that would pass it starts a fresh file after rotation.',
      default: 64 * 1024 * 1024,
      minimum: 1024,
    }),
    keepFiles: Type.Integer({
      description: 'Rotated request log files kept as <path>.1 (newest) to <path>.<keepFiles>; 0 keeps none.',
      default: 5,
      minimum: 0,
      maximum: 1000,
    }),
  },
  { additionalProperties: false, default: {} },
);

export const BudgetSchema = Type.Object(
  {
    gpuHourPriceUsd: Type.Number({
      description:
        'Price of one GPU hour, in US dollars; spend is the GPU hours accrued (each GPU counts while at least one instance runs on it) times this.',
      default: 0,
      minimum: 0,
    }),
    monthlyBudgetUsd: Type.Number({
      description: 'GPU spend allowed per calendar month (UTC), in US dollars; 0 turns the monthly guard off.',
      default: 0,
      minimum: 0,
    }),
    dailyUptimeLimitHours: Type.Number({
      description: 'Hours per day (UTC) during which at least one instance may hold a GPU; 0 turns the daily guard off.',
      default: 0,
      minimum: 0,
      maximum: 24,
    }),
    checkIntervalMs: Ms('Time between budget checks, in milliseconds; a missed check is made up by the next one.', 300_000, 1000),
    webhookUrl: Type.String({
      description:
        'URL that gets a JSON POST each time a guard crosses 80 % or 100 %; empty posts nothing. Secret (a Slack or Teams webhook URL is its own credential).',
      default: '',
    }),
    hardStop: Type.Boolean({
      description: 'At 100 % of a guard, refuse every wake of a stopped model (503 gpu_budget_exhausted); running models keep serving.',
      default: false,
    }),
    statePath: Type.String({
      description: 'File keeping the accrued GPU hours and uptime across restarts; empty keeps them in memory only.',
      default: '',
    }),
  },
  { additionalProperties: false, default: {} },
);

// issue 19: real-time voice calls (WebSocket /v1/realtime)
export const LlmSchema = Type.Object(
  {
    baseUrl: Type.String({
      description:
        'Base URL of an OpenAI-compatible chat-completions endpoint (such as https://api.openai.com/v1); empty: calls are answered by the built-in demo responder.',
      default: '',
    }),
    apiKey: Type.String({ description: 'Bearer key sent to the LLM endpoint; empty sends none. Secret.', default: '' }),
    model: Type.String({ description: 'Model name sent to the LLM endpoint.', default: '' }),
    allowedBaseUrls: Type.Array(Type.String({ minLength: 1 }), {
      description: 'The only LLM base URLs allowed (the region pin); a baseUrl not listed fails the start. Empty: any baseUrl is allowed.',
      default: [],
    }),
    isBlocked: Type.Boolean({
      description: 'Blocks every LLM call: turns get fallbackText instead (also switched at runtime by PUT /admin/llm).',
      default: false,
    }),
    fallbackText: Type.String({
      description: 'What a turn answers (spoken, or as text) when the LLM is blocked, over budget or failing.',
      default: 'Sorry, I cannot answer right now. Please try again later.',
      minLength: 1,
    }),
    inputUsdPerMillionTokens: Type.Number({ description: 'Price of LLM input tokens, in US dollars per million.', default: 0, minimum: 0 }),
    outputUsdPerMillionTokens: Type.Number({
      description: 'Price of LLM output tokens, in US dollars per million.',
      default: 0,
      minimum: 0,
    }),
    dailyBudgetUsd: Type.Number({
      description: 'LLM spend allowed per UTC day, in US dollars; over it turns get fallbackText (0: no limit).',
      default: 0,
      minimum: 0,
    }),
    connectTimeoutMs: Ms('Longest wait for the LLM endpoint to start answering, in milliseconds.', 15_000, 1),
    maxOutputTokens: Type.Integer({ description: 'Most tokens one reply may have.', default: 400, minimum: 1, maximum: 4096 }),
  },
  { additionalProperties: false, default: {} },
);

export const RealtimeSchema = Type.Object(
  {
    transcriptionModel: Type.String({
      description: 'Model that transcribes what callers say; empty: the first transcription model.',
      default: '',
    }),
    speechModel: Type.String({ description: 'Model that speaks the replies; empty: the first speech model.', default: '' }),
    instructions: Type.String({
      description: "Default system prompt of a session (the client's session.update replaces it).",
      default: 'You are a helpful voice assistant. Answer briefly.',
    }),
    maxAppendBytes: Type.Integer({
      description: 'Largest decoded audio in one input_audio_buffer.append, in bytes (OpenAI allows 15 MiB).',
      default: 15 * 1024 * 1024,
      minimum: 1024,
    }),
    maxBufferMs: Ms('Longest uncommitted input audio a session holds, in milliseconds.', 120_000, 1000),
    maxSessions: Type.Integer({
      description: 'Realtime sessions held at once; more get 429 too_many_sessions before the WebSocket opens.',
      default: 256,
      minimum: 1,
    }),
    partialIntervalMs: Ms(
      'How often the growing utterance is transcribed for partial transcripts (transcription delta events), in milliseconds of audio; 0: final transcripts only.',
      1000,
      0,
    ),
    turnTimeoutMs: Ms('Deadline of one transcription or one sentence of speech in a session, in milliseconds.', 30_000, 1),
    gpuHourUsd: Type.Number({ description: 'Price of one GPU hour, in US dollars, for the cost per call.', default: 0, minimum: 0 }),
    llm: LlmSchema,
  },
  { additionalProperties: false, default: {} },
);

/**
 * Diarization adapters that use the gateway's voice activity: each item then carries its chunk's
 * Silero VAD speech regions as the `speech` option (docs/adapters.md, the diarization contract).
 */
export const SPEECH_REGION_ADAPTERS: ReadonlySet<string> = new Set(['classical-diarizer']);

/**
 * The longest item of diarization adapters that fail a longer one (invalid_audio): their
 * `maxItemSeconds` option, else its default (the adapters' OPTIONS in host/). A whole recording
 * longer than that is sent as a session of items no longer than it.
 */
export const DIARIZATION_MAX_ITEM_DEFAULT_S: Readonly<Record<string, number>> = { sortformer: 60, 'classical-diarizer': 3600 };

/**
 * The most speakers a diarization engine finds (it caps maxSpeakers there, and fails an item whose
 * minSpeakers is above it): `classical-diarizer`'s `maxSpeakers` option (8 by default), Sortformer's
 * four output slots.
 */
export function maxDiarizationSpeakersOf(model: { adapter: string; options: Readonly<Record<string, unknown>> }): number | undefined {
  if (model.adapter === 'sortformer') return 4;
  if (model.adapter !== 'classical-diarizer') return undefined;
  const option = model.options.maxSpeakers;
  return typeof option === 'number' && Number.isInteger(option) && option >= 1 ? option : 8;
}

/** The longest item, in milliseconds, a diarization model's engine takes; undefined: any length. */
export function maxDiarizationItemMsOf(model: { adapter: string; options: Readonly<Record<string, unknown>> }): number | undefined {
  const defaultS = DIARIZATION_MAX_ITEM_DEFAULT_S[model.adapter];
  if (defaultS === undefined) return undefined;
  const optionS = model.options.maxItemSeconds;
  return (typeof optionS === 'number' && Number.isFinite(optionS) && optionS > 0 ? optionS : defaultS) * 1000;
}

/** The task a model serves: its `task`, or its adapter's default for `auto`. */
export function taskOf(model: { adapter: string; task: ModelTask | 'auto' }): ModelTask {
  return model.task !== 'auto' ? model.task : (ADAPTER_TASKS[model.adapter]?.[0] ?? 'transcription');
}

/** Adapters that hold each voice as a resource (its weights): a stream names its voice so routing prefers instances holding it. */
export const VOICE_RESOURCE_ADAPTERS: ReadonlySet<string> = new Set(['vits']);

/** The OpenAI voice names, in the order OpenAI lists them. */
export const OPENAI_VOICES = [
  'alloy',
  'ash',
  'ballad',
  'coral',
  'echo',
  'fable',
  'nova',
  'onyx',
  'sage',
  'shimmer',
  'verse',
  'marin',
  'cedar',
] as const;

/** The debian-voices adapter's engine voices for the OpenAI names (flite, Festival, espeak-ng). */
const DEBIAN_VOICE_ALIASES: Readonly<Record<string, string>> = {
  alloy: 'flite-slt',
  ash: 'flite-rms',
  ballad: 'flite-awb',
  coral: 'festival-slt-hts',
  echo: 'flite-kal16',
  fable: 'festival-ked',
  nova: 'espeak-en-us+f3',
  onyx: 'festival-kal',
  sage: 'espeak-en-gb+f2',
  shimmer: 'espeak-en-us+f5',
  verse: 'espeak-en-gb-scotland+m3',
  marin: 'espeak-en-029+f4',
  cedar: 'flite-kal',
};

/** Each OpenAI voice name mapped to a distinct engine voice, by adapter (`voiceAliases` left empty). */
export const ADAPTER_VOICE_ALIASES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'debian-voices': DEBIAN_VOICE_ALIASES,
};

/**
 * Voice names that an adapter's defaults (`voiceAliases` left empty) map onto the voices its
 * instances declare, in catalogue order, cycling; the gateway applies them. A vits model serves
 * whatever voicesDir and randomVoices hold, known only once an instance has loaded: a fixed table
 * would name voices it may not have.
 */
const ADAPTER_CATALOG_VOICE_ALIASES: Readonly<Record<string, readonly string[]>> = {
  vits: OPENAI_VOICES,
};

/** The names a speech model maps onto its catalogue's voices (its adapter's, when its voiceAliases are empty); none otherwise. */
export function catalogVoiceAliasesOf(model: {
  adapter: string;
  task: ModelTask | 'auto';
  voiceAliases: Readonly<Record<string, string>>;
}): readonly string[] {
  if (taskOf(model) !== 'speech' || Object.keys(model.voiceAliases).length > 0) return [];
  return Object.hasOwn(ADAPTER_CATALOG_VOICE_ALIASES, model.adapter) ? ADAPTER_CATALOG_VOICE_ALIASES[model.adapter]! : [];
}

export const DEFAULT_MODELS = {
  'pocketsphinx-en-us': {
    adapter: 'pocketsphinx',
    aliases: ['whisper-1', 'gpt-4o-transcribe-diarize'],
    instances: 2,
    instancesPerGpu: 0,
    gpus: [],
    maxBatchSize: 4,
    preferredBatchSizes: [],
    maxQueueDelayMs: 5,
    dispatchWhenIdle: false,
    sessionIdleTimeoutMs: 600_000,
    maxStreamsPerInstance: 4,
    streamCreditChunks: 8,
    options: {},
    command: [],
    exclusiveWarmup: false,
    mpsActiveThreadPercentages: [],
    idleStopAfterMs: 0,
    wakeTimeoutMs: 90_000,
    task: 'transcription' as ModelTask,
    diarizationModel: '',
    voiceAliases: {},
  },
  'voxmux-speech-cpu': {
    adapter: 'debian-voices',
    aliases: ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts', 'gpt-4o-mini-tts-2025-12-15'],
    instances: 2,
    instancesPerGpu: 0,
    gpus: [],
    maxBatchSize: 1,
    preferredBatchSizes: [],
    maxQueueDelayMs: 5,
    dispatchWhenIdle: false,
    sessionIdleTimeoutMs: 600_000,
    maxStreamsPerInstance: 4,
    streamCreditChunks: 8,
    options: {},
    command: [],
    exclusiveWarmup: false,
    mpsActiveThreadPercentages: [],
    idleStopAfterMs: 0,
    wakeTimeoutMs: 90_000,
    task: 'speech' as ModelTask,
    diarizationModel: '',
    voiceAliases: { ...DEBIAN_VOICE_ALIASES },
  },
  'voxmux-diarize-cpu': {
    adapter: 'classical-diarizer',
    aliases: [],
    instances: 1,
    instancesPerGpu: 0,
    gpus: [],
    maxBatchSize: 4,
    preferredBatchSizes: [],
    maxQueueDelayMs: 5,
    dispatchWhenIdle: true,
    sessionIdleTimeoutMs: 600_000,
    maxStreamsPerInstance: 4,
    streamCreditChunks: 8,
    options: {},
    command: [],
    exclusiveWarmup: false,
    mpsActiveThreadPercentages: [],
    task: 'diarization' as ModelTask,
    diarizationModel: '',
    voiceAliases: {},
  },
};

export const ConfigSchema = Type.Object(
  {
    gateway: GatewaySchema,
    scheduler: SchedulerSchema,
    supervisor: SupervisorSchema,
    telemetry: TelemetrySchema,
    requestLog: RequestLogSchema,
    budget: BudgetSchema,
    realtime: RealtimeSchema,
    models: Type.Record(Type.String({ minLength: 1 }), ModelSchema, {
      description: 'Served models by name.',
      default: DEFAULT_MODELS,
    }),
    defaultModel: Type.String({ description: 'Model used for the whisper-1 style default; empty means the first model.', default: '' }),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;
export type GatewayConfig = Static<typeof GatewaySchema>;
export type SchedulerConfig = Static<typeof SchedulerSchema>;
export type SupervisorConfig = Static<typeof SupervisorSchema>;
export type ModelConfig = Static<typeof ModelSchema>;
export type TelemetryConfig = Static<typeof TelemetrySchema>;
export type RequestLogConfig = Static<typeof RequestLogSchema>;
export type BudgetConfig = Static<typeof BudgetSchema>;
export type RealtimeConfig = Static<typeof RealtimeSchema>;

/** Paths whose values are secrets: redacted by --print-config. */
export const SECRET_PATHS = ['gateway.apiKeys', 'realtime.llm.apiKey', 'budget.webhookUrl'] as const;
