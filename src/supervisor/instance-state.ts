/**
 * The instance lifecycle, as a table of legal transitions:
 *
 *   spawning → handshaking → loading → warming → ready ⇄ draining → closed
 *   any state except closed → crashed
 *
 * An instance that fails before `ready` is killed and never routed to.
 */
export const INSTANCE_STATES = ['spawning', 'handshaking', 'loading', 'warming', 'ready', 'draining', 'closed', 'crashed'] as const;
export type InstanceState = (typeof INSTANCE_STATES)[number];

const TRANSITIONS: Readonly<Record<InstanceState, readonly InstanceState[]>> = {
  spawning: ['handshaking', 'crashed', 'closed'],
  handshaking: ['loading', 'crashed', 'closed'],
  loading: ['warming', 'crashed', 'closed'],
  warming: ['ready', 'crashed', 'closed'],
  ready: ['draining', 'crashed', 'closed'],
  draining: ['ready', 'closed', 'crashed'],
  closed: [],
  crashed: [],
};

export function canTransition(from: InstanceState, to: InstanceState): boolean {
  return TRANSITIONS[from].includes(to);
}
