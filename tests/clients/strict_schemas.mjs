// Lists chorus's tools with the official TypeScript SDK and compiles every
// tool's inputSchema and outputSchema with Ajv in strict mode — the
// validator MCP clients run (Gemini CLI warns on every start about what
// strict mode refuses, e.g. a `type` list). Draft-07 (Ajv's default) and
// 2020-12 (MCP's default dialect). Environment: CHORUS_BIN, CHORUS_CONFIG
// (and the provider key) from the Rust test. Prints one JSON report line;
// exits non-zero on any error or warning, naming the tool and schema.
import AjvModule from "ajv";
import Ajv2020Module from "ajv/dist/2020.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const Ajv = AjvModule.default ?? AjvModule;
const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;

const transport = new StdioClientTransport({
  command: process.env.CHORUS_BIN,
  args: ["serve"],
  env: process.env,
  stderr: "ignore",
});
const client = new Client({ name: "strict-schemas", version: "0" });
await client.connect(transport);
const { tools } = await client.listTools();
await client.close();

const problems = [];
let compiled = 0;
for (const [dialect, Validator] of [["draft-07", Ajv], ["2020-12", Ajv2020]]) {
  for (const tool of tools) {
    for (const which of ["inputSchema", "outputSchema"]) {
      const schema = tool[which];
      if (schema === undefined) continue;
      const where = `${tool.name} ${which} (${dialect})`;
      const said = (level) => (...args) => problems.push(`${where}: ${level}: ${args.join(" ")}`);
      const ajv = new Validator({
        strict: true,
        logger: { log: () => {}, warn: said("warning"), error: said("error") },
      });
      try {
        ajv.compile(schema);
        compiled += 1;
      } catch (error) {
        problems.push(`${where}: ${error.message}`);
      }
    }
  }
}

if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log(JSON.stringify({ tools: tools.length, compiled }));
