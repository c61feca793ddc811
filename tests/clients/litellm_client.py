"""LiteLLM's SDK as a client of chorus's /v1 (tests/e2e/web/openai/).

usage: litellm_client.py BASE_URL TOKEN

`model="openai/ask"` with `api_base`: whole, streamed and async. Prints one
JSON object saying what each saw.
"""

import asyncio
import json
import sys

import litellm

base_url, token = sys.argv[1], sys.argv[2]
messages = [{"role": "user", "content": "Why is the sky blue?"}]
seen = {}

reply = litellm.completion(model="openai/ask", api_base=base_url, api_key=token, messages=messages)
seen["whole"] = {
    "content": reply.choices[0].message.content,
    "total_tokens": reply.usage.total_tokens,
}

content, reasoning = [], []
for chunk in litellm.completion(
    model="openai/ask", api_base=base_url, api_key=token, messages=messages, stream=True
):
    delta = chunk.choices[0].delta
    if delta.content:
        content.append(delta.content)
    if getattr(delta, "reasoning_content", None):
        reasoning.append(delta.reasoning_content)
seen["stream"] = {"content": "".join(content), "reasoning": "".join(reasoning)}


async def run_async():
    reply = await litellm.acompletion(
        model="openai/ask", api_base=base_url, api_key=token, messages=messages
    )
    return reply.choices[0].message.content


seen["async"] = asyncio.run(run_async())
print(json.dumps(seen))
