"""The ASGI lifespan protocol: start an app before serving, shut it down after."""

from __future__ import annotations

import logging
from typing import Any

import trio

from .._errors import ConfigurationError

__all__: list[str] = []  # Lifespan is internal to serve()

Message = dict[str, Any]

log = logging.getLogger("trio_agents.server")


class Lifespan:
    """Runs an ASGI app's ``lifespan`` scope in a task of its own.

    ``state = await nursery.start(lifespan.run)`` returns once the app has started (its
    ``lifespan.startup.complete``) with the lifespan state every request scope gets a copy of;
    ``await lifespan.shutdown()`` asks the app to shut down and waits until it has, at most
    ``shutdown_timeout`` seconds.

    Once the app has started, its lifespan task is shielded from the cancellation of the
    nursery it runs in: a server that is cancelled still tells the app to shut down (call
    ``shutdown`` in a ``finally``), and ``shutdown`` is what ends the task.
    """

    def __init__(self, app: Any, shutdown_timeout: float) -> None:
        self._app = app
        self._shutdown_timeout = shutdown_timeout
        self._to_app, self._from_server = trio.open_memory_channel[Message](1)
        self._started = trio.Event()
        self._stopped = trio.Event()
        self._failure: str | None = None
        self._received = False
        self._scope = trio.CancelScope()
        self.state: dict[str, Any] = {}

    async def run(self, *, task_status: trio.TaskStatus[dict[str, Any] | None]) -> None:
        """Call the app with the lifespan scope; report its start-up through ``task_status``:
        the lifespan state, or None when the app failed to start. An app that raises before it
        even receives ``lifespan.startup`` does not speak the protocol: it is served without."""
        scope = {
            "type": "lifespan",
            "asgi": {"version": "3.0", "spec_version": "2.0"},
            "state": self.state,
        }
        with self._scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._call_app, scope)
                await self._to_app.send({"type": "lifespan.startup"})
                await self._started.wait()
                if self._failure is not None:
                    nursery.cancel_scope.cancel(reason="the app failed to start")
                else:  # from now on only shutdown() ends the app's lifespan
                    self._scope.shield = True
                task_status.started(self.state if self._failure is None else None)

    def check(self) -> None:
        """Raise :class:`ConfigurationError` if the app failed to start (``run`` started with
        None)."""
        if self._failure is not None:
            raise ConfigurationError(f"the app failed to start: {self._failure}")

    async def shutdown(self) -> None:
        """Ask the app to shut down and wait until it has (or its lifespan task ended), at most
        the shutdown timeout, even in a cancelled scope; then end the lifespan task."""
        timeout = self._shutdown_timeout
        with trio.CancelScope(shield=True) as waiting:
            waiting.deadline = trio.current_time() + timeout
            if not self._stopped.is_set():
                await self._to_app.send({"type": "lifespan.shutdown"})
                await self._stopped.wait()
        if waiting.cancelled_caught:
            log.warning("the app did not shut down within %s seconds: it is cancelled", timeout)
        self._scope.cancel(reason="the app's lifespan is over")

    async def _call_app(self, scope: Message) -> None:
        try:
            await self._app(scope, self._receive, self._send)
        except Exception as error:
            if self._failure is not None:  # said so with lifespan.startup.failed
                return
            if not self._received:
                log.info("the app does not support the lifespan protocol (%r)", error)
                return
            if self._started.is_set():
                raise
            self._failure = f"{type(error).__name__}: {error}"
        finally:
            self._started.set()
            self._stopped.set()

    async def _receive(self) -> Message:
        message = await self._from_server.receive()
        self._received = True
        return message

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.failed":
            self._failure = message.get("message") or "lifespan.startup.failed"
        if kind in ("lifespan.startup.complete", "lifespan.startup.failed"):
            self._started.set()
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            self._stopped.set()
