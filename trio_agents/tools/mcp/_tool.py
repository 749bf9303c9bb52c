"""One tool of an MCP server, as an LLM agent calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types
from mcp.shared.exceptions import MCPError

from ...models._base import FunctionDeclaration
from .._base import BaseTool, ToolContext
from ._results import error_response, function_response

if TYPE_CHECKING:
    from ._toolset import McpToolset

__all__ = ["McpTool"]


class McpTool(BaseTool):
    """A tool an MCP server lists; calling it sends ``tools/call`` through its toolset.

    Its declaration is the server's name (with the toolset's prefix, if any), description and
    input schema. A result flagged ``isError`` and a JSON-RPC error from the server (unknown tool,
    arguments the schema rejects) become error responses the model reads; a server that fails
    raises :class:`~trio_agents.McpServerError`.
    """

    def __init__(self, tool: mcp_types.Tool, toolset: McpToolset) -> None:
        super().__init__(name=tool.name, description=tool.description or "")
        self.mcp_tool = tool
        self.remote_name = tool.name
        self.toolset = toolset
        self._declaration: FunctionDeclaration | None = None

    def declaration(self) -> FunctionDeclaration:
        declared = self._declaration
        if declared is None or declared.name != self.name:
            declared = self._declaration = FunctionDeclaration(
                name=self.name,
                description=self.description,
                parameters=dict(self.mcp_tool.input_schema),
            )
        return declared

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        try:
            result = await self.toolset.call_tool(self.remote_name, args)
        except MCPError as exc:
            return error_response(
                f"tool {self.remote_name!r} of MCP server {self.toolset.server!r} failed: "
                f"{exc.error.message}"
            )
        return function_response(result)
