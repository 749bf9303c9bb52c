"""``serve``: run an ASGI app on HTTP/1.1 (h11 on Trio), with its lifespan."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .._errors import ConfigurationError
from ._core import ServerCore
from ._h11 import ConnectionSettings, HTTPConnection, ServerState
from ._lifespan import Lifespan

__all__ = [
    "DEFAULT_BACKLOG",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "serve",
]

DEFAULT_BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (Linux caps it at
``net.core.somaxconn``, 4096 by default). Past it, new connections are reset."""

DEFAULT_KEEP_ALIVE_TIMEOUT = 5.0
"""Seconds an idle connection (or one still sending its request head) is kept open."""

DEFAULT_MAX_HEADER_BYTES = 16384
"""The largest request line plus headers; a larger one is answered 431 and closed."""

DEFAULT_SEND_TIMEOUT = 30.0
"""Seconds a client may go without accepting any of an answer (it stopped reading) before its
connection is closed."""

DEFAULT_SHUTDOWN_TIMEOUT = 60.0
"""Seconds the app's lifespan shutdown may take before it is cancelled."""


async def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    access_log: bool = False,
    graceful_timeout: float = 5.0,
    backlog: int = DEFAULT_BACKLOG,
    keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``host:port`` until cancelled or ``shutdown_trigger`` returns.

    Run it with ``trio.run(functools.partial(serve, app, port=8000))``, or start it in a nursery:
    ``urls = await nursery.start(functools.partial(serve, app, port=0))`` gives the bound URLs
    (port 0 picks a free port). The app's lifespan starts before the first connection is
    accepted and shuts down after the last one, also when ``serve`` is cancelled; its shutdown
    may take ``shutdown_timeout`` seconds before it is cancelled. When ``shutdown_trigger``
    returns, the runs in flight of an app of :func:`create_app` are cancelled first (their
    streams end with ``event: cancelled``), the server stops accepting, idle connections close,
    and requests get ``graceful_timeout`` seconds to finish. ``backlog`` is the listen queue:
    the connections the kernel holds for the server to accept (a burst of more is reset).
    ``keep_alive_timeout`` is how long a connection may sit idle, or take to send a request
    head, before it is closed; a request head over ``max_header_bytes`` is answered 431.
    ``send_timeout`` is how long a client may accept none of an answer (it stopped reading)
    before its connection is closed, as if it had left (a run it streams is then cancelled,
    unless it was started with ``onDisconnect: "detach"``).
    ``access_log`` logs a line per request to the ``trio_agents.server.access`` logger (on
    standard output unless it has handlers).

    The HTTP server is trio_agents' own, on h11: HTTP/1.1 with keep-alive, pipelining,
    chunked bodies and ``Expect: 100-continue``, and HTTP/1.0. It does not speak TLS, HTTP/2 or
    WebSockets; put a proxy in front for TLS.
    """
    _check(backlog, keep_alive_timeout, max_header_bytes, graceful_timeout, shutdown_timeout)
    if not send_timeout > 0:
        raise ConfigurationError(f"send_timeout must be > 0, got {send_timeout}")
    if shutdown_trigger is not None:
        shutdown_trigger = functools.partial(_cancelling_runs, app, shutdown_trigger)
    if access_log:
        _log_to_stdout()
    lifespan = Lifespan(app, shutdown_timeout)
    async with trio.open_nursery() as nursery:
        state = await nursery.start(lifespan.run)
        if state is not None:
            try:
                settings = ConnectionSettings(
                    app, state, keep_alive_timeout, max_header_bytes, access_log, send_timeout
                )
                listeners = await _listen(host, port, backlog)
                task_status.started([_url(listener) for listener in listeners])
                await _accept(settings, listeners, shutdown_trigger, graceful_timeout)
            finally:
                await lifespan.shutdown()
    lifespan.check()


async def _accept(
    settings: ConnectionSettings,
    listeners: list[trio.SocketListener],
    shutdown_trigger: Callable[[], Awaitable[None]] | None,
    graceful_timeout: float,
) -> None:
    """Serve connections until ``shutdown_trigger`` returns; then stop accepting, close the
    idle connections and give the others ``graceful_timeout`` seconds."""
    server = ServerState()
    handler = functools.partial(_handle, settings, server)
    async with trio.open_nursery() as connections:
        async with trio.open_nursery() as accepting:
            accepting.start_soon(
                functools.partial(
                    trio.serve_listeners, handler, listeners, handler_nursery=connections
                )
            )
            await (shutdown_trigger or trio.sleep_forever)()
            accepting.cancel_scope.cancel()
        server.shut_down()
        connections.cancel_scope.deadline = trio.current_time() + graceful_timeout


def _check(
    backlog: int,
    keep_alive_timeout: float,
    max_header_bytes: int,
    graceful_timeout: float,
    shutdown_timeout: float,
) -> None:
    if backlog < 1:
        raise ConfigurationError(f"backlog must be >= 1, got {backlog}")
    if not keep_alive_timeout > 0:
        raise ConfigurationError(f"keep_alive_timeout must be > 0, got {keep_alive_timeout}")
    if max_header_bytes < 1024:
        raise ConfigurationError(f"max_header_bytes must be >= 1024, got {max_header_bytes}")
    if not graceful_timeout >= 0:
        raise ConfigurationError(f"graceful_timeout must be >= 0, got {graceful_timeout}")
    if not shutdown_timeout >= 0:
        raise ConfigurationError(f"shutdown_timeout must be >= 0, got {shutdown_timeout}")


async def _listen(host: str, port: int, backlog: int) -> list[trio.SocketListener]:
    listeners = await trio.open_tcp_listeners(port, host=host, backlog=backlog)
    if port == 0 and len(listeners) > 1:  # one free port, not one per address
        for extra in listeners[1:]:
            await extra.aclose()
        listeners = listeners[:1]
    return listeners


async def _handle(
    settings: ConnectionSettings, server: ServerState, stream: trio.SocketStream
) -> None:
    await HTTPConnection(stream, settings, server).run()


def _url(listener: trio.SocketListener) -> str:
    host, port = listener.socket.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _log_to_stdout() -> None:
    access = logging.getLogger("trio_agents.server.access")
    access.setLevel(logging.INFO)
    if not access.handlers:
        access.addHandler(logging.StreamHandler(sys.stdout))


async def _cancelling_runs(app: Any, trigger: Callable[[], Awaitable[None]]) -> None:
    await trigger()
    core = getattr(getattr(app, "state", None), "core", None)
    if isinstance(core, ServerCore):
        core.cancel_runs("the server is shutting down")
