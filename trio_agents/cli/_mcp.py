"""``trio-agents mcp-server TARGET``: the apps of TARGET as MCP tools."""

from __future__ import annotations

import sys
from typing import Any

import click
import trio

from .._runner import Runner
from ._load import load_apps
from ._services import open_services, runner_for

__all__ = ["serve_mcp"]


def serve_mcp(target: str, *, http: bool, host: str, port: int, uris: dict[str, Any]) -> None:
    """Load the apps and serve them over MCP (stdio, or streamable HTTP with ``http``)."""
    try:
        from ..mcp import serve
    except ImportError as exc:
        raise click.ClickException(
            f"this command needs the 'mcp' extra: pip install 'trio_agents[mcp]' ({exc})"
        ) from exc
    apps = load_apps(target)

    async def main() -> None:
        async with open_services(
            sessions=uris["session_service"] or "memory://",
            artifacts=uris["artifact_service"] or "memory://",
            memory=uris["memory_service"],
        ) as services:
            runners = [runner_for(name, found, services) for name, found in apps.items()]
            if not http:
                await serve(runners, transport="stdio")
                return
            async with trio.open_nursery() as nursery:
                urls = await nursery.start(_serve_http, serve, runners, host, port)
                # stdout stays free for MCP over stdio; the address goes to stderr either way
                print(f"MCP server for {', '.join(apps)} at {urls[0]}/mcp", file=sys.stderr)

    trio.run(main)


async def _serve_http(
    serve: Any,
    runners: list[Runner],
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    await serve(runners, transport="http", host=host, port=port, task_status=task_status)
