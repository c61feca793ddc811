#!/usr/bin/env bash
# Builds every package of chorus for one target into target/dist/, from one
# binary (default target: x86_64-unknown-linux-musl, a static Linux binary):
#   chorus-VERSION-TARGET.tar.gz (.zip on Windows) (+ .sha256)  the binary, README, licenses
#   chorus_mcp-VERSION-py3-none-PLATFORM.whl  `pip install` / `uvx chorus-mcp` (python/make_wheel.py)
#   chorus-mcp-PLATFORM-VERSION.tgz       npm platform package holding the binary
#   chorus-mcp-VERSION.tgz                npm wrapper `chorus-mcp` (`npx -y chorus-mcp`)
#   chorus-PLATFORM.mcpb                  MCP Bundle, validated and packed with @anthropic-ai/mcpb
#   server.json                           MCP Registry entry, validated against registry/server.schema.json
#   chorus-VERSION-PLATFORM.oci.tar       Linux only: the container image (OCI archive, FROM scratch,
#                                         written by oci/make_image.py; `podman load` / `docker load`)
#   SHA256SUMS                            every artifact's checksum
# PLATFORM is npm's name for the target (linux-x64, darwin-arm64, win32-x64, ...).
# Usage: bash dist/build.sh [TARGET]   (the release workflow runs it once per
# target, on that platform's own runner; CI here, for the default.)
# The binary is `cargo build --release --target TARGET --features
# precompiled-builtins` (the built-in plugins precompiled and embedded, so a
# first start takes milliseconds): built once, reused by every package (cargo
# does nothing when it is fresh). For musl: rustup's musl target and
# Debian's musl-tools (the C parts: SQLite, ring). Also node/npm and python3
# with venv. Reaches only npm and PyPI, for the pinned tools in dist/tools/,
# installed into target/tmp/dist-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${1:-x86_64-unknown-linux-musl}
# npm's platform name, its os and cpu, the wheel's platform tags, the binary.
exe=chorus
case $target in
  x86_64-unknown-linux-musl)
    platform=linux-x64 os=linux cpu=x64 what="Linux x86_64 (static, musl)" image_arch=amd64
    wheel_tags="manylinux_2_17_x86_64 manylinux2014_x86_64 musllinux_1_1_x86_64" ;;
  aarch64-unknown-linux-musl)
    platform=linux-arm64 os=linux cpu=arm64 what="Linux aarch64 (static, musl)" image_arch=arm64
    wheel_tags="manylinux_2_17_aarch64 manylinux2014_aarch64 musllinux_1_1_aarch64" ;;
  aarch64-apple-darwin)
    platform=darwin-arm64 os=darwin cpu=arm64 what="macOS on Apple silicon"
    wheel_tags="macosx_11_0_arm64" ;;
  x86_64-apple-darwin)
    platform=darwin-x64 os=darwin cpu=x64 what="macOS on Intel"
    wheel_tags="macosx_10_12_x86_64" ;;
  x86_64-pc-windows-msvc)
    platform=win32-x64 os=win32 cpu=x64 what="Windows x86_64" exe=chorus.exe
    wheel_tags="win_amd64" ;;
  *)
    echo "dist: no packaging for target $target (known: x86_64/aarch64-unknown-linux-musl, aarch64/x86_64-apple-darwin, x86_64-pc-windows-msvc)" >&2
    exit 2 ;;
esac
python=$(command -v python3 || command -v python)
# GNU tar (macOS runners have it as gtar) and a sha256sum (macOS: shasum).
tar=tar; command -v gtar >/dev/null && tar=gtar
sha256() { if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
out=$root/target/dist
stage=$root/target/tmp/dist-stage
tools=$root/target/tmp/dist-tools
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}

say() { echo "dist: $*" >&2; }

# --- tools (pinned; installed once)
pins=$root/dist/tools
if [ ! -x "$tools/node_modules/.bin/mcpb" ] || ! cmp -s "$pins/package-lock.json" "$tools/package-lock.json"; then
  say "installing @anthropic-ai/mcpb (dist/tools/package-lock.json)"
  mkdir -p "$tools"
  cp "$pins/package.json" "$pins/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
fi
venv=$tools/venv/bin; [ "$os" = win32 ] && venv=$tools/venv/Scripts
if ! "$venv/python" -c 'import jsonschema' 2>/dev/null; then
  say "installing jsonschema (dist/tools/requirements.txt)"
  "$python" -m venv "$tools/venv"
  "$venv/python" -m pip install --quiet --disable-pip-version-check -r "$pins/requirements.txt"
fi

# --- the one binary
say "cargo build --release --target $target"
cargo build --release --locked --target "$target" -p chorus --features precompiled-builtins
bin=${CARGO_TARGET_DIR:-$root/target}/$target/release/$exe
if [ "$os" = linux ]; then
  case "$(ldd "$bin" 2>&1)" in
    *"statically linked"* | *"not a dynamic executable"*) ;;
    *) say "$bin is not static:"; ldd "$bin" >&2; exit 1 ;;
  esac
fi
"$bin" --version >/dev/null

rm -rf "$out" "$stage"
mkdir -p "$out" "$stage"

# --- tarball
name=chorus-$version-$target
mkdir -p "$stage/$name"
cp "$bin" README.md LICENSE-MIT LICENSE-APACHE "$stage/$name/"
if [ "$os" = win32 ]; then
  archive=$name.zip
  (cd "$stage" && "$python" -m zipfile -c "$out/$archive" "$name")
else
  archive=$name.tar.gz
  "$tar" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$stage" -czf "$out/$archive" "$name"
fi
(cd "$out" && sha256 "$archive" > "$archive.sha256")

# --- Python wheel
# shellcheck disable=SC2086 # the tags are words
"$python" dist/python/make_wheel.py "$version" "$bin" README.md "$out" $wheel_tags >/dev/null

# --- npm: the platform package and the wrapper
set_version() { # FILE: every "0.0.0" placeholder (own and dependency versions) -> $version
  node -e '
    const fs = require("fs"), [file, v] = process.argv.slice(1), p = JSON.parse(fs.readFileSync(file));
    p.version = v;
    for (const d of Object.keys(p.optionalDependencies || {})) p.optionalDependencies[d] = v;
    fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");' "$1" "$version"
}
fill() { # FILE: the target's names for the @...@ placeholders
  sed -i.orig -e "s/@PLATFORM@/$platform/g" -e "s/@OS@/$os/g" -e "s/@CPU@/$cpu/g" \
    -e "s/@EXE@/$exe/g" -e "s/@DESCRIPTION@/$what/g" "$1" && rm "$1.orig"
}
cp -r dist/npm/platform "$stage/npm-platform"
cp -r dist/npm/chorus-mcp "$stage/npm-chorus-mcp"
fill "$stage/npm-platform/package.json"
mkdir -p "$stage/npm-platform/bin"
cp "$bin" "$stage/npm-platform/bin/$exe"
cp README.md "$stage/npm-chorus-mcp/"
for pkg in platform chorus-mcp; do
  set_version "$stage/npm-$pkg/package.json"
  (cd "$stage/npm-$pkg" && npm pack --silent --pack-destination "$out" >/dev/null)
done

# --- MCP Bundle
mkdir -p "$stage/mcpb/server"
cp dist/mcpb/manifest.json README.md LICENSE-MIT LICENSE-APACHE "$stage/mcpb/"
cp "$bin" "$stage/mcpb/server/$exe"
fill "$stage/mcpb/manifest.json"
set_version "$stage/mcpb/manifest.json"
"$tools/node_modules/.bin/mcpb" validate "$stage/mcpb/manifest.json" >/dev/null
"$tools/node_modules/.bin/mcpb" pack "$stage/mcpb" "$out/chorus-$platform.mcpb" >/dev/null

# --- MCP Registry entry (the release workflow writes it again over every
# platform's bundles)
"$python" dist/registry/make.py "$version" "$out" "$out/server.json"
"$venv/python" dist/registry/validate.py "$out/server.json"

# --- the container image (Linux): the binary, the CA bundle, a non-root
# user; named ghcr.io/chorus-mcp/chorus:VERSION (CHORUS_IMAGE_REPOSITORY
# changes the name: the release workflow sets its own repository's).
images=
if [ "$os" = linux ]; then
  ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
  [ -f "$ca_bundle" ] || { say "no CA bundle at $ca_bundle (Debian/Ubuntu: ca-certificates; or set CA_BUNDLE)"; exit 1; }
  images=chorus-$version-$platform.oci.tar
  "$python" dist/oci/make_image.py image "$version" "$image_arch" "$bin" "$ca_bundle" \
    "${CHORUS_IMAGE_REPOSITORY:-ghcr.io/chorus-mcp/chorus}" "$out/$images" >/dev/null
fi

# shellcheck disable=SC2086 # $images is one name or none
(cd "$out" && sha256 -- "$archive" *.whl *.tgz *.mcpb $images > SHA256SUMS)
say "wrote $out:"
(cd "$out" && ls -l --block-size=K -- * | awk '{print "  " $5 "\t" $9}') >&2
