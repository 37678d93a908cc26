/** The only code that reads process.env. */
export function readEnvironment(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('VOXMUX_') && value !== undefined) out[key] = value;
  }
  return out;
}
