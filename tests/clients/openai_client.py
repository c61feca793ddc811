"""The official OpenAI Python SDK against chorus's /v1 (tests/e2e/web/openai/).

usage: openai_client.py BASE_URL TOKEN

Sync, async and streamed chat completions, the model list, the Responses
API, and two refusals the SDK turns into its own exceptions. Prints one
JSON object saying what each part saw; the Rust test checks it.
"""

import asyncio
import json
import sys

import openai

base_url, token = sys.argv[1], sys.argv[2]
seen = {}

client = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0)
seen["models"] = [m.id for m in client.models.list()]

sync = client.chat.completions.create(
    model="ask",
    messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why is the sky blue?"},
    ],
)
seen["sync"] = {
    "id": sync.id,
    "content": sync.choices[0].message.content,
    "finish_reason": sync.choices[0].finish_reason,
    "total_tokens": sync.usage.total_tokens,
    "kind": (sync.model_extra or {}).get("chorus", {}).get("kind"),
}


async def run_async():
    async with openai.AsyncOpenAI(base_url=base_url, api_key=token, max_retries=0) as aclient:
        reply = await aclient.chat.completions.create(
            model="chorus/ask", messages=[{"role": "user", "content": "Async?"}]
        )
        return reply.choices[0].message.content


seen["async"] = asyncio.run(run_async())

content, reasoning, usage, chunks = [], [], None, 0
stream = client.chat.completions.create(
    model="ask",
    messages=[{"role": "user", "content": "Stream it."}],
    stream=True,
    stream_options={"include_usage": True},
)
for chunk in stream:
    chunks += 1
    if chunk.usage is not None:
        usage = chunk.usage.total_tokens
    for choice in chunk.choices:
        if choice.delta.content:
            content.append(choice.delta.content)
        extra = choice.delta.model_extra or {}
        if extra.get("reasoning"):
            reasoning.append(extra["reasoning"])
seen["stream"] = {
    "content": "".join(content),
    "content_pieces": len(content),
    "reasoning": "".join(reasoning),
    "usage": usage,
    "chunks": chunks,
}

try:
    client.chat.completions.create(model="no-such-pipeline", messages=[{"role": "user", "content": "q"}])
    seen["unknown_model"] = "answered"
except openai.NotFoundError as e:
    seen["unknown_model"] = {"status": e.status_code, "code": e.code}

try:
    client.chat.completions.create(model="ask", n=2, messages=[{"role": "user", "content": "q"}])
    seen["n2"] = "answered"
except openai.BadRequestError as e:
    seen["n2"] = {"status": e.status_code, "param": e.param}

try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    seen["wrong_token"] = "answered"
except openai.AuthenticationError as e:
    seen["wrong_token"] = {"status": e.status_code}

response = client.responses.create(model="ask", input="Responses API?", instructions="Be brief.")
seen["responses"] = {"text": response.output_text, "status": response.status}

text = []
with client.responses.stream(model="ask", input="Streamed responses?") as events:
    for event in events:
        if event.type == "response.output_text.delta":
            text.append(event.delta)
    final = events.get_final_response()
seen["responses_stream"] = {"text": "".join(text), "final": final.output_text}

print(json.dumps(seen))
