import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, settle } from '../../test/support/fake-clock.js';
import { createMetricsScraper, parsePrometheusText, summarizeServerMetrics, toServerSnapshot } from './metrics-scraper.js';

const EXPOSITION = `# HELP voxmux_scheduler_requests_queued Requests accepted but not yet dispatched.
# TYPE voxmux_scheduler_requests_queued gauge
voxmux_scheduler_requests_queued{model="asr"} 3
voxmux_scheduler_requests_queued{model="tts"} 10
voxmux_scheduler_requests_running{model="asr"} 2 1700000000000
voxmux_scheduler_batch_size_bucket{model="asr",le="+Inf"} 4
voxmux_scheduler_batch_size_sum{model="asr"} 12
voxmux_scheduler_batch_size_count{model="asr"} 4
odd_metric{path="a\\"b\\\\c\\nd", other = "x"} +Inf
nan_metric NaN
this line is not a sample
broken{label="unterminated} 1
`;

describe('parsePrometheusText', () => {
  it('reads samples with labels, escapes, special values and timestamps, skipping comments and junk', () => {
    const samples = parsePrometheusText(EXPOSITION);
    assert.deepEqual(
      samples.map((s) => s.name),
      [
        'voxmux_scheduler_requests_queued',
        'voxmux_scheduler_requests_queued',
        'voxmux_scheduler_requests_running',
        'voxmux_scheduler_batch_size_bucket',
        'voxmux_scheduler_batch_size_sum',
        'voxmux_scheduler_batch_size_count',
        'odd_metric',
        'nan_metric',
      ],
    );
    assert.deepEqual(samples[2], { name: 'voxmux_scheduler_requests_running', labels: { model: 'asr' }, value: 2 });
    assert.deepEqual(samples[6]?.labels, { path: 'a"b\\c\nd', other: 'x' });
    assert.equal(samples[6]?.value, Number.POSITIVE_INFINITY);
    assert.ok(Number.isNaN(samples[7]?.value));
  });
});

describe('toServerSnapshot', () => {
  it('keeps the benched model when series carry a model label, and sums all series otherwise', () => {
    const samples = parsePrometheusText(EXPOSITION);
    assert.deepEqual(toServerSnapshot(samples, { atMs: 5, model: 'asr' }), {
      atMs: 5,
      queued: 3,
      running: 2,
      batchSizeSum: 12,
      batchSizeCount: 4,
    });
    assert.equal(toServerSnapshot(samples, { atMs: 5, model: 'unknown-model' }).queued, 13);
    assert.equal(toServerSnapshot(samples, { atMs: 5 }).queued, 13);
    assert.deepEqual(toServerSnapshot(parsePrometheusText('process_cpu_seconds_total 1\n'), { atMs: 1 }), { atMs: 1 });
  });
});

describe('summarizeServerMetrics', () => {
  it('averages gauges in the window and takes the mean batch size from histogram growth', () => {
    const summary = summarizeServerMetrics(
      [
        { atMs: 0, queued: 100, batchSizeSum: 0, batchSizeCount: 0 },
        { atMs: 10, queued: 2, running: 4, batchSizeSum: 10, batchSizeCount: 5 },
        { atMs: 20, queued: 4, running: 4, batchSizeSum: 40, batchSizeCount: 15 },
        { atMs: 30, queued: 9, running: 2, batchSizeSum: 70, batchSizeCount: 25 },
        { atMs: 40, queued: 100 },
      ],
      { fromMs: 10, toMs: 30 },
    );
    assert.deepEqual(summary, { scrapes: 3, queuedMean: 5, queuedMax: 9, runningMean: 3.33, batchSizeMean: 3 });
  });

  it("takes the server's event loop busy share and CPU from their counters' growth over the scrapes' span", () => {
    const summary = summarizeServerMetrics(
      [
        { atMs: 1_000, loopBusySeconds: 100, cpuSeconds: 50, batchSendSum: 1, batchSendCount: 10 },
        { atMs: 3_000, loopBusySeconds: 101.2, cpuSeconds: 52 },
        { atMs: 5_000, loopBusySeconds: 103.6, cpuSeconds: 56.2, batchSendSum: 1.5, batchSendCount: 14 },
      ],
      { fromMs: 0, toMs: 10_000 },
    );
    // 3.6 s busy and 6.2 s of CPU over the 4 s between the first and last scrape; 4 batches sent in 0.5 s.
    assert.deepEqual(summary, { scrapes: 3, loopBusyPercent: 90, cpuPercent: 155, batchSendMsMean: 125 });
    const samples = parsePrometheusText('voxmux_event_loop_busy_seconds_total 7.5\nvoxmux_process_process_cpu_seconds_total 12\n');
    assert.deepEqual(toServerSnapshot(samples, { atMs: 2 }), { atMs: 2, loopBusySeconds: 7.5, cpuSeconds: 12 });
  });

  it('falls back to inferences over executions, and gives nothing without data', () => {
    const summary = summarizeServerMetrics(
      [
        { atMs: 0, inferences: 10, executions: 10 },
        { atMs: 1, inferences: 50, executions: 20 },
      ],
      { fromMs: 0, toMs: 1 },
    );
    assert.deepEqual(summary, { scrapes: 2, batchSizeMean: 4 });
    assert.equal(summarizeServerMetrics([{ atMs: 0 }], { fromMs: 0, toMs: 1 }), undefined);
    assert.equal(summarizeServerMetrics([{ atMs: 0, loopBusySeconds: 3, cpuSeconds: 9 }], { fromMs: 0, toMs: 1 }), undefined);
    assert.equal(summarizeServerMetrics([{ atMs: 5, queued: 1 }], { fromMs: 0, toMs: 1 }), undefined);
  });
});

describe('createMetricsScraper', () => {
  function fakeFetch(answers: Array<() => Response | Promise<Response>>) {
    const urls: string[] = [];
    const fetch = (async (input: string | URL | Request) => {
      urls.push(String(input));
      const answer = answers.shift() ?? (() => new Response('', { status: 500 }));
      return answer();
    }) as typeof globalThis.fetch;
    return { fetch, urls };
  }

  it('scrapes at its interval until stopped and records snapshots', async () => {
    const clock = new FakeClock();
    const body = () => new Response('voxmux_scheduler_requests_queued{model="asr"} 7\n');
    const { fetch, urls } = fakeFetch([body, body, body, body, body]);
    const scraper = createMetricsScraper({ url: 'http://h/metrics', intervalMs: 100, timeoutMs: 50, model: 'asr' }, { fetch, clock });
    scraper.start();
    await settle();
    clock.advance(100);
    await settle();
    clock.advance(100);
    await settle();
    await scraper.stop();
    clock.advance(1000);
    await settle();
    assert.equal(urls.length, 3);
    assert.equal(scraper.state(), 'ok');
    assert.deepEqual(
      scraper.snapshots().map((s) => [s.atMs, s.queued]),
      [
        [0, 7],
        [100, 7],
        [200, 7],
      ],
    );
  });

  it('marks metrics unavailable after a 404 and stops scraping', async () => {
    const clock = new FakeClock();
    const { fetch, urls } = fakeFetch([() => new Response('not found', { status: 404 })]);
    const scraper = createMetricsScraper({ url: 'http://h/metrics', intervalMs: 100, timeoutMs: 50 }, { fetch, clock });
    scraper.start();
    await settle();
    clock.advance(1000);
    await settle();
    assert.equal(scraper.state(), 'unavailable');
    assert.equal(scraper.note(), 'GET http://h/metrics answered 404');
    assert.equal(await scraper.scrapeNow(), undefined);
    assert.equal(urls.length, 1);
    await scraper.stop();
  });

  it('marks metrics unavailable when the page has none of the known metrics or the request fails', async () => {
    const clock = new FakeClock();
    const { fetch } = fakeFetch([() => new Response('some_other_metric 1\n')]);
    const scraper = createMetricsScraper({ url: 'http://h/metrics', intervalMs: 100, timeoutMs: 50 }, { fetch, clock });
    assert.equal(await scraper.scrapeNow(), undefined);
    assert.match(scraper.note() ?? '', /none of the known metrics/);

    const failing = createMetricsScraper(
      { url: 'http://h/metrics', intervalMs: 100, timeoutMs: 50 },
      {
        fetch: (async () =>
          Promise.reject(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } }))) as typeof globalThis.fetch,
        clock,
      },
    );
    assert.equal(await failing.scrapeNow(), undefined);
    assert.equal(failing.note(), 'GET http://h/metrics failed: ECONNREFUSED');
  });

  it('keeps its data when a later scrape fails', async () => {
    const clock = new FakeClock();
    const { fetch } = fakeFetch([
      () => new Response('voxmux_scheduler_requests_queued 1\n'),
      () => Promise.reject(new TypeError('fetch failed')),
    ]);
    const scraper = createMetricsScraper({ url: 'http://h/metrics', intervalMs: 100, timeoutMs: 50 }, { fetch, clock });
    assert.equal((await scraper.scrapeNow())?.queued, 1);
    assert.equal(await scraper.scrapeNow(), undefined);
    assert.equal(scraper.state(), 'ok');
    assert.equal(scraper.snapshots().length, 1);
  });
});

describe('resource residency metrics', () => {
  const page = (disk: number | undefined, host: number, resident: number): string =>
    [
      ...(disk === undefined
        ? []
        : [
            `voxmux_instance_resource_loads_total{model="tts",instance_index="0",source="disk"} ${disk}`,
            `voxmux_instance_resource_load_seconds_total{model="tts",instance_index="0",source="disk"} ${disk * 1.2}`,
          ]),
      `voxmux_instance_resource_loads_total{model="tts",instance_index="0",source="host"} ${host}`,
      `voxmux_instance_resource_loads_total{model="tts",instance_index="1",source="host"} ${host}`,
      `voxmux_instance_resource_hits_total{model="tts",instance_index="0"} ${10 * host}`,
      `voxmux_instance_resource_misses_total{model="tts",instance_index="0"} ${host}`,
      `voxmux_instance_resource_evictions_total{model="tts",instance_index="0"} 1`,
      `voxmux_instance_resource_resident_bytes{model="tts",instance_index="0"} ${resident}`,
      `voxmux_instance_resource_resident_bytes{model="tts",instance_index="1"} ${resident}`,
      `voxmux_instance_resource_budget_bytes{model="tts",instance_index="0"} 1000`,
      `voxmux_instance_resource_budget_bytes{model="tts",instance_index="1"} 1000`,
      `voxmux_instance_resource_loads_total{model="other",instance_index="0",source="disk"} 99`,
    ].join('\n');

  it('reads loads by source, sums the instances of the benched model, and counts a counter that appears later from zero', () => {
    const first = toServerSnapshot(parsePrometheusText(page(undefined, 2, 300)), { atMs: 0, model: 'tts' });
    assert.equal(first.resourceLoadsFromDisk, undefined);
    assert.equal(first.resourceLoadsFromHost, 4);
    const last = toServerSnapshot(parsePrometheusText(page(3, 5, 200)), { atMs: 1000, model: 'tts' });
    assert.equal(last.resourceLoadsFromDisk, 3);
    assert.equal(last.resourceBudgetBytes, 2000);
    assert.deepEqual(summarizeServerMetrics([first, last], { fromMs: 0, toMs: 1000 }), {
      scrapes: 2,
      resourceLoadsFromDisk: 3,
      resourceLoadsFromHost: 6,
      resourceHits: 30,
      resourceMisses: 3,
      resourceEvictions: 0,
      resourceDiskLoadMsMean: 1200,
      resourceResidentBytesMax: 600,
      resourceBudgetBytes: 2000,
    });
  });

  it('leaves the resource figures out for a server without them', () => {
    const snapshot = toServerSnapshot(parsePrometheusText(EXPOSITION), { atMs: 0, model: 'asr' });
    assert.equal(snapshot.resourceLoadsFromDisk, undefined);
    const summary = summarizeServerMetrics([snapshot, { ...snapshot, atMs: 10 }], { fromMs: 0, toMs: 10 });
    assert.equal(summary?.resourceHits, undefined);
  });
});
