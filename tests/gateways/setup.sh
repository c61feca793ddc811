#!/usr/bin/env bash
# Installs the OpenAI-compatible gateways the test suite puts between chorus
# and its mock provider (tests/e2e/providers/gateways.rs): LiteLLM's proxy, at the
# versions pinned in requirements.txt, into DIR (default: target/gateways).
# Does nothing when DIR is already up to date. Needs python3 (with venv);
# reaches only PyPI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../../target/gateways}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
stamp="$dir/.installed"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/venv/bin/litellm" ]]; then
  exit 0
fi
rm -rf "$dir/venv"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "$want" > "$stamp"
