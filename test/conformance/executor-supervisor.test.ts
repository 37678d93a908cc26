/** The Executor contract, run against the real supervisor over Python hosts with the test engine. */
import { crc32 } from 'node:zlib';
import { buildTestSupervisor, testModel } from '../support/supervisor-fixture.js';
import { describeExecutorContract, type ContractModel, type ExecutorHarness } from './executor.contract.js';

function supervisorHarness(models: Record<string, ContractModel>): ExecutorHarness {
  const { supervisor } = buildTestSupervisor(
    Object.fromEntries(
      Object.entries(models).map(([model, spec]) => [
        model,
        testModel({
          instances: spec.instances ?? 1,
          options: {
            ...(spec.crashAfterBatches === undefined ? {} : { crashAfterBatches: spec.crashAfterBatches }),
            ...(spec.voices === undefined ? {} : { voices: spec.voices }),
          },
        }),
      ]),
    ),
  );
  return {
    executor: supervisor,
    start: () => supervisor.start(),
    // Batches run by themselves on the instances.
    drive: () => undefined,
    // The test engine echoes the CRC-32 of the int16 LE bytes it received.
    expectedText: (audio) => {
      const crc = crc32(Buffer.from(audio.buffer, audio.byteOffset, audio.byteLength));
      return `echo samples=${audio.length} crc=${crc.toString(16).padStart(8, '0')}`;
    },
    // Kills, not closes: a replacement may be mid-start after a crash case, and teardown must be quick.
    close: () => {
      supervisor.destroy();
      return Promise.resolve();
    },
  };
}

describeExecutorContract('Supervisor', supervisorHarness);
