"""Agent frameworks whose model is a chorus pipeline, through
/v1/chat/completions (tests/e2e/web/openai/clients.rs): LangChain's
`bind_tools` and `with_structured_output`, and a pydantic-ai agent with
a tool and an output type (which pydantic-ai asks for as a
`final_result` tool call).

usage: frameworks_client.py BASE_URL TOKEN

Prints one JSON object saying what each saw.
"""

import json
import sys

from langchain_openai import ChatOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

base_url, token = sys.argv[1], sys.argv[2]
seen = {"ran": []}


class Weather(BaseModel):
    city: str
    days: list[int]


def get_weather(city: str) -> str:
    """The weather in a city today."""
    seen["ran"].append(city)
    return f"sunny in {city}"


chat = ChatOpenAI(model="ask", base_url=base_url, api_key=token, max_retries=0)
called = chat.bind_tools([get_weather]).invoke("What is the weather in Oslo?")
seen["langchain_tools"] = [{"name": c["name"], "args": c["args"]} for c in called.tool_calls]
parsed = chat.with_structured_output(Weather).invoke("Which days will be dry in Oslo?")
seen["langchain_structured"] = {"city": parsed.city, "days": parsed.days, "type": type(parsed).__name__}

model = OpenAIChatModel("ask", provider=OpenAIProvider(base_url=base_url, api_key=token))
agent = Agent(model, output_type=Weather, tools=[get_weather])
result = agent.run_sync("Which days will be dry in Bergen?")
seen["pydantic_ai"] = {"city": result.output.city, "days": result.output.days,
                       "type": type(result.output).__name__}

print(json.dumps(seen))
