/**
 * The layer rules of HOUSE-STYLE §3.3: dependencies point down, components of one layer never
 * import each other, only a component's index.ts is reachable from outside it, and no cycles.
 * The bench (bench/cli/) is a client of the server's API beside it: it imports src/core and src/api
 * only, and nothing in src/ imports it or scripts/. Run on src, bench and scripts by
 * `npm run lint:deps` (part of `npm test`).
 */
const layer0 = '^src/core/';
const layer1 = '^src/(config|telemetry|protocol|api)/';
const component = '(scheduler|supervisor|ops|gateway|models-pull)';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Type-only imports (errors.ts naming the catalogue\'s ErrorCode) cannot form a runtime cycle.',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'core-uses-node-only',
      comment: 'core/ is layer 0: Node built-ins and its own files only.',
      severity: 'error',
      from: { path: layer0 },
      to: { pathNot: [layer0, '^node:', '^(crypto|fs|path|os|url|util|events|stream)$'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'layer1-uses-core-only',
      comment: 'config, telemetry, protocol and api are layer 1: they import core/, npm packages and their own folder.',
      severity: 'error',
      from: { path: '^src/(config|telemetry|protocol|api)/' },
      to: { path: '^src/', pathNot: ['^src/core/', '^src/$1/'] },
    },
    {
      name: 'layer1-no-siblings',
      severity: 'error',
      from: { path: '^src/(config|telemetry|protocol|api)/' },
      to: { path: '^src/(scheduler|supervisor|ops|gateway|app|models-pull)/' },
    },
    {
      name: 'layer2-no-siblings',
      comment: 'scheduler, supervisor and ops are layer 2: they never import each other; app/ wires their ports.',
      severity: 'error',
      from: { path: '^src/(scheduler|supervisor|ops)/' },
      to: { path: '^src/(scheduler|supervisor|ops|gateway|app|models-pull)/', pathNot: '^src/$1/' },
    },
    {
      name: 'models-pull-uses-core-only',
      comment:
        'models-pull/ (`voxmux models pull`, layer 2) imports core/ and its own folder only: app/cli.ts reads the environment and passes it in.',
      severity: 'error',
      from: { path: '^src/models-pull/' },
      to: { path: '^src/', pathNot: ['^src/core/', '^src/models-pull/'] },
    },
    {
      name: 'gateway-not-up',
      severity: 'error',
      from: { path: '^src/gateway/' },
      to: { path: '^src/(app|supervisor|ops|models-pull)/' },
    },
    {
      name: 'server-not-to-bench-or-scripts',
      comment: 'The server does not know the bench or the build scripts: `voxmux bench` is loaded by the entry point (bin/, scripts/bundle-entry.ts).',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(bench|scripts)/' },
    },
    {
      name: 'bench-uses-core-and-api-only',
      comment: 'bench/cli/ is a client of the server: its own files, src/core/ and src/api/ (the API shapes), never the server internals.',
      severity: 'error',
      from: { path: '^bench/cli/' },
      to: { path: '^(src|bench|scripts|test)/', pathNot: ['^bench/cli/', '^src/core/', '^src/api/'] },
    },
    {
      name: 'nothing-imports-scripts',
      comment: 'scripts/ are entry points (build, bundle, docs): they import what they need; nothing imports them.',
      severity: 'error',
      from: { pathNot: '^scripts/' },
      to: { path: '^scripts/' },
    },
    {
      name: 'index-only-from-outside',
      comment: 'Outside a component, only its index.ts may be imported.',
      severity: 'error',
      from: { path: '^src/([^/]+)/', pathNot: '\\.test\\.ts$' },
      to: { path: `^src/${component}/(?!index\\.ts$)`, pathNot: '^src/$1/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.test\\.ts$' },
  },
};
