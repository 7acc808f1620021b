#!/usr/bin/env bash
# macOS's default file system ignores letter case: two tracked paths (or the folders on
# their way) that differ only in case become one there, and a clone or a dependent's
# checkout of Catena breaks. Fails, naming each clash, when any two do.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every tracked file and every folder above one, then the lowercased names seen twice.
clashes="$(git ls-files | awk -F/ '{ p = ""; for (i = 1; i <= NF; i++) { p = (i == 1 ? $i : p "/" $i); print p } }' \
    | sort -u | awk '{ k = tolower($0); if (k in seen) print seen[k] "  <->  " $0; else seen[k] = $0 }')"
if [[ -n "$clashes" ]]; then
    echo "paths that differ only in letter case (one path on macOS):" >&2
    echo "$clashes" >&2
    exit 1
fi
echo "no paths differ only in case ($(git ls-files | wc -l) files)"
