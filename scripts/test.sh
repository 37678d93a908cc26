#!/usr/bin/env bash
# The whole suite: typecheck, lint, formatting, dependency rules, build, the TypeScript tests (unit,
# conformance, integration, e2e), then the Python host's checks (pyflakes, mypy --strict) and tests.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== typecheck"
npx tsc -p tsconfig.test.json
echo "== lint"
npx eslint .
echo "== format"
npm run --silent format:check
echo "== dependency rules"
npx depcruise src bench scripts --config .dependency-cruiser.cjs
echo "== build"
npx tsc -p tsconfig.build.json
# TypeScript tests by kind, each kind failing fast: unit (next to the code: the server's and the bench's),
# conformance, integration, e2e.
node_tests() {
  local name=$1; shift
  mapfile -t files < <(find "$@" -name '*.test.ts' | sort)
  if [ "${#files[@]}" -eq 0 ]; then echo "no $name test files found" >&2; exit 1; fi
  echo "== $name tests (${#files[@]} files)"
  node --import tsx --test --test-concurrency=1 "${files[@]}"
}
node_tests unit src bench/cli
node_tests conformance test/conformance
node_tests integration test/integration
node_tests e2e test/e2e
echo "== host typecheck and lint (pyflakes, mypy --strict)"
(cd host && /usr/bin/python3 -m pyflakes . && /usr/bin/python3 -m mypy)
echo "== host tests (pytest)"
(cd host && /usr/bin/python3 -m pytest -q -p no:cacheprovider tests)
