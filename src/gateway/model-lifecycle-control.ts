/**
 * The answers of POST /v1/models/{id}/wake and /sleep, made where the lifecycle lives (the main
 * thread): the state right after the call, or the end of the wake or the stop. A gateway thread
 * asks the main thread for them, since the state it was last pushed may be up to 250 ms old (a wake
 * after a failed one would answer the old failure; a sleep, the state before it).
 */
import type { ModelLifecycleControl, ModelLifecycleOwner } from './gateway-types.js';

export function createModelLifecycleControl(owner: ModelLifecycleOwner): ModelLifecycleControl {
  return {
    state: (model) => owner.state(model),
    async wake(model, { isWaiting }) {
      const woken = owner.wake(model);
      if (isWaiting) {
        const end = await woken;
        if (!end.isReady) throw end.error;
        return 'ready';
      }
      void woken; // the wake goes on; its end is for callers that wait
      const state = owner.state(model);
      // A wake of a stopped model starts at once, unless it is refused (the budget's hard stop).
      const refusal = state === 'stopped' ? owner.whyUnavailable(model) : undefined;
      if (refusal !== undefined) throw refusal;
      return state;
    },
    async sleep(model, { isWaiting }) {
      const slept = owner.sleep(model);
      if (isWaiting) await slept;
      else void slept;
      return owner.state(model);
    },
  };
}
