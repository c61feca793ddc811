"""Structured outputs through chorus's /v1 with the clients that ask for
them (tests/e2e/web/openai/structured.rs): the OpenAI SDK's
`chat.completions.parse` with a pydantic model, and an Agents SDK agent
with an `output_type` (the Responses API's `text.format`).

usage: structured_client.py BASE_URL TOKEN

Prints one JSON object saying what each parsed.
"""

import asyncio
import json
import sys

from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel

base_url, token = sys.argv[1], sys.argv[2]


class Weather(BaseModel):
    city: str
    days: list[int]


seen = {}

client = OpenAI(base_url=base_url, api_key=token, max_retries=0)
completion = client.chat.completions.parse(
    model="ask",
    messages=[{"role": "user", "content": "Which days will be dry in Oslo?"}],
    response_format=Weather,
)
parsed = completion.choices[0].message.parsed
seen["parse"] = {"city": parsed.city, "days": parsed.days, "type": type(parsed).__name__}

# Tracing would upload to OpenAI; nothing leaves this machine.
set_tracing_disabled(True)
set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key=token, max_retries=0), use_for_tracing=False)
agent = Agent(name="forecaster", instructions="Be brief.", model="ask", output_type=Weather)


async def main():
    result = await Runner.run(agent, "Which days will be dry in Bergen?")
    output = result.final_output
    seen["agent"] = {"city": output.city, "days": output.days, "type": type(output).__name__}


asyncio.run(main())
print(json.dumps(seen))
