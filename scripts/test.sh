#!/usr/bin/env bash
# The whole suite: typecheck, lint, formatting, dependency rules, build, the Python host tests, then the TypeScript tests (unit, conformance, integration, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== typecheck"
npx tsc -p tsconfig.test.json
echo "== lint"
npx eslint .
echo "== format"
npm run --silent format:check
echo "== dependency rules"
npx depcruise src --config .dependency-cruiser.cjs
echo "== build"
npx tsc -p tsconfig.build.json
echo "== host tests (pytest)"
(cd host && /usr/bin/python3 -m pytest -q -p no:cacheprovider tests)
echo "== node tests"
mapfile -t files < <(find src test -name '*.test.ts' -not -path 'test/gpu/*' | sort)
if [ "${#files[@]}" -eq 0 ]; then echo "no test files found" >&2; exit 1; fi
node --import tsx --test --test-concurrency=1 "${files[@]}"
