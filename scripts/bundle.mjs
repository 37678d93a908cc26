// Bundles the voxmux command into one file, .bundle/voxmux.mjs, for machines without npm (the
// GPU machine): `node .bundle/voxmux.mjs serve ...` and `node .bundle/voxmux.mjs bench ...`.
import { build } from 'esbuild';

await build({
  entryPoints: ['scripts/bundle-entry.ts'],
  outfile: '.bundle/voxmux.mjs',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: false,
  logLevel: 'warning',
  // Some dependencies are CommonJS and call require(): give the ESM bundle one.
  banner: {
    js: "import { createRequire as __voxmuxCreateRequire } from 'node:module'; const require = __voxmuxCreateRequire(import.meta.url);",
  },
});
