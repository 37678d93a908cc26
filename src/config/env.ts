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

/**
 * What `voxmux models pull` reads: HF_TOKEN and HF_ENDPOINT, the names huggingface_hub uses, and
 * VOXMUX_MODELS_DIR. Empty values count as unset.
 */
export function readModelsPullEnvironment(): { hfToken?: string; hfEndpoint?: string; modelsDir?: string } {
  const pick = (name: string): string | undefined => {
    const value = process.env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  const hfToken = pick('HF_TOKEN');
  const hfEndpoint = pick('HF_ENDPOINT');
  const modelsDir = pick('VOXMUX_MODELS_DIR');
  return {
    ...(hfToken === undefined ? {} : { hfToken }),
    ...(hfEndpoint === undefined ? {} : { hfEndpoint }),
    ...(modelsDir === undefined ? {} : { modelsDir }),
  };
}
