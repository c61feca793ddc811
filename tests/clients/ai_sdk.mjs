// The Vercel AI SDK against chorus's /v1/chat/completions
// (tests/e2e/web/openai/clients.rs): `generateText` with a tool it runs
// (two steps: the panel's call, then its answer), and `generateObject`
// with a zod schema (structured outputs).
//
// usage: node ai_sdk.mjs BASE_URL TOKEN — prints one JSON object.
import { generateObject, generateText, stepCountIs, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";

const [baseURL, apiKey] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey });
const model = openai.chat("ask");
const seen = { ran: [] };

const text = await generateText({
  model,
  prompt: "What is the weather in Tromso?",
  tools: {
    get_weather: tool({
      description: "The weather in a city today.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        seen.ran.push(city);
        return `sunny in ${city}`;
      },
    }),
  },
  stopWhen: stepCountIs(3),
  maxRetries: 0,
});
seen.text = { text: text.text, steps: text.steps.length };

const object = await generateObject({
  model,
  schema: z.object({ city: z.string(), days: z.array(z.number()) }),
  prompt: "Which days will be dry in Tromso?",
  maxRetries: 0,
});
seen.object = object.object;
console.log(JSON.stringify(seen));
