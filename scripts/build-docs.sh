#!/usr/bin/env bash
# Builds the DocC documentation of every public library target, failing on any
# documentation warning (a broken symbol link, an undocumented parameter).
#
#   scripts/build-docs.sh [target ...]
#
# Built with every trait, so that each product's real API is documented. The archives land in .build/plugins/Swift-DocC/outputs/. About 30 s per target once
# the package is built.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=(Catena CatenaAsyncHTTPClient CatenaTesting CatenaOperations CatenaObservability CatenaOpenAPI)
fi
for target in "${targets[@]}"; do
    echo "== $target"
    swift package --enable-all-traits --disable-sandbox generate-documentation --target "$target" --warnings-as-errors
done
