"""A notes assistant whose tools come from the reference filesystem MCP server."""

from __future__ import annotations

import os
from pathlib import Path

from trio_agents import LlmAgent
from trio_agents.tools.mcp import McpToolset, StdioConnectionParams, StdioServerParameters

NOTES_DIR = Path(os.environ.get("NOTES_DIR", Path(__file__).resolve().parent / "data"))


def _server() -> StdioServerParameters:
    installed = os.environ.get("NOTES_MCP_SERVER")
    if installed:
        return StdioServerParameters(command="node", args=[installed, str(NOTES_DIR)])
    return StdioServerParameters(
        command="npx",
        args=["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", str(NOTES_DIR)],
    )


notes_tools = McpToolset(
    connection_params=StdioConnectionParams(server_params=_server(), timeout=60),
    tool_filter=["list_directory", "read_text_file", "search_files"],
    tool_name_prefix="notes",
)

root_agent = LlmAgent(
    name="notes",
    model=os.environ.get("NOTES_MODEL", "gemini-2.5-flash"),
    description="Answers questions from a folder of notes.",
    instruction=(
        f"You answer from the notes in {NOTES_DIR}. List the folder, read the notes that "
        "matter, and quote them. Say so when the notes do not answer the question."
    ),
    tools=[notes_tools],
)
