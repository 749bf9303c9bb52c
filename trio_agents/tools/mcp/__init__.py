"""MCP servers as tools (extra ``mcp``): the connection shapes google-adk uses.

An ADK user changes only imports::

    from trio_agents.tools.mcp import McpToolset, StdioConnectionParams, StdioServerParameters

    toolset = McpToolset(
        connection_params=StdioConnectionParams(
            server_params=StdioServerParameters(command="npx", args=["-y", "some-mcp-server"]),
            timeout=10,
        ),
        tool_filter=["read_file"],
    )
    agent = LlmAgent(name="a", model=..., tools=[toolset])
"""

from __future__ import annotations

from ..._exports import publish as _publish

try:
    from mcp import StdioServerParameters as StdioServerParameters
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "trio_agents.tools.mcp needs the mcp package: pip install 'trio_agents[mcp]'"
    ) from exc

from ._params import (
    SseConnectionParams as SseConnectionParams,
    StdioConnectionParams as StdioConnectionParams,
    StreamableHTTPConnectionParams as StreamableHTTPConnectionParams,
)
from ._tool import McpTool as McpTool
from ._toolset import McpToolset as McpToolset

__all__ = [
    "McpTool",
    "McpToolset",
    "SseConnectionParams",
    "StdioConnectionParams",
    "StdioServerParameters",
    "StreamableHTTPConnectionParams",
]

_publish(__name__, globals(), __all__)
