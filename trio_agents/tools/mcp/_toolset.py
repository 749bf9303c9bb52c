"""McpToolset: the tools of an MCP server, for an LLM agent."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import mcp_types
import trio

from ..._util import without_cancelled
from .._base import BaseTool
from .._scope import ToolsetScope, current_scope
from .._toolset import BaseToolset, ToolPredicate
from ._connection import McpConnection
from ._params import checked_params, server_label
from ._tool import McpTool

if TYPE_CHECKING:
    from ..._context import ReadonlyContext

__all__ = ["McpToolset"]

T = TypeVar("T")


class McpToolset(BaseToolset):
    """The tools an MCP server lists, offered to an agent at every model step.

    ``connection_params`` says how to reach the server (:class:`StdioConnectionParams`,
    :class:`StreamableHTTPConnectionParams` or :class:`SseConnectionParams`). The session lives
    in the scope the toolset is used in: under ``async with runner:`` one session (one server
    process) serves every invocation and closes with the Runner; otherwise each invocation
    opens its own and closes it when it ends; outside any run (a direct :meth:`get_tools`) each
    operation opens and closes one. The tool list is asked once per model step, or kept until the
    server announces a change when it can.

    Raises:
        ConfigurationError: malformed ``connection_params``, ``tool_filter`` or prefix.
    """

    def __init__(
        self,
        *,
        connection_params: Any,
        tool_filter: ToolPredicate | Sequence[str] | None = None,
        tool_name_prefix: str | None = None,
    ) -> None:
        super().__init__(tool_filter=tool_filter, tool_name_prefix=tool_name_prefix)
        self.connection_params = checked_params(connection_params)
        self.server = server_label(self.connection_params)
        self._connections: weakref.WeakKeyDictionary[ToolsetScope, McpConnection] = (
            weakref.WeakKeyDictionary()
        )
        self._connecting = trio.Lock()

    @property
    def name(self) -> str:
        return f"McpToolset({self.server})"

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """The server's tools that ``tool_filter`` lets through, under their own names.

        Raises:
            McpServerError: the server could not be reached or failed.
        """
        listed = await self._with_connection(McpConnection.list_tools)
        tools: list[BaseTool] = [McpTool(tool, self) for tool in listed]
        return [tool for tool in tools if self.is_tool_selected(tool, readonly_context)]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call the server's tool ``name`` (its own name, without prefix) with ``arguments``."""
        return await self._with_connection(lambda conn: conn.call_tool(name, arguments))

    async def close(self) -> None:
        """Close every session this toolset holds (their servers stop)."""
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            await connection.close()

    async def _with_connection(self, operation: Callable[[McpConnection], Awaitable[T]]) -> T:
        scope = current_scope()
        if scope is None:
            return await self._once(operation)
        return await operation(await self._connection(scope))

    async def _connection(self, scope: ToolsetScope) -> McpConnection:
        """The live session of ``scope``, opened (again) when there is none."""
        async with self._connecting:
            connection = self._connections.get(scope)
            if connection is None or not connection.usable:
                connection = McpConnection(self.connection_params)
                await scope.nursery.start(connection.hold)
                scope.on_close(connection.stop)
                self._connections[scope] = connection
            return connection

    async def _once(self, operation: Callable[[McpConnection], Awaitable[T]]) -> T:
        """Run ``operation`` on a session opened for it alone, then closed."""
        connection = McpConnection(self.connection_params)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(connection.hold)
                try:
                    return await operation(connection)
                finally:
                    connection.stop()
        except BaseExceptionGroup as group:
            failure = without_cancelled(group)
            if failure is group:
                raise
            raise failure from failure.__cause__
