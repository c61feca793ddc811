"""The OpenAI Agents SDK's default model (the Responses API) against
chorus's /v1/responses (tests/e2e/web/openai/).

usage: agents_client.py BASE_URL TOKEN

An agent whose model is a chorus pipeline, run whole and streamed. Prints
one JSON object saying what each saw.
"""

import asyncio
import json
import sys

from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

base_url, token = sys.argv[1], sys.argv[2]
# Tracing would upload to OpenAI; nothing leaves this machine.
set_tracing_disabled(True)
set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key=token, max_retries=0), use_for_tracing=False)
agent = Agent(name="asker", instructions="Be brief.", model="ask")
seen = {}



async def main():
    # One event loop for both: the client is bound to the loop it first ran on.
    result = await Runner.run(agent, "Why is the sky blue?")
    seen["whole"] = result.final_output
    result = Runner.run_streamed(agent, "And why are sunsets red?")
    deltas = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
    seen["stream"] = {
        "deltas": "".join(deltas),
        "pieces": len(deltas),
        "final": result.final_output,
    }


asyncio.run(main())
print(json.dumps(seen))
