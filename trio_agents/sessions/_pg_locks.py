"""PostgreSQL connections that hold the run locks of several runs each.

A session-level advisory lock lives on the connection that took it, and one connection can hold
many: runs that take their lock without waiting (``pg_try_advisory_lock``, the server's case)
share a few connections, :data:`LEASES_PER_CONNECTION` runs each, instead of opening one per run.
A connection is opened when every open one is full, and reused once its runs end (a few spares
are kept open, the others are closed when their last run ends), so a burst of runs neither
reconnects per run nor holds more connections than it needs. Statements on one connection go
one at a time and are never interrupted: a lock call whose caller was cancelled still ends, so
a lock is never taken without its holder knowing. When a connection breaks, the locks on it go
with it, as a run's own connection's did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

from .._errors import StoreUnavailableError

__all__ = ["LEASES_PER_CONNECTION", "SPARE_CONNECTIONS", "open_lock_connection"]

T = TypeVar("T")

LEASES_PER_CONNECTION = 4
"""Runs whose locks one shared connection holds at most."""
SPARE_CONNECTIONS = 4
"""Shared connections with no lock kept open for the next runs (more are closed)."""


class LockConnection:
    """One shared connection: its holders, and a lock so its statements go one at a time."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.holders = 0
        self.broken = False
        self._turn = trio.Lock()

    async def call(self, fn: Callable[[Any], T]) -> T:
        """``fn(conn)`` in a worker thread, after the statements before it; never interrupted
        (the caller's cancellation waits for it to end). A failure marks the connection broken
        when the connection is gone."""
        with trio.CancelScope(shield=True):
            async with self._turn:
                try:
                    result = await trio.to_thread.run_sync(fn, self.conn)
                finally:
                    self.broken = self.broken or bool(self.conn.closed or self.conn.broken)
        return result


class SharedLockConnections:
    """The shared lock connections of one service (``connect`` opens one, in a worker thread)."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._open: list[LockConnection] = []
        self._opening = trio.Lock()

    @property
    def connections(self) -> int:
        """How many shared connections are open now."""
        return len(self._open)

    async def take(self, session_id: str) -> LockConnection:
        """A connection with room for one more run's lock (opened if none has room).

        Connections are opened one at a time, and a run that waited for another's opening
        takes room on it: a burst of runs opens one connection per
        :data:`LEASES_PER_CONNECTION` runs, not one each.

        Raises:
            StoreUnavailableError: the database refused another connection.
        """
        await trio.lowlevel.checkpoint()
        shared = self._with_room()
        if shared is not None:
            shared.holders += 1
            return shared
        async with self._opening:
            shared = self._with_room()
            if shared is None:
                shared = LockConnection(await open_lock_connection(self._connect, session_id))
                self._open.append(shared)
            shared.holders += 1
            return shared

    def _with_room(self) -> LockConnection | None:
        for shared in self._open:
            if not shared.broken and shared.holders < LEASES_PER_CONNECTION:
                return shared
        return None

    async def give_back(self, shared: LockConnection) -> None:
        """The run of one lock on ``shared`` ended; close it if broken, or idle beside enough
        spares."""
        shared.holders -= 1
        idle = [other for other in self._open if other.holders == 0 and not other.broken]
        if shared.holders == 0 and (shared.broken or len(idle) > SPARE_CONNECTIONS):
            self._open.remove(shared)
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shared.conn.close)
        else:
            await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Close every shared connection (the locks on them go with them)."""
        connections, self._open = self._open, []
        for shared in connections:
            await trio.to_thread.run_sync(shared.conn.close)


async def open_lock_connection(connect: Callable[[], Any], session_id: str) -> Any:
    """``connect()`` in a worker thread, for the lock of a run of ``session_id``.

    Raises:
        StoreUnavailableError: the database refused another connection.
    """
    import psycopg

    try:
        return await trio.to_thread.run_sync(connect)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(
            f"Session {session_id}: the database refused another connection for the "
            f"run's lock ({str(exc).strip()}); retry shortly",
            session_id=session_id,
        ) from exc
