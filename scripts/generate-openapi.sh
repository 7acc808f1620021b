#!/usr/bin/env bash
# Regenerates Examples/DemoUsersOpenAPI/{Types,Client}.swift from openapi.yaml with
# swift-openapi-generator. Run by hand after changing the document; CI never runs it
# (building the generator takes minutes) and compiles the committed output instead.
#
#   scripts/generate-openapi.sh [path/to/swift-openapi-generator]
#
# Without an argument it builds the generator (1.14.3) from a clone in .build/generator.
set -euo pipefail
cd "$(dirname "$0")/.."
generator="${1:-}"
if [[ -z "$generator" ]]; then
    if [[ ! -d .build/generator ]]; then
        git clone --quiet --branch 1.14.3 https://github.com/apple/swift-openapi-generator .build/generator
    fi
    swift build --package-path .build/generator --product swift-openapi-generator
    generator=".build/generator/.build/debug/swift-openapi-generator"
fi
target=Examples/DemoUsersOpenAPI
"$generator" generate "$target/openapi.yaml" --config "$target/openapi-generator-config.yaml" --output-directory "$target"
# The generator writes `public import`, which Swift 6.3 warns about in every file that
# does not use each import publicly (the generator silences that only from Swift 6.4 on).
# Plain imports are public in this target (it does not enable InternalImportsByDefault).
sed -i.bak -E 's/^(@_spi\(Generated\) )?public import /\1import /' "$target"/*.swift && rm -f "$target"/*.swift.bak
echo "generated: $(ls "$target"/*.swift | tr '\n' ' ')"
