"""``serve``: run an app on Hypercorn's Trio worker."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from .._errors import ConfigurationError
from ._core import ServerCore

__all__ = ["DEFAULT_BACKLOG", "serve"]

DEFAULT_BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (Linux caps it at
``net.core.somaxconn``, 4096 by default). Past it, new connections are reset."""


async def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    access_log: bool = False,
    graceful_timeout: float = 5.0,
    backlog: int = DEFAULT_BACKLOG,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``host:port`` until cancelled or ``shutdown_trigger`` returns.

    Run it with ``trio.run(functools.partial(serve, app, port=8000))``, or start it in a nursery:
    ``urls = await nursery.start(functools.partial(serve, app, port=0))`` gives the bound URLs
    (port 0 picks a free port). When ``shutdown_trigger`` returns, the runs in flight of an app
    of :func:`create_app` are cancelled first (their streams end with ``event: cancelled``), then
    requests get ``graceful_timeout`` seconds to finish. ``backlog`` is the listen queue: the
    connections the kernel holds for the server to accept (a burst of more is reset).
    """
    if backlog < 1:
        raise ConfigurationError(f"backlog must be >= 1, got {backlog}")
    if shutdown_trigger is not None:
        shutdown_trigger = functools.partial(_cancelling_runs, app, shutdown_trigger)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = "-" if access_log else None
    config.graceful_timeout = graceful_timeout
    config.backlog = backlog
    await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger, task_status=task_status)


async def _cancelling_runs(app: Any, trigger: Callable[[], Awaitable[None]]) -> None:
    await trigger()
    core = getattr(getattr(app, "state", None), "core", None)
    if isinstance(core, ServerCore):
        core.cancel_runs("the server is shutting down")
