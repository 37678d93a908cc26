/**
 * Type-aware lint for the TypeScript (HOUSE-STYLE §3.13): promises that nobody awaits, exhaustive
 * switches, the naming rules of §3.4, and who may read the environment, start processes and print.
 * Run by `npm run lint` (part of `npm test`). The typed rules use tsconfig.test.json, so every file
 * linted here must be in that project.
 */
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

const TS_FILES = ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/*.ts'];

// The allow-lists of test/conformance/house-rules.test.ts: they apply to the server (src/) and the
// bench (bench/cli/) outside their tests.
const PRODUCTION_FILES = ['src/**/*.ts', 'bench/cli/**/*.ts'];
const PRODUCTION_TESTS = ['src/**/*.test.ts', 'bench/cli/**/*.test.ts'];
const ENV_READERS = ['src/config/env.ts'];
const PROCESS_STARTERS = [
  'src/supervisor/spawn.ts',
  'src/gateway/audio/ffmpeg.ts',
  'bench/cli/gpu-sampler.ts',
  'bench/cli/bench-processes.ts',
];
const PRINTERS = ['bench/cli/**/*.ts'];

const ENV_MESSAGE = 'Read the environment only in src/config/env.ts (HOUSE-STYLE §3.6).';
const restrictedEnvImports = ['node:process', 'process'].map((name) => ({ name, importNames: ['env'], message: ENV_MESSAGE }));
const restrictedProcessImports = ['node:child_process', 'child_process'].map((name) => ({
  name,
  message:
    'Start processes only in supervisor/spawn.ts, gateway/audio/ffmpeg.ts, bench/cli/gpu-sampler.ts and bench/cli/bench-processes.ts.',
}));

const NO_PRIVATE_KEYWORD = {
  selector: ':matches(PropertyDefinition, MethodDefinition, TSParameterProperty)[accessibility=/private|protected/]',
  message: 'Private state uses #fields (HOUSE-STYLE §3.4).',
};
const NO_ENUM = {
  selector: 'TSEnumDeclaration',
  message: 'Use a string-literal union or an `as const` object; enums only for numeric wire tags in protocol/ (HOUSE-STYLE §3.4).',
};

export default defineConfig(
  { ignores: ['dist/', '.bundle/', '.device/', 'host/', 'bench/out/', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  {
    files: TS_FILES,
    extends: [js.configs.recommended, tseslint.configs.recommended],
    languageOptions: {
      parserOptions: { project: './tsconfig.test.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Two cases sharing one body, with a comment between them, are not a fallthrough.
      'no-fallthrough': ['error', { allowEmptyCase: true }],
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's describe() and it() return promises that the runner itself awaits.
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      // A default case does not make a switch over a union exhaustive: a new member must be handled.
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/naming-convention': [
        'error',
        { selector: 'default', format: ['camelCase'] },
        { selector: 'typeLike', format: ['PascalCase'] },
        { selector: 'interface', format: ['PascalCase'], custom: { regex: '^I[A-Z]', match: false } },
        // CONSTANT_CASE only for module-level constants; PascalCase for schemas and classes held in a variable.
        { selector: 'variable', format: ['camelCase', 'PascalCase'] },
        { selector: 'variable', modifiers: ['global', 'const'], format: ['camelCase', 'PascalCase', 'UPPER_CASE'] },
        { selector: 'variable', types: ['boolean'], format: ['PascalCase'], prefix: ['is', 'has', 'can', 'should'] },
        // Destructured names are the names of what they come from.
        { selector: 'variable', modifiers: ['destructured'], format: null },
        { selector: 'variable', modifiers: ['destructured'], types: ['boolean'], format: null },
        { selector: 'parameter', format: ['camelCase'], leadingUnderscore: 'allow' },
        { selector: 'import', format: ['camelCase', 'PascalCase'] },
        // Object keys often follow an external format: OpenAI fields and error codes (snake_case),
        // environment variables (UPPER_CASE), protocol message types (PascalCase), headers and CLI flags (quoted).
        { selector: 'objectLiteralProperty', format: ['camelCase', 'snake_case', 'UPPER_CASE', 'PascalCase'] },
        { selector: 'objectLiteralProperty', filter: { regex: '^\\d+$', match: true }, format: null },
        // Wire types keep the wire's names; fastify's route generics and the WebAssembly globals are PascalCase.
        { selector: 'typeProperty', format: ['camelCase', 'snake_case'] },
        {
          selector: 'typeProperty',
          filter: { regex: '^(Params|Querystring|Body|Headers|Reply|WebAssembly|Module|Instance|Memory)$', match: true },
          format: ['PascalCase'],
        },
        {
          selector: ['objectLiteralProperty', 'typeProperty', 'objectLiteralMethod', 'typeMethod'],
          modifiers: ['requiresQuotes'],
          format: null,
        },
      ],
      'no-restricted-syntax': ['error', NO_PRIVATE_KEYWORD, NO_ENUM],
    },
  },
  {
    files: ['src/protocol/**/*.ts'],
    rules: {
      'no-restricted-syntax': ['error', NO_PRIVATE_KEYWORD],
    },
  },
  {
    files: PRODUCTION_FILES,
    ignores: PRODUCTION_TESTS,
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: ENV_MESSAGE }],
      'no-restricted-imports': ['error', { paths: [...restrictedEnvImports, ...restrictedProcessImports] }],
      'no-restricted-globals': [
        'error',
        { name: 'console', message: 'Log through the logger (HOUSE-STYLE §3.8); console only in bench/cli/.' },
      ],
    },
  },
  {
    files: ENV_READERS,
    rules: {
      'no-restricted-properties': 'off',
      'no-restricted-imports': ['error', { paths: restrictedProcessImports }],
    },
  },
  {
    files: PROCESS_STARTERS,
    rules: {
      'no-restricted-imports': ['error', { paths: restrictedEnvImports }],
    },
  },
  {
    files: PRINTERS,
    rules: {
      'no-restricted-globals': 'off',
    },
  },
);
