"""Drives `chorus serve` with the official Python SDK (PyPI `mcp` 2.x).

Usage: python python_client.py basic|long|image legacy|auto

- image: sends an MCP image content block (a 1x1 GIF) as an attachment
  argument of `ask` and reports the answer.

- legacy: the 2025-11-25 initialize handshake; calls are answered in place,
  with progress notifications.
- auto: the SDK negotiates 2026-07-28 (server/discover). The tasks extension
  (io.modelcontextprotocol/tasks) is declared through the SDK's extension
  interface, so a tools/call comes back as a task, which this client polls
  with tasks/get until it is done.

Environment: CHORUS_BIN, CHORUS_CONFIG (and the provider key) from the Rust
test: the client starts `chorus serve` itself and talks over stdio. With
CHORUS_URL (and CHORUS_TOKEN) it talks instead to a `chorus serve --http`
the test started, through the SDK's Streamable HTTP client, sending the
token as `Authorization: Bearer`; it first checks that a client without the
token is turned away (401). Prints one JSON report line; exits non-zero on
any failure.
"""

import json
import os
import sys
import time
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ImageContent, Request, RequestParams, Result
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class TaskCreated(Result):
    """A tools/call answered with a task (SEP-2663)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class TaskState(Result):
    """What tasks/get says."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class Tasks(ClientExtension):
    """The tasks extension, client side: poll a task to its end."""

    identifier = TASKS

    def __init__(self) -> None:
        self.statuses: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=self.resolve)]

    async def resolve(self, created: TaskCreated, ctx: ClaimContext) -> CallToolResult:
        interval = (created.poll_interval_ms or 1000) / 1000
        while True:
            state = await ctx.session.send_request(
                GetTask(params=TaskParams(taskId=created.task_id)), TaskState
            )
            if state.status_message:
                self.statuses.append(state.status_message)
            if state.status == "completed":
                return CallToolResult.model_validate(state.result)
            if state.status in ("failed", "cancelled"):
                raise RuntimeError(f"task {state.status}: {state.error or state.status_message}")
            await anyio.sleep(interval)


def http(token: str | None) -> Any:
    """The SDK's Streamable HTTP transport to CHORUS_URL, with `token` as a
    bearer token when given. No read timeout: a long call's stream may be
    quiet for a while (progress arrives every 10 s)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None))
    return streamable_http_client(os.environ["CHORUS_URL"], http_client=client)


def server() -> Any:
    if "CHORUS_URL" in os.environ:
        return http(os.environ["CHORUS_TOKEN"])
    env = {k: v for k, v in os.environ.items()}
    return StdioServerParameters(command=os.environ["CHORUS_BIN"], args=["serve"], env=env)


def chain(error: BaseException) -> str:
    """An exception with its causes and group members, as text."""
    parts = [repr(error)]
    if isinstance(error, BaseExceptionGroup):
        parts += [chain(e) for e in error.exceptions]
    for linked in (error.__cause__, error.__context__):
        if linked is not None:
            parts.append(chain(linked))
    return " / ".join(parts)


async def refused_without_token(mode: str) -> str:
    """Connects without the token; the server must turn the client away
    (401), with a message the SDK shows saying what to send. Returns what
    the SDK raised."""
    try:
        with anyio.fail_after(30):
            async with Client(http(None), mode=mode) as client:
                await client.list_tools()
    except Exception as error:  # the SDK's own error types vary by mode
        text = chain(error)
        assert "Authorization: Bearer" in text, text
        return text
    raise AssertionError("a client without the token was let in")


async def main(scenario: str, mode: str) -> dict[str, Any]:
    tasks = Tasks()
    report: dict[str, Any] = {"scenario": scenario, "mode": mode}
    if "CHORUS_URL" in os.environ:
        report["transport"] = "http"
        report["refused_without_token"] = (await refused_without_token(mode))[:300]
    with open(os.devnull, "w") as quiet:
        client = Client(server(), mode=mode, extensions=[tasks] if mode != "legacy" else None)
        # The server's stderr is the Rust test's to keep, not ours to print.
        async with client:
            tools = await client.list_tools()
            assert any(t.name == "ask" for t in tools.tools), tools
            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            if scenario == "image":
                gif = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="
                block = ImageContent(type="image", data=gif, mime_type="image/gif")
                result = await client.call_tool(
                    "ask",
                    {"prompt": "What shape is this?", "attachments": [block.model_dump(by_alias=True, exclude_none=True)]},
                )
                assert not result.is_error, result
                report["answer"] = result.structured_content["answer"]
                return report
            tool = "ask" if scenario == "basic" else "slow"
            started = time.monotonic()
            result = await client.call_tool(
                tool, {"prompt": "What is 2 + 2?"}, progress_callback=on_progress
            )
            report["seconds"] = round(time.monotonic() - started, 1)
            assert not result.is_error, result
            structured = result.structured_content
            assert structured["answer"] == "merged", structured
            report["progress"] = len(progress)
            report["task_statuses"] = len(tasks.statuses)
            if mode == "legacy":
                # Below the total, every one: the response says the call is done.
                assert progress and all(t == 100 and v < 100 for v, t, _ in progress), progress
            else:
                assert tasks.statuses, "the call went through a task"
                assert tasks.statuses[-1].startswith("Synthesis of"), tasks.statuses
                if scenario == "long":
                    assert any("waiting on" in s for s in tasks.statuses), tasks.statuses

            if scenario == "basic":
                resource = await client.read_resource(f"chorus://runs/{structured['run_id']}")
                assert json.loads(resource.contents[0].text)["answer"] == "merged"
                if mode == "legacy":
                    # Abandoning a call cancels it (notifications/cancelled).
                    with anyio.move_on_after(1.5):
                        await client.call_tool("stuck", {"prompt": "q"})
                    report["cancelled"] = True
                    again = await client.call_tool("ask", {"prompt": "again"})
                    assert not again.is_error
    return report


if __name__ == "__main__":
    scenario, mode = sys.argv[1], sys.argv[2]
    print(json.dumps(anyio.run(main, scenario, mode)))
