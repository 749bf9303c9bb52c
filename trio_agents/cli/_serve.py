"""``api-server`` and ``web``: serve the apps of a TARGET over HTTP until Ctrl-C (extra ``server``).

The first SIGINT (or SIGTERM) shuts the server down gracefully: no new connections, requests in
flight get the graceful timeout, then runs still going are cancelled and the services closed. A
second one stops waiting.
"""

from __future__ import annotations

import errno
import functools
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TextIO

import attrs
import trio
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from .._app import App
from .._errors import ConfigurationError
from ..agents import BaseAgent
from ..server import (
    DEFAULT_BACKLOG,
    DEFAULT_BODY_READ_TIMEOUT,
    DEFAULT_KEEP_ALIVE_TIMEOUT,
    DEFAULT_MAX_DETACHED_RUNS,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_SEND_TIMEOUT,
    UI_PATH,
    UI_PUBLIC_PATHS,
    adk_ui_routes,
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
    keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    body_read_timeout: float = DEFAULT_BODY_READ_TIMEOUT
    max_detached_runs: int = DEFAULT_MAX_DETACHED_RUNS
    session_service: str = "memory://"
    artifact_service: str = "memory://"
    memory_service: str | None = None
    ui: bool = False
    adk_ui: bool = False


async def serve_apps(
    apps: Mapping[str, BaseAgent | App], options: ServeOptions, out: TextIO
) -> None:
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
            keep_alive_timeout=options.keep_alive_timeout,
            send_timeout=options.send_timeout,
            max_header_bytes=options.max_header_bytes,
        )
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_on_signals, signals, stop, nursery.cancel_scope, out)
                urls: list[str] = await nursery.start(
                    _serve_then_stop, server, nursery, f"{options.host}:{options.port}"
                )
                _announce(sorted(apps), urls[0], options, out)
    print("stopped", file=out, flush=True)


def _app(
    apps: Mapping[str, BaseAgent | App], services: Services, options: ServeOptions
) -> Starlette:
    return create_app(
        apps,
        session_service=services.sessions,
        artifact_service=services.artifacts,
        memory_service=services.memory,
        auth_token=options.auth_token,
        cors_origins=options.cors_origins,
        body_read_timeout=options.body_read_timeout,
        max_detached_runs=options.max_detached_runs,
        extra_routes=_ui(options),
        public_paths=UI_PUBLIC_PATHS if options.ui else (),
        dev_routes=True,
    )


def _ui(options: ServeOptions) -> list[BaseRoute]:
    if not options.ui:
        return []
    return adk_ui_routes() if options.adk_ui else ui_routes()


async def _serve_then_stop(
    server: Callable[..., Awaitable[None]],
    nursery: trio.Nursery,
    address: str,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``server``; once it has shut down, end the signal watcher too.

    An ``OSError`` before the server has started means it could not listen, and says so; one
    after that is not about listening, and is raised as it is.
    """
    listening = _Listening(task_status)
    try:
        await server(task_status=listening)
    except* OSError as group:
        if listening.has_started:
            raise
        raise _bind_error(group, address) from None
    nursery.cancel_scope.cancel(reason="the server stopped")


class _Listening:
    """A task status that remembers whether the server reported that it listens."""

    def __init__(self, task_status: trio.TaskStatus[list[str]]) -> None:
        self._task_status = task_status
        self.has_started = False

    def started(self, value: list[str]) -> None:
        self.has_started = True
        self._task_status.started(value)


def _bind_error(group: BaseExceptionGroup[OSError], address: str) -> Exception:
    """The server could not listen: say where and why, on one line."""
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    if first.errno == errno.EADDRINUSE:
        hint = "another process listens there; pick another --port, or 0 for any free one"
        return ConfigurationError(f"cannot listen on {address}: address already in use; {hint}")
    reason = first.strerror or str(first)
    return ConfigurationError(f"cannot listen on {address}: {reason}")


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
        which = "ADK's dev UI" if options.adk_ui else "dev UI"
        print(f"{which}: {url}{UI_PATH}/", file=out)
    if options.auth_token:
        print("requests need 'Authorization: Bearer <token>'", file=out)
    print("Ctrl-C to stop", file=out, flush=True)
