"""One MCP client session, held open by a task of its own inside a nursery someone owns.

The ``mcp`` SDK's transports and ``ClientSession`` run anyio task groups that must be entered
and left by one task. :meth:`McpConnection.hold` is that task: it opens the transport and the
session, reports them started, and keeps them until :meth:`McpConnection.stop` (or a failure)
ends it; leaving closes the session and stops the server's process (the SDK's shutdown is
shielded and bounded). Requests run in their callers' tasks, each under the server's deadline.

A connection that fails (the server exits, closes the stream, sends what is not JSON-RPC)
records a :class:`~trio_agents.McpServerError`, cancels the requests in flight with it and
stops; its toolset opens a new one at the next use.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Awaitable, Callable
from typing import IO, Any, TextIO, TypeVar, cast

import httpx2
import mcp_types
import trio
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..._errors import McpServerError
from ._params import (
    ConnectionParams,
    SseConnectionParams,
    StdioConnectionParams,
    server_label,
)

__all__: list[str] = []  # the toolset's own machinery

T = TypeVar("T")
STDERR_TAIL = 2000
"""How many characters of a stdio server's stderr an error quotes."""


class McpConnection:
    """An MCP session with one server: open it with ``await nursery.start(conn.hold)``."""

    def __init__(self, params: ConnectionParams) -> None:
        self.params = params
        self.label = server_label(params)
        self.session: ClientSession | None = None
        self.failure: McpServerError | None = None
        self.done = trio.Event()
        self._stop = trio.Event()
        self._requests: set[trio.CancelScope] = set()
        self._stderr: IO[str] | None = None
        self._tools: list[mcp_types.Tool] | None = None
        self._generation = 0
        """Bumped by every ``tools/list_changed`` notification."""

    @property
    def usable(self) -> bool:
        return self.session is not None and self.failure is None and not self._stop.is_set()

    def stop(self) -> None:
        """Ask :meth:`hold` to close the session (returns at once)."""
        self._stop.set()

    async def close(self) -> None:
        """Stop and wait until the session is closed and the server stopped."""
        self.stop()
        await self.done.wait()

    # -- the holding task ------------------------------------------------------------------------

    async def hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the session, report it started, keep it until stopped.

        Raises (before it has started only; later failures are recorded, never raised):
            McpServerError: the server could not be started or reached, or failed the handshake.
        """
        started = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._on_message)
                )
                self.session = session
                await self._request("the handshake", lambda s: s.initialize())
                started = True
                task_status.started()
                await self._stop.wait()
        except Exception as exc:
            error = self._error_for(exc)
            if not started:
                raise error from exc
            self._fail(error)
        finally:
            self.session = None
            self.done.set()
            if self._stderr is not None:
                self._stderr.close()

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        params = self.params
        if isinstance(params, StdioConnectionParams):
            self._stderr = _stderr_file()
            return stdio_client(params.server_params, errlog=cast(TextIO, self._stderr))
        if isinstance(params, SseConnectionParams):
            return sse_client(
                params.url,
                headers=dict(params.headers or {}),
                timeout=params.timeout,
                sse_read_timeout=params.sse_read_timeout,
            )
        client = httpx2.AsyncClient(
            headers=dict(params.headers or {}),
            timeout=httpx2.Timeout(params.timeout, read=params.sse_read_timeout),
        )
        stack.push_async_callback(client.aclose)
        return streamable_http_client(
            params.url, http_client=client, terminate_on_close=params.terminate_on_close
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._fail(self._error(f"sent what is not MCP ({type(message).__name__}: {message})"))
        elif isinstance(message, mcp_types.ToolListChangedNotification):
            self._generation += 1
            self._tools = None

    # -- requests --------------------------------------------------------------------------------

    async def request(self, what: str, operation: Callable[[ClientSession], Awaitable[T]]) -> T:
        """Run ``operation`` on the session within the server's deadline. When the connection
        failed, the error comes once the session is closed and a stdio server's process has
        ended (so a caller that retries never finds the old server still running).

        Raises:
            McpServerError: the connection failed (before or during the request) or the server
                did not answer in time.
            mcp.shared.exceptions.MCPError: the server answered with a JSON-RPC error.
        """
        try:
            return await self._request(what, operation)
        except McpServerError:
            if self.failure is not None:
                await self.done.wait()
            raise

    async def _request(self, what: str, operation: Callable[[ClientSession], Awaitable[T]]) -> T:
        session = self.session
        if session is None or self.failure is not None:
            raise self.failure or self._error("is closed")
        with trio.CancelScope() as scope:
            self._requests.add(scope)
            try:
                with trio.fail_after(self.params.timeout):
                    return await operation(session)
            except trio.TooSlowError:
                raise self._error(
                    f"did not answer {what} within {self.params.timeout:g} s"
                ) from None
            except MCPError as exc:
                if exc.code != mcp_types.CONNECTION_CLOSED:
                    raise
                raise self._fail(self._error(f"closed the connection during {what}")) from exc
            finally:
                self._requests.discard(scope)
        assert self.failure is not None  # only _fail cancels the scope
        raise self.failure

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server lists (kept until it says the list changed, if it can)."""
        if self._tools is not None:
            return self._tools
        generation = self._generation
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await self.request("tools/list", _lister(cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        if generation == self._generation and self._notifies_changes():
            self._tools = tools
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        return await self.request(
            f"tools/call {name!r}", lambda s: s.call_tool(name, arguments or None)
        )

    def _notifies_changes(self) -> bool:
        session = self.session
        capabilities = session.server_capabilities if session is not None else None
        tools = capabilities.tools if capabilities is not None else None
        return bool(tools is not None and tools.list_changed)

    # -- failures --------------------------------------------------------------------------------

    def _fail(self, error: McpServerError) -> McpServerError:
        """Record the connection's failure, cancel the requests in flight, stop; return it."""
        if self.failure is None:
            self.failure = error
            for scope in self._requests:
                scope.cancel()
            self._stop.set()
        return self.failure

    def _error(self, what: str) -> McpServerError:
        return McpServerError(
            f"MCP server {self.label!r} {what}", server=self.label, stderr_tail=self._stderr_tail()
        )

    def _error_for(self, exc: Exception) -> McpServerError:
        if isinstance(exc, McpServerError):
            return exc
        leaf = _first_leaf(exc)
        if isinstance(leaf, OSError):
            return self._error(f"could not be started or reached: {leaf}")
        return self._error(f"failed: {type(leaf).__name__}: {leaf}")

    def _stderr_tail(self) -> str:
        file = self._stderr
        if file is None or file.closed:
            return ""
        return _tail(file)


def _lister(
    cursor: str | None,
) -> Callable[[ClientSession], Awaitable[mcp_types.ListToolsResult]]:
    params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
    return lambda session: session.list_tools(params=params)


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _stderr_file() -> IO[str]:
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


def _tail(file: IO[str]) -> str:
    file.flush()
    end = file.seek(0, 2)
    file.seek(max(0, end - STDERR_TAIL))
    text = file.read()
    file.seek(0, 2)
    return text.strip()
