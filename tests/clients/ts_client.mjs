// Drives `chorus serve` with the official TypeScript SDK
// (@modelcontextprotocol/sdk), whose client checks every structuredContent
// against the tool's outputSchema. Usage: node ts_client.mjs basic|long
// Environment: CHORUS_BIN, CHORUS_CONFIG (and the provider key) from the
// Rust test. Prints one JSON report line; exits non-zero on any failure.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const mode = process.argv[2] ?? "basic";
const transport = new StdioClientTransport({
  command: process.env.CHORUS_BIN,
  args: ["serve"],
  env: process.env,
  stderr: "ignore",
});
const client = new Client({ name: "ts-sdk-test", version: "0" });
await client.connect(transport);
const report = { mode, sdk: "@modelcontextprotocol/sdk" };

const { tools } = await client.listTools();
assert.ok(tools.some((t) => t.name === "ask"), "the ask tool is listed");

if (mode === "basic") {
  const progress = [];
  const result = await client.callTool(
    { name: "ask", arguments: { prompt: "What is 2 + 2?" } },
    undefined,
    { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true },
  );
  assert.equal(result.isError, false);
  assert.equal(result.structuredContent.answer, "merged");
  assert.ok(progress.length >= 3, `progress arrived: ${JSON.stringify(progress)}`);
  assert.ok(progress.every((p) => p.total === 100));
  report.progress = progress.length;

  // A failure still carries structuredContent that fits the schema.
  const bad = await client.callTool({ name: "ask", arguments: { prompt: "q", nope: 1 } });
  assert.equal(bad.isError, true);
  assert.equal(bad.structuredContent.error.kind, "invalid-arguments");

  const runId = result.structuredContent.run_id;
  const resource = await client.readResource({ uri: `chorus://runs/${runId}` });
  assert.equal(JSON.parse(resource.contents[0].text).answer, "merged");

  // Cancel: abort a call that waits on a model that never answers.
  const abort = new AbortController();
  const stuck = client.callTool({ name: "stuck", arguments: { prompt: "q" } }, undefined, {
    signal: abort.signal,
  });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  abort.abort("the user gave up");
  await assert.rejects(stuck);
  report.cancelled = true;

  // The server carries on.
  const after = await client.callTool({ name: "ask", arguments: { prompt: "again" } });
  assert.equal(after.isError, false);
} else {
  // A run longer than the SDK's 60 s request timeout: the documented setting
  // resetTimeoutOnProgress keeps it alive on chorus's heartbeats.
  const started = Date.now();
  let progress = 0;
  const result = await client.callTool(
    { name: "slow", arguments: { prompt: "Take your time." } },
    undefined,
    { onprogress: () => progress++, resetTimeoutOnProgress: true },
  );
  assert.equal(result.isError, false, JSON.stringify(result));
  assert.equal(result.structuredContent.answer, "merged");
  report.seconds = (Date.now() - started) / 1000;
  report.progress = progress;
}

await client.close();
console.log(JSON.stringify(report));
