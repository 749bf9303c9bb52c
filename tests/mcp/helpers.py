"""Shared pieces of the MCP tests: servers to run, child processes to watch, a tiny app."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import trio.testing

from trio_agents import InMemoryRunner, LlmAgent
from trio_agents._content import Content, Part
from trio_agents.models import LlmResponse
from trio_agents.testing import ScriptedModel
from trio_agents.tools.mcp import McpToolset, StdioConnectionParams, StdioServerParameters

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


def sdk_params(mode: str = "normal", timeout: float = 30.0) -> StdioConnectionParams:
    """The SDK-written test server over stdio."""
    return StdioConnectionParams(
        server_params=StdioServerParameters(
            command=sys.executable, args=[str(HERE / "sdk_server.py"), mode]
        ),
        timeout=timeout,
    )


def node_params(script: Path, *args: str, timeout: float = 30.0) -> StdioConnectionParams:
    return StdioConnectionParams(
        server_params=StdioServerParameters(command="node", args=[str(script), *args]),
        timeout=timeout,
    )


def child_pids() -> set[int]:
    """The live (not zombie) processes whose parent is this one."""
    me = os.getpid()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def call(name: str, **args: Any) -> LlmResponse:
    """A model turn that calls one tool."""
    return LlmResponse(
        content=Content(role="model", parts=[Part.from_function_call(name, args)]),
        finish_reason="STOP",
    )


def app(toolset: McpToolset, script: list[Any]) -> tuple[InMemoryRunner, ScriptedModel]:
    model = ScriptedModel(script)
    agent = LlmAgent(name="assistant", model=model, tools=[toolset])
    return InMemoryRunner(agent, app_name="mcp-tests"), model


async def run_turn(runner: InMemoryRunner, text: str = "go", session_id: str = "s1") -> list[Any]:
    """Run one turn (creating the session if needed); return its events."""
    service = runner.session_service
    if (
        await service.get_session(app_name=runner.app_name, user_id="u", session_id=session_id)
        is None
    ):
        await service.create_session(app_name=runner.app_name, user_id="u", session_id=session_id)
    async with runner.run(user_id="u", session_id=session_id, new_message=text) as events:
        return [event async for event in events]


async def cancel_once_calling(runner: InMemoryRunner, session_id: str = "s") -> list[int]:
    """Run a turn and cancel it once its first tool call is in flight; the child processes
    seen then."""
    await runner.session_service.create_session(
        app_name=runner.app_name, user_id="u", session_id=session_id
    )
    seen: list[int] = []
    async with runner.run(user_id="u", session_id=session_id, new_message="go") as events:
        async for event in events:
            if event.get_function_calls():
                await trio.testing.wait_all_tasks_blocked()
                seen = sorted(child_pids())
                events.cancel()
    return seen


def responses(events: list[Any]) -> list[dict[str, Any]]:
    """The function responses of ``events``, in order."""
    return [
        dict(part.function_response.response)
        for event in events
        if event.content is not None
        for part in event.content.parts
        if part.function_response is not None
    ]
