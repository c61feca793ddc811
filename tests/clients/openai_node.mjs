// The official OpenAI Node SDK against chorus's /v1 (tests/e2e/web/openai/).
// usage: node openai_node.mjs BASE_URL TOKEN
// A chat completion, a streamed one, the model list and a refusal; prints
// one JSON object saying what each saw.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const seen = {};

seen.models = [];
for await (const model of client.models.list()) seen.models.push(model.id);

const reply = await client.chat.completions.create({
  model: "ask",
  messages: [{ role: "user", content: "Why is the sky blue?" }],
});
seen.whole = {
  id: reply.id,
  content: reply.choices[0].message.content,
  total_tokens: reply.usage.total_tokens,
  kind: reply.chorus?.kind,
};

const stream = await client.chat.completions.create({
  model: "ask",
  messages: [{ role: "user", content: "Stream it." }],
  stream: true,
  stream_options: { include_usage: true },
});
let content = "";
let contentPieces = 0;
let reasoning = "";
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage.total_tokens;
  for (const choice of chunk.choices) {
    if (choice.delta.content) contentPieces += 1;
    content += choice.delta.content ?? "";
    reasoning += choice.delta.reasoning ?? "";
  }
}
seen.stream = { content, content_pieces: contentPieces, reasoning, usage };

try {
  await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "q" }] });
  seen.unknown_model = "answered";
} catch (e) {
  seen.unknown_model = { status: e.status, code: e.code, name: e.constructor.name };
}

console.log(JSON.stringify(seen));
