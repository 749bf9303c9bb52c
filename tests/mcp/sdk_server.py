"""An MCP server written with the mcp SDK's own server API, run by the tests as a subprocess.

``python sdk_server.py [normal|garbage|exit]``: ``garbage`` answers every request with a line
that is not JSON-RPC; ``exit`` writes to stderr and exits before the handshake.
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp_types import ImageContent, TextContent

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)

server = MCPServer("sdk-test-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"failing on purpose: {reason}")


@server.tool()
def die() -> str:
    """Writes a last word to stderr and exits mid-call."""
    print("server: dying mid-call", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def wait_forever() -> str:
    """Never answers (until cancelled)."""
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a one-pixel PNG."""
    return [
        TextContent(type="text", text="a pixel"),
        ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
    ]


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds a tool named ``extra`` and tells the client the list changed."""

    def extra() -> str:
        return "extra answer"

    server.add_tool(extra, name="extra", description="Added at run time.")
    await ctx.session.send_tool_list_changed()
    return "grown"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "exit":
        print("server: refusing to start (test)", file=sys.stderr, flush=True)
        sys.exit(2)
    if mode == "garbage":
        for _ in sys.stdin:
            sys.stdout.write("this is not json-rpc\n")
            sys.stdout.flush()
        return
    anyio.run(_serve_stdio)


async def _serve_stdio() -> None:
    lowlevel = server._lowlevel_server
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await lowlevel.run(read, write, options)


if __name__ == "__main__":
    main()
