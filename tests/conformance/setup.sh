#!/usr/bin/env bash
# Installs the official MCP conformance suite and the Node 22 it needs (the
# machines have Node 20; the suite uses Node 22's fs.globSync), at the
# pinned versions of package-lock.json, into DIR (default:
# target/conformance). Does nothing when DIR is already up to date. Needs
# npm; reaches only the npm registry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../../target/conformance}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
stamp="$dir/.installed"
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dir/"
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
"$dir/node_modules/.bin/node" --version >/dev/null
echo "$want" > "$stamp"
