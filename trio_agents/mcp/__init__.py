"""Serve trio_agents apps over MCP (extra ``mcp``), so MCP clients can call them as tools.

:func:`serve` runs an MCP server with one tool per app, taking a ``message`` and answering with
the app's final text; each MCP client session talks to its own app session. The command line
does the same: ``trio-agents mcp-server TARGET`` (stdio) or ``--http`` (streamable HTTP).
"""

from __future__ import annotations

from .._exports import publish as _publish
from ._serve import mcp_server_for as mcp_server_for, serve as serve

__all__ = ["mcp_server_for", "serve"]

_publish(__name__, globals(), __all__)
