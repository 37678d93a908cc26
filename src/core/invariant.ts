/** Reports a broken programmer invariant (a bug, never user input): throws a plain Error. */
export function invariant(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`Invariant failed: ${message}`);
}

/** Exhaustiveness guard for discriminated-union switches. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`Invariant failed: unexpected ${what}: ${JSON.stringify(value)}`);
}
