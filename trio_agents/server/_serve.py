"""``serve``: run an app on Hypercorn's Trio worker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

__all__ = ["serve"]


async def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    access_log: bool = False,
    graceful_timeout: float = 5.0,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``host:port`` until cancelled or ``shutdown_trigger`` returns.

    Run it with ``trio.run(functools.partial(serve, app, port=8000))``, or start it in a nursery:
    ``urls = await nursery.start(functools.partial(serve, app, port=0))`` gives the bound URLs
    (port 0 picks a free port). On shutdown, requests get ``graceful_timeout`` seconds to finish.
    """
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = "-" if access_log else None
    config.graceful_timeout = graceful_timeout
    await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger, task_status=task_status)
