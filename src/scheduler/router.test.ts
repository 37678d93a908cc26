import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { selectInstance, selectStreamInstance, type RouteCandidate } from './router.js';

const candidate = (instanceId: string, runningBatches: number, runningRequests: number): RouteCandidate => ({
  instanceId,
  runningBatches,
  runningRequests,
});

describe('selectInstance', () => {
  it('selects nothing when there are no candidates', () => {
    assert.equal(selectInstance([], 1), undefined);
  });

  it('selects the instance with the fewest running requests', () => {
    const candidates = [candidate('a', 1, 8), candidate('b', 1, 2), candidate('c', 1, 5)];
    assert.equal(selectInstance(candidates, 4)?.instanceId, 'b');
  });

  it('selects the first of equally loaded instances', () => {
    const candidates = [candidate('a', 0, 0), candidate('b', 0, 0)];
    assert.equal(selectInstance(candidates, 1)?.instanceId, 'a');
    assert.equal(selectInstance([candidate('b', 1, 3), candidate('a', 1, 3)], 2)?.instanceId, 'b');
  });

  it('skips an instance already running maxRunningBatchesPerInstance batches, however few requests it holds', () => {
    const candidates = [candidate('busy', 2, 1), candidate('free', 1, 7)];
    assert.equal(selectInstance(candidates, 2)?.instanceId, 'free');
    assert.equal(selectInstance(candidates, 3)?.instanceId, 'busy');
  });

  it('selects nothing when every instance is at maxRunningBatchesPerInstance', () => {
    assert.equal(selectInstance([candidate('a', 1, 4), candidate('b', 1, 1)], 1), undefined);
    assert.equal(selectInstance([candidate('a', 3, 4), candidate('b', 4, 1)], 3), undefined);
  });

  it('returns the candidate object itself', () => {
    const b = candidate('b', 0, 0);
    assert.equal(selectInstance([candidate('a', 0, 1), b], 1), b);
  });
});

describe('selectStreamInstance', () => {
  const c = (instanceId: string, runningStreams: number, resources: { name: string; residency: 'device' | 'host' }[] = []) => ({
    instanceId,
    runningStreams,
    resources: resources.map((r) => ({ ...r, bytes: 1 })),
  });

  it('prefers an instance holding the resource on the device, then on the host, then the least-loaded', () => {
    const candidates = [c('a', 0), c('h', 2, [{ name: 'v', residency: 'host' }]), c('d', 3, [{ name: 'v', residency: 'device' }])];
    assert.equal(selectStreamInstance(candidates, { resource: 'v', maxStreamsPerInstance: 4 })?.instanceId, 'd');
    assert.equal(selectStreamInstance(candidates, { resource: 'v', maxStreamsPerInstance: 3 })?.instanceId, 'h');
    assert.equal(selectStreamInstance(candidates, { resource: 'w', maxStreamsPerInstance: 4 })?.instanceId, 'a');
    assert.equal(selectStreamInstance(candidates, { resource: undefined, maxStreamsPerInstance: 4 })?.instanceId, 'a');
  });

  it('sends the stream past a holder busier than a copy or a load would cost (two streams from host memory, eight from disk)', () => {
    const d = (n: number) => c('d', n, [{ name: 'v', residency: 'device' }]);
    const h = (n: number) => c('h', n, [{ name: 'v', residency: 'host' }]);
    const pick = (candidates: ReturnType<typeof c>[]) =>
      selectStreamInstance(candidates, { resource: 'v', maxStreamsPerInstance: 32 })?.instanceId;
    assert.equal(pick([d(4), h(2)]), 'd', 'equal cost: the device holder');
    assert.equal(pick([d(5), h(2)]), 'h');
    assert.equal(pick([d(8), c('a', 0)]), 'd', 'equal cost: the holder');
    assert.equal(pick([d(9), c('a', 0)]), 'a');
  });

  it('gives a voice no instance holds to the instance with the fewest voices on its device, then the first', () => {
    const held = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `v${i}`, residency: 'device' as const }));
    const pick = (candidates: ReturnType<typeof c>[]) =>
      selectStreamInstance(candidates, { resource: 'new', maxStreamsPerInstance: 4 })?.instanceId;
    assert.equal(pick([c('x', 0, held(2)), c('y', 0, held(1))]), 'y');
    assert.equal(pick([c('x', 0, held(1)), c('y', 0, held(1))]), 'x');
    assert.equal(pick([c('x', 0, held(2)), c('y', 1, held(0))]), 'x', 'load first');
  });

  it('picks the fewest running streams among holders, and nothing when every instance is full', () => {
    const v = [{ name: 'v', residency: 'device' as const }];
    assert.equal(selectStreamInstance([c('x', 2, v), c('y', 1, v)], { resource: 'v', maxStreamsPerInstance: 4 })?.instanceId, 'y');
    assert.equal(selectStreamInstance([c('x', 2), c('y', 2)], { resource: undefined, maxStreamsPerInstance: 2 }), undefined);
  });
});
