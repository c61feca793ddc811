"""The Anthropic Python SDK against chorus's Messages API
(tests/e2e/web/anthropic.rs): a message whole, one streamed, a tool
loop (the panel's `tool_use`, the tool run here, its `tool_result` back),
token counting, and the errors its callers catch.

usage: anthropic_client.py BASE_URL TOKEN

Prints one JSON object saying what each saw.
"""

import json
import sys

import anthropic

base_url, token = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base_url, api_key=token, max_retries=0)
seen = {}

whole = client.messages.create(
    model="ask",
    max_tokens=512,
    system="Be brief.",
    messages=[{"role": "user", "content": "Why is the sky blue?"}],
)
seen["whole"] = {"text": whole.content[0].text, "stop": whole.stop_reason, "id": whole.id,
                 "output_tokens": whole.usage.output_tokens}

with client.messages.stream(
    model="ask", max_tokens=512, messages=[{"role": "user", "content": "And sunsets?"}]
) as stream:
    pieces = [text for text in stream.text_stream]
    final = stream.get_final_message()
seen["stream"] = {"text": "".join(pieces), "pieces": len(pieces), "final": final.content[0].text,
                  "stop": final.stop_reason}

tools = [{
    "name": "get_weather",
    "description": "The weather in a city today.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}]
messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
first = client.messages.create(model="ask", max_tokens=512, tools=tools, messages=messages)
uses = [block for block in first.content if block.type == "tool_use"]
messages.append({"role": "assistant", "content": [block.model_dump() for block in first.content]})
messages.append({"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": use.id, "content": f"sunny in {use.input['city']}"}
    for use in uses
]})
with client.messages.stream(model="ask", max_tokens=512, tools=tools, messages=messages) as stream:
    answer = stream.get_final_message()
seen["tools"] = {
    "stop": first.stop_reason,
    "uses": [{"name": u.name, "input": u.input} for u in uses],
    "answer": answer.content[0].text,
}

counted = client.messages.count_tokens(model="ask", messages=[{"role": "user", "content": "x" * 400}])
seen["count"] = counted.input_tokens

try:
    client.messages.create(model="no-such-pipeline", max_tokens=5, messages=[{"role": "user", "content": "q"}])
except anthropic.NotFoundError as e:
    seen["not_found"] = {"status": e.status_code, "type": e.body["error"]["type"]}
try:
    anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0).messages.create(
        model="ask", max_tokens=5, messages=[{"role": "user", "content": "q"}])
except anthropic.AuthenticationError as e:
    seen["wrong_key"] = {"status": e.status_code, "type": e.body["error"]["type"]}

print(json.dumps(seen))
