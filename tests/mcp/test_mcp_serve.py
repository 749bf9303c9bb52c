"""Apps served over MCP, called with the mcp SDK's own client."""

from __future__ import annotations

import functools
import os
import sys

import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from trio_agents import ConfigurationError, InMemoryRunner, LlmAgent
from trio_agents.mcp import mcp_server_for, serve
from trio_agents.models import LlmRequest
from trio_agents.testing import ScriptedModel
from trio_agents.tools.mcp import McpToolset, StreamableHTTPConnectionParams

from .helpers import ROOT, app, call, child_pids, responses, run_turn

GUARD = 60
APP_DIR = str(ROOT / "tests" / "mcp" / "apps")
SDK_SSE_GENERATORS = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning", "ignore:Async generator 'httpx2"
)


async def _ask(session: ClientSession, message: str) -> str:
    result = await session.call_tool("mcp_echo", {"message": message})
    assert not result.is_error, result
    (block,) = result.content
    return block.text  # type: ignore[union-attr]


async def test_stdio_mcp_server_with_the_sdk_client() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "trio_agents", "mcp-server", APP_DIR],
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT)},
    )
    with trio.fail_after(GUARD):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            by_name = {tool.name: tool for tool in tools}
            assert "mcp_echo" in by_name
            assert by_name["mcp_echo"].description == "Echoes the message back."
            assert by_name["mcp_echo"].input_schema["required"] == ["message"]
            assert await _ask(session, "hi") == "echo: hi (turn 1)"
            assert await _ask(session, "again") == "echo: again (turn 2)"
            # an app given as an App runs whole: its plugin answers for its agent
            plugged = await session.call_tool("mcp_plugged", {"message": "hi"})
            assert not plugged.is_error, plugged
            assert [block.text for block in plugged.content] == [  # type: ignore[union-attr]
                "answered by the plugin stamp"
            ]
        async with stdio_client(params) as (read, write), ClientSession(read, write) as other:
            await other.initialize()
            assert await _ask(other, "new client") == "echo: new client (turn 1)"
    assert child_pids() == set()


@SDK_SSE_GENERATORS
async def test_http_mcp_server_command_with_the_sdk_client() -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_agents", "mcp-server", APP_DIR, "--http", "--port", "0"],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=-1,
        stdout=-3,
    )
    try:
        assert process.stderr is not None
        seen = b""
        with trio.fail_after(GUARD):
            while b"/mcp" not in seen:
                chunk = await process.stderr.receive_some()
                assert chunk, seen
                seen += chunk
            url = seen.decode().split(" at ", 1)[1].split()[0]
            assert url.startswith("http://127.0.0.1:")
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert await _ask(session, "over http") == "echo: over http (turn 1)"
                assert await _ask(session, "twice") == "echo: twice (turn 2)"
    finally:
        process.terminate()
        with trio.CancelScope(shield=True):
            await process.wait()


@SDK_SSE_GENERATORS
async def test_client_cancellation_cancels_the_run() -> None:
    started, cancelled = trio.Event(), trio.Event()

    async def answer(request: LlmRequest) -> str:
        text = request.contents[-1].parts[0].text or ""
        if text == "wait":
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()
        return f"ok: {text}"

    runner = InMemoryRunner(LlmAgent(name="waiter", model=ScriptedModel(answer)), app_name="waiter")
    async with trio.open_nursery() as nursery:
        (url,) = await nursery.start(functools.partial(serve, runner, transport="http", port=0))
        with trio.fail_after(GUARD):
            async with (
                streamable_http_client(f"{url}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                with trio.CancelScope() as scope:
                    nursery.start_soon(_cancel_when, started, scope)
                    await session.call_tool("waiter", {"message": "wait"})
                assert scope.cancelled_caught
                await cancelled.wait()  # the server-side run was cancelled
                result = await session.call_tool("waiter", {"message": "after"})
                assert result.content[0].text == "ok: after"  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()
    sessions = await runner.session_service.list_sessions(app_name="waiter", user_id="mcp")
    (stored,) = sessions
    full = await runner.session_service.get_session(
        app_name="waiter", user_id="mcp", session_id=stored.id
    )
    assert full is not None
    texts = [event.text for event in full.events if event.author == "waiter"]
    assert texts == ["ok: after"]  # the cancelled run left no answer


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def test_server_needs_distinct_apps() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="at least one"):
        mcp_server_for([])
    with pytest.raises(ConfigurationError, match="a_b"):
        mcp_server_for(
            [InMemoryRunner(agent, app_name="a b"), InMemoryRunner(agent, app_name="a_b")]
        )


@SDK_SSE_GENERATORS
async def test_an_agent_calls_a_served_app_through_its_mcp_toolset() -> None:
    """Both directions at once: an app served over MCP, used by another agent as a toolset."""
    served = InMemoryRunner(
        LlmAgent(
            name="echo",
            model=ScriptedModel(lambda request: f"echo: {request.contents[-1].parts[0].text}"),
        ),
        app_name="echo",
    )
    async with trio.open_nursery() as nursery:
        (url,) = await nursery.start(functools.partial(serve, served, transport="http", port=0))
        toolset = McpToolset(
            connection_params=StreamableHTTPConnectionParams(url=f"{url}/mcp", timeout=30)
        )
        runner, model = app(toolset, [call("echo", message="ping"), "pong"])
        with trio.fail_after(GUARD):
            events = await run_turn(runner)
        (response,) = responses(events)
        assert response["content"][0]["text"] == "echo: ping"
        assert [d.name for d in model.requests[0].tools] == ["echo"]
        nursery.cancel_scope.cancel()
