/** The only code that reads process.env. */
export function readEnvironment(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('VOXMUX_') && value !== undefined) out[key] = value;
  }
  return out;
}

/** The whole environment, for child processes to inherit. */
export function readProcessEnvironment(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) out[key] = value;
  return out;
}
