#!/usr/bin/env bash
# macOS's default file system ignores letter case (and Unicode normalization): two
# tracked paths, or folders on their way, that differ only so become one there, and a
# clone or a dependent's checkout of Catena breaks. Fails, naming each clash.
set -euo pipefail
cd "$(dirname "$0")/.."
git -c core.quotePath=off ls-files -z | python3 -c '
import sys, unicodedata
paths = [p for p in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0") if p]
if not paths:
    sys.exit("no tracked files: run this inside the repository")
names = set()
for path in paths:
    parts = path.split("/")
    names.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
seen, clashes = {}, []
for name in sorted(names):
    key = unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())
    if key in seen:
        clashes.append(f"{seen[key]}  <->  {name}")
    else:
        seen[key] = name
if clashes:
    print("paths that differ only in letter case or normalization (one path on macOS):", file=sys.stderr)
    print("\n".join(clashes), file=sys.stderr)
    sys.exit(1)
print(f"no paths differ only in case ({len(paths)} files)")
'
