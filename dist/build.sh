#!/usr/bin/env bash
# Builds every package of chorus into target/dist/ from one static binary:
#   chorus-VERSION-x86_64-unknown-linux-musl.tar.gz (+ .sha256)  the binary, README, licenses
#   chorus_mcp-VERSION-py3-none-....whl   `pip install` / `uvx chorus-mcp` (python/make_wheel.py)
#   chorus-mcp-linux-x64-VERSION.tgz      npm platform package holding the binary
#   chorus-mcp-VERSION.tgz                npm wrapper `chorus-mcp` (`npx -y chorus-mcp`)
#   chorus.mcpb                           MCP Bundle, validated and packed with @anthropic-ai/mcpb
#   server.json                           MCP Registry entry, validated against registry/server.schema.json
#   SHA256SUMS                            every artifact's checksum
# The binary is `cargo build --release --target x86_64-unknown-linux-musl`:
# built once, reused by every package (cargo does nothing when it is fresh).
# Needs rustup's musl target and Debian's musl-tools (the C parts: SQLite,
# ring); node/npm and python3 with venv. Reaches only npm and PyPI, for the
# pinned tools in dist/tools/, installed into target/tmp/dist-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=x86_64-unknown-linux-musl
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
if ! "$tools/venv/bin/python" -c 'import jsonschema' 2>/dev/null; then
  say "installing jsonschema (dist/tools/requirements.txt)"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check -r "$pins/requirements.txt"
fi

# --- the one binary
say "cargo build --release --target $target"
cargo build --release --locked --target "$target" -p chorus
bin=$root/target/$target/release/chorus
case "$(ldd "$bin" 2>&1)" in
  *"statically linked"* | *"not a dynamic executable"*) ;;
  *) say "$bin is not static:"; ldd "$bin" >&2; exit 1 ;;
esac
"$bin" --version >/dev/null

rm -rf "$out" "$stage"
mkdir -p "$out" "$stage"

# --- tarball
name=chorus-$version-$target
mkdir -p "$stage/$name"
cp "$bin" README.md LICENSE-MIT LICENSE-APACHE "$stage/$name/"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -C "$stage" -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

# --- Python wheel
python3 dist/python/make_wheel.py "$version" "$bin" README.md "$out" >/dev/null

# --- npm: the platform package and the wrapper
set_version() { # FILE: every "0.0.0" placeholder (own and dependency versions) -> $version
  node -e '
    const fs = require("fs"), [file, v] = process.argv.slice(1), p = JSON.parse(fs.readFileSync(file));
    p.version = v;
    for (const d of Object.keys(p.optionalDependencies || {})) p.optionalDependencies[d] = v;
    fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");' "$1" "$version"
}
for pkg in linux-x64 chorus-mcp; do
  cp -r "dist/npm/$pkg" "$stage/npm-$pkg"
  set_version "$stage/npm-$pkg/package.json"
done
mkdir -p "$stage/npm-linux-x64/bin"
cp "$bin" "$stage/npm-linux-x64/bin/chorus"
cp README.md "$stage/npm-chorus-mcp/"
for pkg in linux-x64 chorus-mcp; do
  (cd "$stage/npm-$pkg" && npm pack --silent --pack-destination "$out" >/dev/null)
done

# --- MCP Bundle
mkdir -p "$stage/mcpb/server"
cp dist/mcpb/manifest.json README.md LICENSE-MIT LICENSE-APACHE "$stage/mcpb/"
cp "$bin" "$stage/mcpb/server/chorus"
set_version "$stage/mcpb/manifest.json"
"$tools/node_modules/.bin/mcpb" validate "$stage/mcpb/manifest.json" >/dev/null
"$tools/node_modules/.bin/mcpb" pack "$stage/mcpb" "$out/chorus.mcpb" >/dev/null

# --- MCP Registry entry
mcpb_sha=$(sha256sum "$out/chorus.mcpb" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@MCPB_SHA256@/$mcpb_sha/g" dist/registry/server.json > "$out/server.json"
"$tools/venv/bin/python" dist/registry/validate.py "$out/server.json"

(cd "$out" && sha256sum -- *.tar.gz *.whl *.tgz chorus.mcpb > SHA256SUMS)
say "wrote $out:"
(cd "$out" && ls -l --block-size=K -- * | awk '{print "  " $5 "\t" $9}') >&2
