"""Starts an installed chorus the way an MCP client does and makes one `ask`
with the official Python SDK over stdio.

Usage: python one_ask.py COMMAND [ARG...]

The server gets this process's environment (the Rust test sets the mock
provider's config and key). Prints one JSON report line: the tools listed
and the call's structured result; exits non-zero on any failure.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main(command: str, args: list[str]) -> dict:
    server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    with anyio.fail_after(120):
        async with Client(server, mode="legacy") as client:
            tools = await client.list_tools()
            result = await client.call_tool("ask", {"prompt": "What is 2 + 2?"})
    assert not result.is_error, result
    return {"tools": sorted(t.name for t in tools.tools), "result": result.structured_content}


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], sys.argv[2:])))
