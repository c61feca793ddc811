#!/usr/bin/env bash
# Installs what the browser tests (tests/e2e/web/viewer.rs, tests/browser/viewer.py;
# tests/e2e/mcp/apps.rs, tests/browser/apps.py) need besides Debian's chromium, at
# the pins of requirements.txt and package-lock.json, into DIR (default:
# target/tmp/browser): Playwright for Python in a venv, axe-core, and the MCP
# Apps SDK's host bridge bundled with its peers into DIR/app-bridge.js by
# esbuild. Does nothing when DIR is up to date.
# Needs python3 (with venv) and npm; reaches only PyPI and npm. Playwright's
# own browser download is not used: the tests launch /usr/bin/chromium.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../../target/tmp/browser}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
stamp="$dir/.installed"
want="$(cat "$here/package.json" "$here/package-lock.json" "$here/requirements.txt" "$here/app-bridge.mjs" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dir/"
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
cp "$here/app-bridge.mjs" "$dir/"
(cd "$dir" && node_modules/.bin/esbuild app-bridge.mjs --bundle --format=esm --platform=browser \
  --outfile=app-bridge.js --log-level=warning)
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "$want" > "$stamp"
