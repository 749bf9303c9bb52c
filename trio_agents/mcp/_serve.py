"""One MCP tool per app: the message goes in, the app's final answer comes out."""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import trio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server

from .._errors import ConfigurationError
from .._ids import new_invocation_id
from .._runner import Runner

__all__ = ["mcp_server_for", "serve"]

MCP_USER = "mcp"
"""The user id of the app sessions MCP clients talk to."""

_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def mcp_server_for(runners: Sequence[Runner], *, name: str = "trio-agents") -> MCPServer:
    """An MCP server offering one tool per runner's app, named after the app.

    A call runs one invocation with the ``message`` argument as the user's message and returns
    the text of the app's last final response. Every MCP client session gets its own app
    session (created on its first call); a call the client cancels cancels the run, which is
    sealed as any cancelled run.

    Raises:
        ConfigurationError: no runner, or two apps with one tool name.
    """
    if not runners:
        raise ConfigurationError("mcp_server_for needs at least one runner")
    server: MCPServer = MCPServer(name)
    taken: set[str] = set()
    for runner in runners:
        tool_name = _TOOL_NAME.sub("_", runner.app_name)
        if tool_name in taken:
            raise ConfigurationError(f"two apps would both be the MCP tool {tool_name!r}")
        taken.add(tool_name)
        server.add_tool(
            _app_tool(runner),
            name=tool_name,
            description=runner.agent.description or f"Ask the {runner.app_name} agent.",
        )
    return server


def _app_tool(runner: Runner) -> Any:
    sessions: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def ask(message: str, ctx: Context) -> str:
        """Send ``message`` to the app; get its answer."""
        client = _client_of(ctx)
        session_id = sessions.get(client)
        if session_id is None:
            created = await runner.session_service.create_session(
                app_name=runner.app_name, user_id=MCP_USER, session_id=f"mcp-{new_invocation_id()}"
            )
            session_id = sessions[client] = created.id
        return await _answer(runner, session_id, message)

    return ask


def _client_of(ctx: Context) -> object:
    """What stands for the calling MCP client session (its SDK ``Connection``)."""
    session = ctx.session  # made per request; the connection it wraps lives with the client
    return getattr(session, "_connection", session)


async def _answer(runner: Runner, session_id: str, message: str) -> str:
    answer: str | None = None
    async with runner.run(user_id=MCP_USER, session_id=session_id, new_message=message) as events:
        async for event in events:
            if event.error_code:
                raise ToolError(f"{event.author}: {event.error_code}: {event.error_message}")
            if event.is_final_response() and event.text:
                answer = event.text
    return answer or ""


async def serve(
    runners: Runner | Sequence[Runner],
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "trio-agents",
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the apps of ``runners`` over MCP until the client leaves (stdio) or cancelled.

    ``transport="stdio"`` speaks MCP on this process's stdin and stdout (so nothing else may
    print to stdout); ``"http"`` serves streamable HTTP at ``http://host:port/mcp`` with
    :func:`trio_agents.server.serve` (``task_status`` gets the bound URLs; port 0 picks a free
    port). The runners are entered (``async with runner:``) for the server's lifetime, so their
    toolsets' connections are shared by every call.
    """
    runners = [runners] if isinstance(runners, Runner) else list(runners)
    server = mcp_server_for(runners, name=name)
    if transport not in ("stdio", "http"):
        raise ConfigurationError(f"transport must be 'stdio' or 'http', got {transport!r}")
    async with _entered(runners):
        if transport == "stdio":
            task_status.started([])
            await _serve_stdio(server)
        else:
            await _serve_http(server, host, port, task_status)


class _entered:
    """``async with`` every runner, leaving them in reverse order."""

    def __init__(self, runners: list[Runner]) -> None:
        self._runners = runners
        self._entered: list[Runner] = []

    async def __aenter__(self) -> None:
        for runner in self._runners:
            await runner.__aenter__()
            self._entered.append(runner)

    async def __aexit__(self, *exc_info: object) -> None:
        while self._entered:
            await self._entered.pop().__aexit__(None, None, None)


async def _serve_stdio(server: MCPServer) -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read, write):
        await lowlevel.run(read, write, options)


async def _serve_http(
    server: MCPServer, host: str, port: int, task_status: trio.TaskStatus[list[str]]
) -> None:
    from ..server._serve import serve as serve_asgi

    app = server.streamable_http_app(host=host)
    await serve_asgi(app, host=host, port=port, task_status=task_status)
