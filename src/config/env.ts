/** The only code that reads process.env. */
export function readEnvironment(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('VOXMUX_') && value !== undefined) out[key] = value;
  }
  return out;
}

/**
 * The whole environment, for child processes to inherit, less the malloc settings that
 * bin/voxmux.mjs gives the gateway process alone (it names them in VOXMUX_GATEWAY_MALLOC).
 */
export function readProcessEnvironment(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) out[key] = value;
  for (const key of [...(out.VOXMUX_GATEWAY_MALLOC?.split(',') ?? []), 'VOXMUX_GATEWAY_MALLOC']) delete out[key];
  return out;
}
