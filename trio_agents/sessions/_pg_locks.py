"""PostgreSQL connections that hold the run locks of several runs each.

A session-level advisory lock lives on the connection that took it, and one connection can hold
many: runs that take their lock without waiting (``pg_try_advisory_lock``, the server's case)
share a few connections, :data:`LEASES_PER_CONNECTION` runs each, instead of opening one per run.
A connection is opened when every open one is full, and reused once its runs end (a few spares
are kept open, the others are closed when their last run ends), so a burst of runs neither
reconnects per run nor holds more connections than it needs. Statements on one connection go
one at a time and are never interrupted: a lock call whose caller was cancelled still ends, so
a lock is never taken without its holder knowing.

When a connection breaks (its server process was terminated, the server restarted), the locks
on it go with it. Each connection is watched while it idles (:meth:`LockConnection.wait_lost`):
its socket turns readable only when the server says something unasked, which on a connection
that holds locks means it is ending it; the connection is then probed, and once found lost the
service takes its runs' locks again on another one (:class:`SharedLockConnections`, ``on_lost``).
Nothing is paid per statement or per event: a statement interrupts the watch, which resumes
once the statement ends.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
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

logger = logging.getLogger("trio_agents.sessions")

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


@attrs.define(eq=False)
class Held:
    """The lock of one run, on the shared connection that holds it now (it moves to another
    when that one breaks); ``scope`` is the run's, cancelled when the lock is lost for good."""

    session_id: str
    lock: int
    shared: LockConnection
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    ended: bool = False
    """The run ended: its lock is let go, and not taken again."""
    lost: str | None = None
    """Why the lock was lost for good (the run is cancelled), if it was."""

    def lose(self, reason: str) -> None:
        """The lock could not be taken again: cancel the run."""
        self.lost = reason
        self.scope.cancel(reason=f"the run's lease was lost ({reason})")


class LockConnection:
    """One shared connection: its holders, and a lock so its statements go one at a time."""

    def __init__(self, conn: Any, *, own: bool = False) -> None:
        self.conn = conn
        self.own = own
        """Whether it is a run's own (one that queued for its lock), not a shared one."""
        self.holders = 0
        self.broken = False
        self.leases: set[Held] = set()
        """The runs whose locks this connection holds."""
        self.watch = trio.CancelScope()
        """The scope of the task watching this connection (cancelled when it is closed)."""
        self._idle: trio.CancelScope | None = None
        self._turn = trio.Lock()

    async def call(self, fn: Callable[[Any], T]) -> T:
        """``fn(conn)`` in a worker thread, after the statements before it; never interrupted
        (the caller's cancellation waits for it to end). A failure marks the connection broken
        when the connection is gone."""
        with trio.CancelScope(shield=True):
            if self._idle is not None:  # the watch gives its turn up
                self._idle.cancel()
            async with self._turn:
                try:
                    result = await trio.to_thread.run_sync(fn, self.conn)
                finally:
                    self._check()
        return result

    def _check(self) -> None:
        self.broken = self.broken or bool(self.conn.closed or self.conn.broken)

    async def wait_lost(self) -> None:
        """Return once the connection is found lost. While no statement runs on it, its socket
        is watched: readable then, the server ended it (or said something unasked), and a probe
        tells which. A statement that wants its turn interrupts the watch."""
        while not self.broken:
            async with self._turn:
                if self._turn.statistics().tasks_waiting:
                    continue  # a statement waits: it goes first
                idle = self._idle = trio.CancelScope()
                with idle:
                    await trio.lowlevel.wait_readable(self.conn.fileno())
                self._idle = None
                if not idle.cancelled_caught:
                    try:
                        await trio.to_thread.run_sync(_probe, self.conn)
                    finally:
                        self._check()

    async def aclose(self) -> None:
        """Stop the watch, close the connection (after the statement running, if any)."""
        self.watch.cancel()
        if self._idle is not None:
            self._idle.cancel()
        with trio.CancelScope(shield=True):
            async with self._turn:
                await trio.to_thread.run_sync(self.conn.close)


def _probe(conn: Any) -> None:
    """A statement on a connection whose socket turned readable: fails if the server ended it."""
    import psycopg

    try:
        conn.execute("SELECT 1")
    except psycopg.Error as exc:
        logger.warning("a run lock connection to PostgreSQL was lost (%s)", exc)


class SharedLockConnections:
    """The shared lock connections of one service (``connect`` opens one, in a worker thread)."""

    def __init__(
        self,
        connect: Callable[[], Any],
        on_lost: Callable[[LockConnection], Awaitable[None]] | None = None,
    ) -> None:
        self._connect = connect
        self._on_lost = on_lost
        self._open: list[LockConnection] = []
        self._opening = trio.Lock()
        self.nursery: trio.Nursery | None = None
        """Where each connection's watch runs (None: connections are not watched)."""

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
                self.watch(shared)
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
            await shared.aclose()
        else:
            await trio.lowlevel.checkpoint()

    def watch(self, shared: LockConnection) -> None:
        """Watch ``shared`` (one of these, or a run's own) while connections are watched."""
        if self.nursery is not None:
            self.nursery.start_soon(self._watch, shared)

    def watch_all(self, nursery: trio.Nursery) -> None:
        """Watch every connection in ``nursery``: those open now, and those opened later."""
        self.nursery = nursery
        for shared in self._open:
            nursery.start_soon(self._watch, shared)

    async def _watch(self, shared: LockConnection) -> None:
        """Watch ``shared`` until it is closed; once it is found lost, hand it to ``on_lost``
        (which takes its runs' locks again elsewhere)."""
        shared.watch = trio.CancelScope()
        with shared.watch:
            try:
                await shared.wait_lost()
            except Exception as exc:  # the socket or the driver failed (a lost connection's
                # ``fileno()`` raises the driver's OperationalError): as good as lost
                logger.warning("a run lock connection to PostgreSQL failed (%s)", exc)
                shared.broken = True
        if shared.broken and self._on_lost is not None:
            await self._on_lost(shared)

    async def aclose(self) -> None:
        """Close every shared connection (the locks on them go with them)."""
        connections, self._open = self._open, []
        for shared in connections:
            await shared.aclose()


class Watches:
    """While the block lasts, ``shared``'s connections are watched (:meth:`LockConnection.
    wait_lost`) in a nursery of its own, owned by the task that entered it; a no-op when they
    are already watched. The nursery is entered and left by hand, so that the block's own error
    leaves the block as it is (not in an exception group): the watches never fail."""

    def __init__(self, shared: SharedLockConnections) -> None:
        self._shared = shared
        self._manager: Any = None

    async def __aenter__(self) -> None:
        if self._shared.nursery is None:
            self._manager = trio.open_nursery()
            self._shared.watch_all(await self._manager.__aenter__())
        else:
            await trio.lowlevel.checkpoint()

    async def __aexit__(self, *exc_info: object) -> None:
        manager, self._manager = self._manager, None
        nursery = self._shared.nursery
        if manager is None or nursery is None:  # another block watches them
            await trio.lowlevel.checkpoint()
            return
        self._shared.nursery = None
        nursery.cancel_scope.cancel(reason="the lock connections are no longer watched")
        await manager.__aexit__(None, None, None)


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
