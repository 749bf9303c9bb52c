"""``api-server`` and ``web``: serve the apps of a TARGET over HTTP until Ctrl-C (extra ``server``).

The first SIGINT (or SIGTERM) shuts the server down gracefully: no new connections, requests in
flight get the graceful timeout, then runs still going are cancelled and the services closed. A
second one stops waiting.
"""

from __future__ import annotations

import functools
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TextIO

import attrs
import trio
from starlette.applications import Starlette

from ..agents import BaseAgent
from ..server import (
    DEFAULT_BACKLOG,
    DEFAULT_BODY_READ_TIMEOUT,
    DEFAULT_MAX_DETACHED_RUNS,
    UI_PATH,
    UI_PUBLIC_PATHS,
    create_app,
    serve,
    ui_routes,
)
from ._services import Services, open_services

__all__ = ["serve_apps"]


@attrs.frozen
class ServeOptions:
    """How ``api-server`` and ``web`` serve: address, security, services and the UI.

    Internal to the command line (``trio_agents.cli`` imports without the ``server`` extra).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    auth_token: str | None = None
    cors_origins: Sequence[str] = ()
    graceful_timeout: float = 5.0
    backlog: int = DEFAULT_BACKLOG
    body_read_timeout: float = DEFAULT_BODY_READ_TIMEOUT
    max_detached_runs: int = DEFAULT_MAX_DETACHED_RUNS
    session_service: str = "memory://"
    artifact_service: str = "memory://"
    memory_service: str | None = None
    ui: bool = False


async def serve_apps(apps: dict[str, BaseAgent], options: ServeOptions, out: TextIO) -> None:
    """Serve ``apps`` until SIGINT or SIGTERM; print where, and when it stopped."""
    async with open_services(
        sessions=options.session_service,
        artifacts=options.artifact_service,
        memory=options.memory_service,
    ) as services:
        stop = trio.Event()
        server = functools.partial(
            serve,
            _app(apps, services, options),
            host=options.host,
            port=options.port,
            shutdown_trigger=stop.wait,
            graceful_timeout=options.graceful_timeout,
            backlog=options.backlog,
        )
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_on_signals, signals, stop, nursery.cancel_scope, out)
                urls: list[str] = await nursery.start(_serve_then_stop, server, nursery)
                _announce(sorted(apps), urls[0], options, out)
    print("stopped", file=out, flush=True)


def _app(apps: dict[str, BaseAgent], services: Services, options: ServeOptions) -> Starlette:
    return create_app(
        apps,
        session_service=services.sessions,
        artifact_service=services.artifacts,
        memory_service=services.memory,
        auth_token=options.auth_token,
        cors_origins=options.cors_origins,
        body_read_timeout=options.body_read_timeout,
        max_detached_runs=options.max_detached_runs,
        extra_routes=ui_routes() if options.ui else (),
        public_paths=UI_PUBLIC_PATHS if options.ui else (),
    )


async def _serve_then_stop(
    server: Callable[..., Awaitable[None]],
    nursery: trio.Nursery,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``server``; once it has shut down, end the signal watcher too."""
    await server(task_status=task_status)
    nursery.cancel_scope.cancel(reason="the server stopped")


async def _on_signals(
    signals: AsyncIterator[int],
    stop: trio.Event,
    scope: trio.CancelScope,
    out: TextIO,
) -> None:
    async for signum in signals:
        if stop.is_set():
            print("stopping now", file=out, flush=True)
            scope.cancel(reason="a second signal")
            return
        print(f"{signal.Signals(signum).name}: shutting down", file=out, flush=True)
        stop.set()


def _announce(names: list[str], url: str, options: ServeOptions, out: TextIO) -> None:
    print(f"serving {', '.join(names)} at {url}", file=out)
    if options.ui:
        print(f"dev UI: {url}{UI_PATH}/", file=out)
    if options.auth_token:
        print("requests need 'Authorization: Bearer <token>'", file=out)
    print("Ctrl-C to stop", file=out, flush=True)
