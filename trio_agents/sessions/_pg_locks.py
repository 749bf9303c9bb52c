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

__all__ = [
    "HOLD_SETTINGS",
    "LEASES_PER_CONNECTION",
    "SPARE_CONNECTIONS",
    "keep_holding",
    "open_lock_connection",
]

T = TypeVar("T")

LEASES_PER_CONNECTION = 4
"""Runs whose locks one shared connection holds at most."""
SPARE_CONNECTIONS = 4
"""Shared connections with no lock kept open for the next runs (more are closed)."""


HOLD_SETTINGS = {
    "idle_session_timeout": "0",
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}
"""The server settings of a connection that holds locks (or listens) while it idles: the
server never ends it for idling (``idle_session_timeout``, which an operator may set for the
database or role, would free its locks under the runs holding them), and it ends it within 25 s
of the client's machine going silent (by default a dead machine's locks stay held for hours,
until the operating system gives up on the connection)."""


def keep_holding(conn: Any) -> None:
    """Apply :data:`HOLD_SETTINGS` to ``conn``'s server session (those the server knows:
    ``idle_session_timeout`` is PostgreSQL 14's)."""
    settings = {
        name: value
        for name, value in HOLD_SETTINGS.items()
        if name != "idle_session_timeout" or conn.info.server_version >= 140000
    }
    calls = ", ".join("set_config(%s, %s, false)" for _ in settings)
    conn.execute(f"SELECT {calls}", [part for pair in settings.items() for part in pair])


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
