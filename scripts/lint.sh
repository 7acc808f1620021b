#!/usr/bin/env bash
# swift-format lint, strict, with the repository's .swift-format, over every Swift file
# but the generated OpenAPI client. `scripts/lint.sh --fix` formats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files 'Package.swift' 'Sources/*.swift' 'Tools/*.swift' 'Examples/*.swift' 'Benchmarks/*.swift' 'Snippets/*.swift' 'Tests/*.swift' | grep -v '^Examples/DemoUsersOpenAPI/')
if [[ "${1:-}" == "--fix" ]]; then
    swift format format --in-place --configuration .swift-format $files
else
    swift format lint --strict --configuration .swift-format $files
fi
