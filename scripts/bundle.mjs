// Bundles the voxmux command for machines without npm (the GPU machine) into two files:
//   .bundle/voxmux.mjs        the server and the command: `node .bundle/voxmux.mjs serve ...`
//   .bundle/voxmux-bench.mjs  the bench, which the first imports from beside itself only for
//                             `node .bundle/voxmux.mjs bench ...` (copy both to run the bench).
// The server bundle must not contain the bench: the build fails if any of its inputs is under bench/.
// Usage: node scripts/bundle.mjs [OUT_DIR]   (default .bundle)
import { build } from 'esbuild';
import { join } from 'node:path';

const outDir = process.argv[2] ?? '.bundle';

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: false,
  logLevel: 'warning',
  metafile: true,
  // Some dependencies are CommonJS and call require(): give the ESM bundle one.
  banner: {
    js: "import { createRequire as __voxmuxCreateRequire } from 'node:module'; const require = __voxmuxCreateRequire(import.meta.url);",
  },
};

// onnxruntime-node is a native addon: it stays outside the bundle. Where it is not installed, the
// gateway finds pauses by frame energy instead of Silero VAD (gateway/pieces/silero-vad.ts).
const server = await build({
  ...common,
  entryPoints: ['scripts/bundle-entry.ts'],
  outfile: join(outDir, 'voxmux.mjs'),
  external: ['onnxruntime-node', 'koffi'],
});
const benchInputs = Object.keys(server.metafile.inputs).filter((input) => input.startsWith('bench/'));
if (benchInputs.length > 0) {
  process.stderr.write(`The server bundle must not contain the bench: it holds ${benchInputs.join(', ')}\n`);
  process.exit(1);
}
await build({ ...common, entryPoints: ['bench/cli/cli.ts'], outfile: join(outDir, 'voxmux-bench.mjs') });
