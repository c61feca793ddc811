#!/usr/bin/env bash
# Installs the official MCP clients the test suite drives chorus with (and Ajv,
# the JSON Schema validator they use), at the pinned versions of
# package-lock.json and requirements.txt, into DIR (default: target/clients).
# Does nothing when DIR is already up to date.
# Needs node/npm and python3 (with venv); reaches only npm and PyPI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../../target/clients}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
stamp="$dir/.installed"
want="$(cat "$here/package.json" "$here/package-lock.json" "$here/requirements.txt" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dir/"
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
python3 -m venv "$dir/venv"
# pip through the venv's python, not its `pip` script: a venv copied or
# moved (a target directory copied from another build) keeps scripts whose
# shebang names the old venv, and would install there.
"$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "$want" > "$stamp"
