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
 * What `voxmux models pull` reads: HF_TOKEN, HF_ENDPOINT, and where huggingface_hub keeps the token
 * that `huggingface-cli login` saves (HF_TOKEN_PATH, else $HF_HOME/token, HF_HOME defaulting to
 * $XDG_CACHE_HOME/huggingface), huggingface_hub's cache (HF_HUB_CACHE, else the legacy
 * HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub) and HF_HUB_OFFLINE (else the legacy TRANSFORMERS_OFFLINE),
 * under huggingface_hub's names and with its precedence; and VOXMUX_MODELS_DIR. Empty values count as unset.
 */
export function readModelsPullEnvironment(): {
  hfToken?: string;
  hfEndpoint?: string;
  hfHome?: string;
  hfTokenPath?: string;
  hfHubOffline?: string;
  hfHubCache?: string;
  xdgCacheHome?: string;
  modelsDir?: string;
} {
  const pick = (name: string): string | undefined => {
    const value = process.env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  const values = {
    hfToken: pick('HF_TOKEN'),
    hfEndpoint: pick('HF_ENDPOINT'),
    hfHome: pick('HF_HOME'),
    hfTokenPath: pick('HF_TOKEN_PATH'),
    hfHubOffline: pick('HF_HUB_OFFLINE') ?? pick('TRANSFORMERS_OFFLINE'),
    hfHubCache: pick('HF_HUB_CACHE') ?? pick('HUGGINGFACE_HUB_CACHE'),
    xdgCacheHome: pick('XDG_CACHE_HOME'),
    modelsDir: pick('VOXMUX_MODELS_DIR'),
  };
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
}
