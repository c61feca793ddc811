"""Agents whose model is a chorus pipeline, calling tools through
/v1/chat/completions (tests/e2e/web/openai/clients.rs): a hand-written
loop with the OpenAI SDK (the call comes back, the function runs here,
its result goes back, the answer follows), an Agents SDK agent on its
chat-completions model with a function tool and an `output_type`, and one
on its default model (the Responses API) with the same tool.

usage: tools_client.py BASE_URL TOKEN

Prints one JSON object saying what each saw.
"""

import asyncio
import json
import sys

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel

base_url, token = sys.argv[1], sys.argv[2]
seen = {"ran": []}


def weather(city: str) -> str:
    seen["ran"].append(city)
    return f"sunny in {city}, 21 C"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

client = OpenAI(base_url=base_url, api_key=token, max_retries=0)
messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
first = client.chat.completions.create(model="ask", messages=messages, tools=[WEATHER_TOOL])
choice = first.choices[0]
messages.append(choice.message.model_dump(exclude_none=True))
for call in choice.message.tool_calls or []:
    arguments = json.loads(call.function.arguments)
    messages.append({"role": "tool", "tool_call_id": call.id, "content": weather(**arguments)})
final = client.chat.completions.create(model="ask", messages=messages, tools=[WEATHER_TOOL])
seen["loop"] = {
    "first_finish": choice.finish_reason,
    "called": [c.function.name for c in choice.message.tool_calls or []],
    "answer": final.choices[0].message.content,
    "final_finish": final.choices[0].finish_reason,
}


class Forecast(BaseModel):
    city: str
    summary: str


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city today."""
    return weather(city)


# Tracing would upload to OpenAI; nothing leaves this machine.
set_tracing_disabled(True)
model = OpenAIChatCompletionsModel(
    model="ask", openai_client=AsyncOpenAI(base_url=base_url, api_key=token, max_retries=0)
)
agent = Agent(
    name="forecaster",
    instructions="Use the tool, then answer.",
    model=model,
    tools=[get_weather],
    output_type=Forecast,
)


# The Agents SDK's default model: the Responses API.
set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key=token, max_retries=0), use_for_tracing=False)
responder = Agent(name="responder", instructions="Use the tool.", model="ask", tools=[get_weather])


async def main():
    result = await Runner.run(agent, "What is the weather in Bergen?")
    output = result.final_output
    seen["agent"] = {"city": output.city, "summary": output.summary, "type": type(output).__name__}
    result = await Runner.run(responder, "What is the weather in Tromso?")
    seen["responses"] = result.final_output


asyncio.run(main())
print(json.dumps(seen))
