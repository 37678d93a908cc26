import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runInterruptibly } from './interruptible.js';

describe('runInterruptibly', () => {
  it("aborts the work's signal when the caller's signal aborts, and returns the work's result", async () => {
    const caller = new AbortController();
    const result = await runInterruptibly(
      { signal: caller.signal, shouldHandleSignals: false, onInterrupt: () => assert.fail('not a SIGINT') },
      async (signal) => {
        assert.equal(signal.aborted, false);
        setTimeout(() => caller.abort(), 5);
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
        return 'stopped';
      },
    );
    assert.equal(result, 'stopped');
  });

  it('starts aborted when the caller already aborted', async () => {
    const caller = new AbortController();
    caller.abort();
    assert.equal(
      await runInterruptibly(
        { signal: caller.signal, shouldHandleSignals: false, onInterrupt: () => undefined },
        async (signal) => signal.aborted,
      ),
      true,
    );
  });

  it('on SIGINT tells the user, aborts the work, and removes its handler afterwards', async () => {
    const before = process.listenerCount('SIGINT');
    let told = 0;
    const isAborted = await runInterruptibly({ onInterrupt: () => (told += 1) }, async (signal) => {
      assert.equal(process.listenerCount('SIGINT'), before + 1);
      process.emit('SIGINT');
      return signal.aborted;
    });
    assert.deepEqual([isAborted, told, process.listenerCount('SIGINT')], [true, 1, before]);
  });

  it('cleans up when the work fails', async () => {
    const before = process.listenerCount('SIGINT');
    await assert.rejects(
      runInterruptibly({ onInterrupt: () => undefined }, async () => Promise.reject(new Error('boom'))),
      /boom/,
    );
    assert.equal(process.listenerCount('SIGINT'), before);
  });
});
