import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { Supervisor } from '../../src/supervisor/index.js';
import { readProcessEnvironment } from '../../src/config/env.js';
import { buildTestSupervisor, FIXTURE_INSTANCES, testModel } from '../support/supervisor-fixture.js';
import { silentLogger } from '../support/test-logger.js';
import { waitFor } from '../support/wait-for.js';

const open: Supervisor[] = [];
after(() => open.forEach((s) => s.destroy()));

function track<T extends { supervisor: Supervisor }>(built: T): T {
  open.push(built.supervisor);
  return built;
}

function request(samples: number, prompt: string | null = null, seed = 1) {
  const audio = new Int16Array(samples);
  for (let i = 0; i < samples; i++) audio[i] = Math.round(Math.sin((i + seed) * 0.01) * 16384);
  return { requestId: `r${seed}-${samples}`, audio, language: null, prompt, wordTimestamps: true };
}

function expectedEcho(audio: Int16Array): string {
  const crc = crc32(Buffer.from(audio.buffer, audio.byteOffset, audio.byteLength));
  return `echo samples=${audio.length} crc=${crc.toString(16).padStart(8, '0')}`;
}

describe('Supervisor with real Python instances', () => {
  it('walks an instance to ready and runs a batch whose results match their inputs', async () => {
    const { supervisor, metrics } = track(buildTestSupervisor({ m: testModel() }));
    await supervisor.start();
    assert.equal(supervisor.availability('m'), 'ready');
    const [view] = supervisor.readyInstances('m');
    const reqs = [request(1600, null, 1), request(3200, null, 2)];
    const outcomes = await supervisor.runBatch(view!.instanceId, { batchId: 'b1', requests: reqs });
    assert.equal(outcomes.length, 2);
    outcomes.forEach((o, i) => {
      assert.ok(o.ok);
      if (o.ok) assert.equal(o.result.text, expectedEcho(reqs[i]!.audio));
    });
    const snapshot = supervisor.stats().instances[0]!;
    assert.equal(snapshot.state, 'ready');
    assert.ok(snapshot.pid !== null && snapshot.pid > 0);
    // Its boot, timed here and by the host, crossed the protocol (#20).
    assert.ok(snapshot.boot !== null && snapshot.boot.processStartMs > 0 && snapshot.boot.totalMs >= snapshot.boot.loadMs);
    assert.deepEqual(
      snapshot.boot.stages.map((s) => s.stage),
      ['import'],
    );
    assert.equal((await metrics.executions.get()).values[0]?.value, 1);
    assert.equal((await metrics.inferences.get()).values[0]?.value, 2);
    // One batch written to the instance's socket, and timed.
    const sent = (await metrics.batchSendDuration.get()).values;
    assert.equal(sent.find((v) => v.metricName === 'voxmux_instance_batch_send_seconds_count')?.value, 1);
    assert.ok((sent.find((v) => v.metricName === 'voxmux_instance_batch_send_seconds_sum')?.value ?? -1) >= 0);
    await supervisor.close();
    assert.equal(supervisor.stats().instances[0]!.state, 'closed');
  });

  it('keeps per-request failures inside a batch', async () => {
    const { supervisor } = track(buildTestSupervisor({ m: testModel() }));
    await supervisor.start();
    const id = supervisor.readyInstances('m')[0]!.instanceId;
    const outcomes = await supervisor.runBatch(id, {
      batchId: 'b',
      requests: [request(160, 'voxmux-test:fail', 1), request(160, null, 2), request(160, 'voxmux-test:bad-audio', 3)],
    });
    assert.deepEqual(
      outcomes.map((o) => (o.ok ? 'ok' : o.error.code)),
      ['model_failed', 'ok', 'invalid_audio'],
    );
    await supervisor.close();
  });

  it('fails the running batch with instance_crashed when the instance dies, then restarts it', async () => {
    const { supervisor, metrics } = track(buildTestSupervisor({ m: testModel() }));
    await supervisor.start();
    const first = supervisor.readyInstances('m')[0]!.instanceId;
    await assert.rejects(supervisor.runBatch(first, { batchId: 'b', requests: [request(160, 'voxmux-test:crash')] }), {
      code: 'instance_crashed',
    });
    await waitFor(() => supervisor.readyInstances('m').length === 1, 'the replacement instance');
    const second = supervisor.readyInstances('m')[0]!.instanceId;
    assert.notEqual(first, second);
    const snapshot = supervisor.stats().instances[0]!;
    assert.equal(snapshot.restarts, 1);
    assert.equal(snapshot.lastEnd?.exitCode, 70);
    assert.equal((await metrics.instanceRestarts.get()).values[0]?.value, 1);
    await supervisor.close();
  });

  it('declares an instance wedged when a batch outlives batchTimeoutMs, and replaces it', async () => {
    const { supervisor } = track(buildTestSupervisor({ m: testModel() }, { batchTimeoutMs: 400 }));
    await supervisor.start();
    const id = supervisor.readyInstances('m')[0]!.instanceId;
    await assert.rejects(supervisor.runBatch(id, { batchId: 'b', requests: [request(160, 'voxmux-test:hang')] }), {
      code: 'instance_wedged',
    });
    assert.equal(supervisor.stats().instances[0]!.lastEnd?.reason, 'wedged');
    await waitFor(() => supervisor.readyInstances('m').length === 1, 'the replacement instance');
    await supervisor.close();
  });

  it('declares an instance wedged when a batch hangs in its finish on the finisher thread (the main thread idle)', async () => {
    // The host reports busy only while the main thread runs; the supervisor's own age of each batch
    // is what catches a finish that never returns (a GPU hang shows up in the finish's sync).
    const { supervisor } = track(buildTestSupervisor({ m: testModel({ options: { finishDelayMs: 60_000 } }) }, { batchTimeoutMs: 400 }));
    await supervisor.start();
    const id = supervisor.readyInstances('m')[0]!.instanceId;
    await assert.rejects(supervisor.runBatch(id, { batchId: 'b', requests: [request(160)] }), { code: 'instance_wedged' });
    assert.equal(supervisor.stats().instances[0]!.lastEnd?.reason, 'wedged');
    await waitFor(() => supervisor.readyInstances('m').length === 1, 'the replacement instance');
    await supervisor.close();
  });

  it('declares an instance wedged when its own probe fails', async () => {
    const { supervisor } = track(buildTestSupervisor({ m: testModel({ options: { wedgeProbe: true } }) }));
    void supervisor.start();
    await waitFor(() => supervisor.stats().instances[0]!.lastEnd?.reason === 'wedged', 'the wedge');
    supervisor.destroy();
  });

  it('declares an instance wedged when it stops answering heartbeats (SIGSTOP)', async () => {
    const { supervisor } = track(buildTestSupervisor({ m: testModel() }, { heartbeatMissLimit: 3 }));
    await supervisor.start();
    const pid = supervisor.stats().instances[0]!.pid!;
    process.kill(pid, 'SIGSTOP');
    await waitFor(() => supervisor.stats().instances[0]!.lastEnd?.reason === 'wedged', 'the wedge');
    await waitFor(() => supervisor.readyInstances('m').length === 1, 'the replacement instance');
    await supervisor.close();
  });

  it('reports a crash loop and backs off instead of spinning', async () => {
    const { supervisor } = track(buildTestSupervisor({ m: testModel({ options: { crashOnLoad: true } }) }));
    void supervisor.start();
    await waitFor(() => supervisor.stats().instances[0]!.isCrashLoop, 'the crash loop', 20_000);
    assert.equal(supervisor.availability('m'), 'unavailable');
    const restarts = supervisor.stats().instances[0]!.restarts;
    // The loop is flagged at the third failure (crashLoopMaxFailures), after two restarts; a restart
    // counts once it has spawned its instance.
    assert.ok(restarts >= 2 && restarts <= 4, `restarts ${restarts}`);
    supervisor.destroy();
  });

  for (const [script, code] of [
    ['wrong_version.py', 'protocol_mismatch'],
    ['bad_frame.py', 'bad_frame'],
    ['crash_on_start.py', 'instance_crashed'],
  ] as const) {
    it(`never routes to a host that fails its start (${script})`, async () => {
      const { supervisor } = track(
        buildTestSupervisor(
          { m: testModel({ command: ['/usr/bin/python3', join(FIXTURE_INSTANCES, script)] }) },
          { handshakeTimeoutMs: 2000 },
        ),
      );
      await supervisor.start();
      assert.equal(supervisor.readyInstances('m').length, 0);
      assert.equal(supervisor.stats().instances[0]!.lastEnd?.code, code);
      supervisor.destroy();
    });
  }

  it('holds dispatch and waits for running batches while an exclusiveWarmup instance warms up', async () => {
    const { supervisor } = track(
      buildTestSupervisor({ m: testModel({ instances: 2, exclusiveWarmup: true, options: { batchDelayMs: 600 } }) }),
    );
    await supervisor.start();
    const [a, b] = supervisor.readyInstances('m');
    const pidB = supervisor.stats().instances.find((i) => i.instanceId === b!.instanceId)!.pid!;
    let batchDoneAt = 0;
    const running = supervisor.runBatch(a!.instanceId, { batchId: 'slow', requests: [request(160)] }).then((o) => {
      batchDoneAt = Date.now();
      return o;
    });
    process.kill(pidB, 'SIGKILL');
    // The replacement loads, then takes the gate: nothing is offered for dispatch until the slow batch ends.
    await waitFor(() => supervisor.stats().instances.some((i) => i.state === 'warming'), 'the replacement warming');
    assert.deepEqual(supervisor.readyInstances('m'), []);
    assert.equal((await running)[0]!.ok, true);
    await waitFor(() => supervisor.readyInstances('m').length === 2, 'both instances ready');
    assert.ok(batchDoneAt > 0);
    await supervisor.close();
  });

  it('pins each instance to its GPU with CUDA_VISIBLE_DEVICES and its MPS share (fake GPU list)', async () => {
    const { supervisor } = track(
      buildTestSupervisor({ m: testModel({ instancesPerGpu: 2, mpsActiveThreadPercentages: [50] }) }, { nodeGpus: [0, 1, 2] }),
    );
    await supervisor.start();
    const instances = supervisor.stats().instances;
    assert.deepEqual(
      instances.map((i) => i.gpu),
      [0, 1, 2, 0, 1, 2],
    );
    for (const instance of instances) {
      const environ = readFileSync(`/proc/${instance.pid}/environ`, 'utf8').split('\0');
      assert.ok(environ.includes(`CUDA_VISIBLE_DEVICES=${instance.gpu}`), `instance ${instance.instanceId}`);
      assert.ok(environ.includes('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50'));
    }
    await supervisor.close();
  });

  it('gives GPU-pinned instances an even share of the cores as their CPU threads, or the configured count', async () => {
    const threadsOf = (pid: number) =>
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .filter((v) => /^(OMP|MKL|OPENBLAS)_NUM_THREADS=/.test(v))
        .sort();
    const baseEnv = Object.fromEntries(Object.entries(readProcessEnvironment()).filter(([k]) => k !== 'OMP_NUM_THREADS'));
    const { supervisor } = track(
      buildTestSupervisor(
        { m: testModel({ instancesPerGpu: 2 }), n: testModel({ instances: 1, cpuThreads: 2 }) },
        { nodeGpus: [0, 1], cpuCount: 16 },
        silentLogger(),
        baseEnv,
      ),
    );
    await supervisor.start();
    const byModel = (model: string) => supervisor.stats().instances.filter((i) => i.model === model);
    // 5 pinned instances on 16 cores: 3 threads each by default; model n asks for 2.
    assert.equal(byModel('m').length, 4);
    for (const instance of byModel('m')) {
      assert.deepEqual(threadsOf(instance.pid!), ['MKL_NUM_THREADS=3', 'OMP_NUM_THREADS=3', 'OPENBLAS_NUM_THREADS=3']);
    }
    assert.deepEqual(threadsOf(byModel('n')[0]!.pid!), ['MKL_NUM_THREADS=2', 'OMP_NUM_THREADS=2', 'OPENBLAS_NUM_THREADS=2']);
    await supervisor.close();
    const cpuOnly = track(buildTestSupervisor({ m: testModel({ instances: 1 }) }, { nodeGpus: [], cpuCount: 16 }, silentLogger(), baseEnv));
    await cpuOnly.supervisor.start();
    assert.deepEqual(threadsOf(cpuOnly.supervisor.stats().instances[0]!.pid!), [], 'a node without GPUs keeps the defaults');
    await cpuOnly.supervisor.close();
    const operator = track(
      buildTestSupervisor({ m: testModel({ instances: 1 }) }, { nodeGpus: [0], cpuCount: 16 }, silentLogger(), {
        ...baseEnv,
        OMP_NUM_THREADS: '7',
      }),
    );
    await operator.supervisor.start();
    assert.deepEqual(threadsOf(operator.supervisor.stats().instances[0]!.pid!), ['OMP_NUM_THREADS=7'], "the operator's own count wins");
    await operator.supervisor.close();
  });

  it('times out a host that never says Hello', async () => {
    const { supervisor } = track(
      buildTestSupervisor(
        { m: testModel({ command: ['/usr/bin/python3', join(FIXTURE_INSTANCES, 'silent.py')] }) },
        { handshakeTimeoutMs: 500 },
      ),
    );
    await supervisor.start();
    assert.equal(supervisor.readyInstances('m').length, 0);
    assert.equal(supervisor.stats().instances[0]!.lastEnd?.reason, 'failed_to_start');
    supervisor.destroy();
  });
});
