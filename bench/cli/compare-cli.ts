/** `voxmux bench compare`: several transcribe runs side by side, as a table, a plot and markdown. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { usageError } from './bench-error.js';
import { defineCommand } from './command.js';
import { compareResults, loadResults, toComparedRuns } from './compare.js';
import { timestampForPath } from './output-dir.js';
import { BENCH_USAGE } from './transcribe-cli.js';

export const compareCommand = defineCommand({
  name: 'compare',
  usage: BENCH_USAGE,
  flags: { out: { type: 'string' } },
  hasPositionals: true,
  run: async ({ values, positionals, io, cwd, clock, outputDir }) => {
    if (positionals.length < 2) throw usageError(`Expected at least two results files to compare: got ${positionals.length}`);
    const inputs = [];
    for (const path of positionals) inputs.push({ source: path, results: await loadResults(resolve(cwd, path)) });
    const output = compareResults(toComparedRuns(inputs));
    const outDir = await outputDir(values.out, `compare-${timestampForPath(clock.wallMs())}`);
    await mkdir(outDir, { recursive: true });
    await writeFile(join(outDir, 'compare.svg'), output.svg);
    await writeFile(join(outDir, 'compare.md'), output.markdown);
    io.stdout.write(output.text);
    io.stdout.write(`Wrote ${join(outDir, 'compare.svg')}, compare.md\n`);
    return 0;
  },
});
