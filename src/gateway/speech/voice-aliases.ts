/**
 * A speech model's voice aliases as they stand: its fixed table (voiceAliases), and the names that
 * follow its catalogue (catalogVoiceAliases), laid in order onto the voices its instances declared
 * and starting again from the first voice when there are fewer voices than names. With 5 voices,
 * the 13 OpenAI names give alloy, fable and verse the first voice, cedar the third.
 */
import type { CatalogEntry } from '../../scheduler/index.js';

export function voiceAliasesOf(
  settings: { voiceAliases?: Readonly<Record<string, string>>; catalogVoiceAliases?: readonly string[] },
  catalog: readonly CatalogEntry[],
): Readonly<Record<string, string>> {
  const voices = catalog.filter((entry) => entry.kind === 'voice');
  const aliases: Record<string, string> = {};
  if (voices.length > 0) {
    (settings.catalogVoiceAliases ?? []).forEach((name, i) => {
      aliases[name] = voices[i % voices.length]!.name;
    });
  }
  return { ...aliases, ...settings.voiceAliases };
}
