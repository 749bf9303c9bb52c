"""The MCP server of the MCP overhead benchmark: one ``add`` tool, over stdio."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
