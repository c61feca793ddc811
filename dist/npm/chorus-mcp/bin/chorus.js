#!/usr/bin/env node
// Starts the chorus binary from this platform's package (one of the
// optionalDependencies, of which npm installs only the one matching the
// machine: the esbuild/biome pattern). stdin, stdout and stderr are the
// binary's own, so an MCP client talks to chorus directly; signals are
// passed on and chorus's exit status becomes ours.
"use strict";
const { spawn } = require("node:child_process");

// One per target dist/build.sh packages (the release workflow builds each).
const PACKAGES = {
  "linux x64": "@chorus-mcp/linux-x64",
  "linux arm64": "@chorus-mcp/linux-arm64",
  "darwin arm64": "@chorus-mcp/darwin-arm64",
  "darwin x64": "@chorus-mcp/darwin-x64",
  "win32 x64": "@chorus-mcp/win32-x64",
};

function fail(message) {
  process.stderr.write(`chorus-mcp: ${message}\n`);
  process.exit(1);
}

const platform = `${process.platform} ${process.arch}`;
const pkg = PACKAGES[platform];
if (!pkg) {
  fail(
    `no prebuilt chorus for ${platform} yet (there is one for: ${Object.keys(PACKAGES).join(", ")}). ` +
      "Install from source instead: https://github.com/chorus-mcp/chorus#build-from-source",
  );
}
const exe = process.platform === "win32" ? "chorus.exe" : "chorus";
let binary;
try {
  binary = require.resolve(`${pkg}/bin/${exe}`);
} catch {
  fail(
    `the package ${pkg}, which holds the chorus binary, is not installed. ` +
      "It is an optional dependency: install again without --no-optional / --omit=optional.",
  );
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => fail(`cannot start ${binary}: ${error.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
