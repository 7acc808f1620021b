#!/usr/bin/env bash
# A user's package gets only what it imports. For each group of Catena's products, makes
# a fresh package outside the repository that depends on this checkout by path (with the
# group's trait), resolves it and builds it cold, and fails when
#   - its Package.resolved lists a package outside the group's allowed set, or
#   - a module was compiled that belongs neither to the group's products nor to an
#     allowed package.
# The allowed set of a group is swift-http-types, swift-log and swift-http-structured-headers (the core) plus the
# packages its own dependency resolves to alone (AsyncHTTPClient's own tree, say), found
# by resolving a reference package that depends on that dependency only.
# Prints each group's package count and cold debug build time.
#
#   scripts/check-consumer.sh [group ...]     groups: core tools ahc observability openapi
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/catena-consumer.XXXXXX)"
trap 'rm -rf "$work"' EXIT
groups=("$@")
[[ ${#groups[@]} -gt 0 ]] || groups=(core tools ahc observability openapi)

# Every module of this package, products or not: none may be compiled unless asked for.
ours=(Catena CatenaAsyncHTTPClient CatenaTesting CatenaOperations CatenaObservability CatenaOpenAPI
    CatenaDemoServer CatenaCLI CatenaBenchmarks CatenaAllocations BenchmarkBaselines ReqresAPI FlickrAPI DemoUsersOpenAPI ThreadSanitizerSuppressions CatenaTestSupport)
core_packages=(swift-http-types swift-log swift-http-structured-headers)
# A path dependency is named by its folder.
identity="$(basename "$root" | tr "[:upper:]" "[:lower:]")"

# The packages `dependency` (a .package line) resolves to on its own.
reference_tree() {
    local dir="$work/reference-$1"
    mkdir -p "$dir/Sources/Reference"
    echo "" >"$dir/Sources/Reference/Reference.swift"
    cat >"$dir/Package.swift" <<EOF
// swift-tools-version: 6.1
import PackageDescription
let package = Package(name: "Reference", dependencies: [$2], targets: [.target(name: "Reference")])
EOF
    (cd "$dir" && swift package resolve >/dev/null 2>&1)
    sed -n 's/.*"identity" : "\(.*\)".*/\1/p' "$dir/Package.resolved"
}

# contains NAME LIST...: whether NAME is in LIST, ignoring case (no pipes: under
# pipefail, `grep -q` closing a pipe early fails the writer with SIGPIPE).
contains() {
    local name="${1,,}" item
    shift
    for item in "$@"; do [[ "${item,,}" == "$name" ]] && return 0; done
    return 1
}

failures=0
summary=()
for group in "${groups[@]}"; do
    case "$group" in
    core)
        products=(Catena); traits=""; extra=() ;;
    tools)
        # Operations and the test helpers need no trait and bring nothing of their own.
        products=(Catena CatenaOperations CatenaTesting); traits=""; extra=() ;;
    ahc)
        products=(Catena CatenaAsyncHTTPClient CatenaOperations CatenaTesting); traits="AsyncHTTPClient"
        mapfile -t extra < <(reference_tree ahc '.package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0")') ;;
    observability)
        products=(Catena CatenaObservability); traits="Observability"
        mapfile -t extra < <(reference_tree observability \
            '.package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"), .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0")') ;;
    openapi)
        products=(Catena CatenaOpenAPI); traits="OpenAPI"
        mapfile -t extra < <(reference_tree openapi '.package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4")') ;;
    *)
        echo "unknown group: $group" >&2; exit 2 ;;
    esac
    allowed=("${core_packages[@]}" "${extra[@]}")

    dir="$work/$group"
    mkdir -p "$dir/Sources/Consumer"
    imports=""
    product_lines=""
    for product in "${products[@]}"; do
        imports+="import $product"$'\n'
        product_lines+=".product(name: \"$product\", package: \"$identity\"), "
    done
    printf '%s\nprint("built")\n' "$imports" >"$dir/Sources/Consumer/main.swift"
    trait_argument=""
    [[ -z "$traits" ]] || trait_argument=", traits: [\"$traits\"]"
    cat >"$dir/Package.swift" <<EOF
// swift-tools-version: 6.1
import PackageDescription
let package = Package(
    name: "Consumer",
    dependencies: [.package(path: "$root"$trait_argument)],
    targets: [.executableTarget(name: "Consumer", dependencies: [$product_lines])]
)
EOF
    echo "== $group: ${products[*]}${traits:+ (trait $traits)}"
    (cd "$dir" && swift package resolve >/dev/null)
    resolved=()
    if [[ -f "$dir/Package.resolved" ]]; then
        mapfile -t resolved < <(sed -n 's/.*"identity" : "\(.*\)".*/\1/p' "$dir/Package.resolved")
    fi
    for package in "${resolved[@]}"; do
        if ! contains "$package" "${allowed[@]}"; then
            echo "FAIL: $group resolves $package, outside its allowed set (${allowed[*]})" >&2
            failures=$((failures + 1))
        fi
    done

    start=$(date +%s)
    (cd "$dir" && swift build >"$work/$group-build.log" 2>&1) || { cat "$work/$group-build.log" >&2; echo "FAIL: $group does not build" >&2; exit 1; }
    seconds=$(($(date +%s) - start))
    [[ "$(cd "$dir" && .build/debug/Consumer)" == built ]] || { echo "FAIL: $group's program did not run" >&2; failures=$((failures + 1)); }

    # Each compiled module belongs to one of our asked-for products or to an allowed package.
    modules=0
    for build in "$dir"/.build/debug/*.build; do
        module="$(basename "$build" .build)"
        [[ "$module" == Consumer ]] && continue
        # SwiftPM makes a folder for every module it plans; only those with objects were compiled.
        [[ -n "$(find "$build" -name '*.o' -print -quit)" ]] || continue
        modules=$((modules + 1))
        if contains "$module" "${ours[@]}"; then
            contains "$module" "${products[@]}" && continue
            echo "FAIL: $group compiled our module $module, which it did not ask for" >&2
            failures=$((failures + 1))
            continue
        fi
        # The package a module comes from: the checkout its sources live in, as its
        # build files (output-file-map.json, or a C file's .d list) name them.
        owner="$(grep -rhoE --include='*.json' --include='*.d' '/checkouts/[^/]+/' "$build" 2>/dev/null | head -1 | cut -d/ -f3 || true)"
        if [[ -z "$owner" ]] || ! contains "$owner" "${allowed[@]}"; then
            echo "FAIL: $group compiled $module (from ${owner:-an unknown package}), outside its allowed set" >&2
            failures=$((failures + 1))
        fi
    done
    # A check that found nothing proves nothing: a changed build layout or a missing
    # Package.resolved must fail here, not pass with zero counts.
    if [[ $modules -eq 0 ]] || ! contains swift-http-types "${resolved[@]}"; then
        echo "FAIL: $group: found $modules compiled modules and ${#resolved[@]} resolved packages; the check cannot see the build" >&2
        failures=$((failures + 1))
    fi
    line="$group: ${#resolved[@]} packages, $modules modules compiled, cold debug build ${seconds} s"
    echo "$line"
    summary+=("$line")
done

# A product used without its trait: the build fails with a message that names the trait.
dir="$work/missing-trait"
mkdir -p "$dir/Sources/Consumer"
printf 'import CatenaAsyncHTTPClient\nlet transport = AsyncHTTPClientTransport()\n' >"$dir/Sources/Consumer/main.swift"
cat >"$dir/Package.swift" <<MANIFEST
// swift-tools-version: 6.1
import PackageDescription
let package = Package(
    name: "Consumer",
    dependencies: [.package(path: "$root")],
    targets: [.executableTarget(name: "Consumer", dependencies: [.product(name: "CatenaAsyncHTTPClient", package: "$identity")])]
)
MANIFEST
echo "== missing-trait: CatenaAsyncHTTPClient without its trait"
if (cd "$dir" && swift build >"$work/missing-trait.log" 2>&1); then
    echo "FAIL: CatenaAsyncHTTPClient built without its trait" >&2
    failures=$((failures + 1))
elif ! grep -q "needs the Catena package's AsyncHTTPClient trait" "$work/missing-trait.log"; then
    cat "$work/missing-trait.log" >&2
    echo "FAIL: without its trait, the error does not name the trait" >&2
    failures=$((failures + 1))
else
    summary+=("missing-trait: the build fails, naming the AsyncHTTPClient trait")
fi

echo
printf '%s\n' "${summary[@]}"
if [[ $failures -gt 0 ]]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
