"""Sessions in PostgreSQL (extra ``postgres``): several processes, one store.

Queries run on a psycopg connection pool in worker threads, at most ``max_size`` at a time (the
rest queue in Trio, where they can be cancelled). Cancelling a waiting caller asks the server to
cancel its statement, so the caller is released promptly and the transaction rolls back; a
transaction that committed anyway returns its result. Appends are group-committed on a connection
of their own (:mod:`._pg_batch`): those made while a transaction of appends is in flight share the
next one, each checked against its session's revision and refused alone when stale, and no caller
hears back before the ``COMMIT`` holding its event. The service keeps the histories it has
read (:mod:`._event_cache`): reading a session again parses only the events committed since, in
one repeatable-read snapshot. Runs on one session are exclusive across processes through an
advisory lock held on a connection of its own: it is released when the run ends or the process
dies.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Self, TypeVar

import attrs
import outcome
import trio

from .._errors import (
    ConfigurationError,
    LeaseLostError,
    SessionBusyError,
    SessionExistsError,
    StoreUnavailableError,
)
from .._events import Event
from .._serde import load_stored
from .._state import merged_state
from ._base import EventLog, GetSessionConfig, Session
from ._event_cache import (
    DEFAULT_CACHED_SESSIONS,
    EventCache,
    Fresh,
    read_fresh,
)
from ._pg_appends import Append
from ._pg_batch import DEFAULT_MAX_BATCH, AppendBatcher
from ._pg_locks import (
    Held,
    LockConnection,
    SharedLockConnections,
    Watches,
    keep_holding,
    open_lock_connection,
)
from ._pg_outage import Reachability
from ._sql import History, Job, Mark, Scopes, SqlSessionService

try:
    import psycopg
    import psycopg.errors
    import psycopg_pool
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

__all__ = ["PostgresSessionService"]

T = TypeVar("T")
Key = tuple[str, str, str]

SCHEMA_VERSION = 2
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE trio_agents_app_state (app_name TEXT PRIMARY KEY, state TEXT NOT NULL)",
        "CREATE TABLE trio_agents_user_state (app_name TEXT, user_id TEXT, state TEXT NOT NULL,"
        " PRIMARY KEY (app_name, user_id))",
        "CREATE TABLE trio_agents_sessions (app_name TEXT, user_id TEXT, id TEXT,"
        " state TEXT NOT NULL, revision BIGINT NOT NULL, created DOUBLE PRECISION NOT NULL,"
        " updated DOUBLE PRECISION NOT NULL, PRIMARY KEY (app_name, user_id, id))",
        "CREATE TABLE trio_agents_events (seq BIGSERIAL PRIMARY KEY, app_name TEXT NOT NULL,"
        " user_id TEXT NOT NULL, session_id TEXT NOT NULL, timestamp DOUBLE PRECISION NOT NULL,"
        " body TEXT NOT NULL)",
        "CREATE INDEX trio_agents_events_by_session"
        " ON trio_agents_events (app_name, user_id, session_id, seq)",
    ),
    (  # the cancels sent to the other processes, for a listener that was reconnecting
        "CREATE TABLE IF NOT EXISTS trio_agents_cancels (seq BIGSERIAL PRIMARY KEY,"
        " sent TIMESTAMPTZ NOT NULL DEFAULT now(), invocation_id TEXT NOT NULL,"
        " digest TEXT NOT NULL, message TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS trio_agents_cancels_by_time ON trio_agents_cancels (sent)",
    ),
)
"""``MIGRATIONS[v]`` takes a database from schema version ``v`` to ``v + 1``."""

_MIGRATION_LOCK = 7_263_524_101  # advisory lock id serializing migrations across processes
_POLL = 0.1  # how often a worker waiting for a new pooled connection checks for cancellation
_CANCEL_REPEAT = 0.25  # a cancel request the server dropped is sent again after this long


logger = logging.getLogger("trio_agents.sessions")

CANCELS_KEPT = 60.0
"""Seconds a cancel sent to the other processes stays recorded (:meth:`PostgresSessionService.
signal_cancel`): a process whose listener lost its connection for less than that finds it when
it listens again."""

DEFAULT_MAX_LOCK_CONNECTIONS = 256
"""Runs one service may hold a PostgreSQL lock for at once (runs that do not queue for their
lock share connections, :data:`~._pg_locks.LEASES_PER_CONNECTION` each)."""


class PostgresSessionService(SqlSessionService):
    """Sessions in the PostgreSQL database at ``dsn``.

    Tables ``trio_agents_*`` are created (or migrated) in the connection's current schema on
    first use; a database written by a newer trio_agents is refused with
    :class:`~trio_agents.ConfigurationError`. ``min_size``/``max_size`` size the connection pool;
    each run holds a lock (:meth:`lease`), at most ``max_lock_connections`` runs at once: past
    it, or past the server's ``max_connections``, a run is refused with
    :class:`~trio_agents.StoreUnavailableError` (or queues, with ``wait=True``). Runs that take
    their lock without queueing (the HTTP server's) share lock connections, four locks each;
    a run that queues has a connection of its own while it waits and runs.

    The histories of the ``cached_sessions`` most recently read sessions stay in memory, so
    ``get_session`` on one of them reads and parses only the events committed since (by any
    process); ``cached_sessions=0`` reads every history whole.

    Appends are group-committed on a connection of their own (besides the pool's): appends made
    while a transaction of appends is in flight share the next one, at most ``max_batch`` each
    (``max_batch=1``: every append is a transaction of its own).

    Once the database is found unreachable, callers hear
    :class:`~trio_agents.StoreUnavailableError` at once until something succeeds again (see
    :mod:`._pg_outage`). Use it as ``async with PostgresSessionService(dsn) as service:`` so
    that the connections holding the runs' locks are watched (see :meth:`watching`).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        cached_sessions: int = DEFAULT_CACHED_SESSIONS,
        max_lock_connections: int = DEFAULT_MAX_LOCK_CONNECTIONS,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        if psycopg is None:
            raise ConfigurationError(
                "PostgresSessionService needs the 'postgres' extra: "
                "pip install 'trio_agents[postgres]'"
            )
        if cached_sessions < 0:
            raise ConfigurationError(f"cached_sessions must be >= 0, got {cached_sessions}")
        if max_lock_connections < 1:
            raise ConfigurationError(
                f"max_lock_connections must be >= 1, got {max_lock_connections}"
            )
        if max_batch < 1:
            raise ConfigurationError(f"max_batch must be >= 1, got {max_batch}")
        super().__init__()
        self._reach = Reachability()
        self._appends = AppendBatcher(self._open_connection, max_batch, self._reach)
        self._lock_slots = trio.CapacityLimiter(max_lock_connections)
        self._shared = SharedLockConnections(self._connect, self._relock)
        self._watches: Watches | None = None  # those of ``async with service``
        self.dsn = dsn
        self._pool = psycopg_pool.ConnectionPool(
            dsn, min_size=min_size, max_size=max_size, open=False, kwargs={"autocommit": False}
        )
        self._slots = trio.CapacityLimiter(max_size)
        self._opening = trio.Lock()
        self._schema: str | None = None
        self._cache = EventCache(cached_sessions)

    async def aclose(self) -> None:
        """Close the appends' connection and the pool (waiting for what is in flight), and the
        shared lock connections. Shielded: a cancelled caller still leaves nothing open."""
        with trio.CancelScope(shield=True):
            try:
                try:
                    await self._appends.aclose()
                finally:
                    await trio.to_thread.run_sync(self._pool.close)
            finally:
                await self._shared.aclose()

    async def __aenter__(self) -> Self:
        """Open the service: its lock connections are watched while the block lasts (see
        :meth:`watching`)."""
        self._watches = self.watching()
        await self._watches.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        watches, self._watches = self._watches, None
        try:
            if watches is not None:
                await watches.__aexit__(*exc_info)
        finally:
            with trio.CancelScope(shield=True):
                await self.aclose()

    def watching(self) -> Watches:
        """An async context manager: while its block lasts, the connections holding the runs'
        locks are watched, so that one that breaks is noticed at once, its runs taking their
        locks again on another connection (a run whose lock another holder took meanwhile is
        cancelled: its lease ends with :class:`~trio_agents.LeaseLostError`). ``async with
        service`` watches for its block, and a server on the service for its lifespan; unwatched,
        a broken connection's runs go on without their locks. A no-op when already watched."""
        return Watches(self._shared)

    # -- running queries --------------------------------------------------------------------

    async def _run(self, fn: Job[T], *, batched: bool = False) -> T:
        """``fn(connection)`` in one transaction on a pooled connection, in a worker thread;
        an append (``batched``) is group-committed with the appends made beside it."""
        await self._ensure_open()
        if batched and isinstance(fn, Append):
            revision: Any = await self._appends.commit(fn)
            return revision  # type: ignore[no-any-return]
        async with self._slots:
            take = functools.partial(_from_pool, self._pool, self._reach)
            give = functools.partial(_to_pool, self._pool, self._reach)
            retries = self._pool.max_size  # every pooled connection may be stale
            try:
                result = await _cancellable(take, give, fn, retries=retries)
            except psycopg.OperationalError as exc:
                if _is_outage(exc):
                    self._reach.failed(exc)
                raise _unreachable(exc) from exc
            self._reach.succeeded()
            return result

    async def _ensure_open(self) -> str:
        """Create or migrate the tables (once), open the pool; the current schema's name."""
        if self._schema is not None:
            return self._schema
        async with self._opening:
            if self._schema is None:
                # A connect or a migration cannot be interrupted: a cancelled caller leaves it
                # to finish (or fail) on its own.
                try:
                    schema = await trio.to_thread.run_sync(self._prepare, abandon_on_cancel=True)
                except psycopg.OperationalError as exc:
                    raise _unreachable(exc) from exc  # marked down by _open_connection
                await trio.to_thread.run_sync(functools.partial(self._pool.open, wait=False))
                self._schema = schema
            return self._schema

    def _prepare(self) -> str:
        with self._open_connection() as conn, conn.transaction():
            return _migrate(conn)

    def _open_connection(self, *, autocommit: bool = False) -> Any:
        """A new connection (blocking), its attempt noted in the service's reachability: while
        the database is known unreachable, it gives up connecting after a short timeout."""
        options = self._reach.connect_options()
        try:
            conn = psycopg.connect(self.dsn, autocommit=autocommit, **options)
        except psycopg.OperationalError as exc:
            self._reach.failed(exc)
            raise
        self._reach.succeeded()
        return conn

    # -- the dialect (the logic is SqlSessionService's) -------------------------------------

    def _create_job(
        self, key: Key, scopes: Scopes, stamp: float, history: History
    ) -> Job[Session | None]:
        app, user, own = scopes

        def create(conn: Any) -> Session | None:
            inserted = conn.execute(
                "INSERT INTO trio_agents_sessions VALUES (%s, %s, %s, %s, 0, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (*key, json.dumps(own), stamp, stamp),
            ).rowcount
            if not inserted:
                raise SessionExistsError(key[2])
            _merge_scopes(conn, key[0], key[1], app, user)
            for revision, (event, body) in enumerate(history):  # on the row inserted above
                Append(key, Mark(revision, None), event, body)(conn)
            return _read_session(conn, key, None)

        return create

    def _read_job(self, key: Key, config: GetSessionConfig | None) -> Job[Session | None]:
        return lambda conn: _read_session(conn, key, config)

    def _read_since_job(self, key: Key, cursor: int, known: int) -> Job[tuple[Any, Fresh] | None]:
        return lambda conn: _read_since(conn, key, cursor, known)

    def _session_of(self, key: Key, row: Any, events: EventLog) -> Session:
        return _session(key[0], *row, events=events)

    def _list_job(self, app_name: str, user_id: str | None) -> Job[list[Session]]:
        def read(conn: Any) -> list[Session]:
            rows = conn.execute(
                f"{_SESSION_QUERY} WHERE s.app_name = %s AND (%s::text IS NULL OR s.user_id = %s)"
                ' ORDER BY s.updated, s.user_id COLLATE "C", s.id COLLATE "C"',  # code points
                (app_name, user_id, user_id),
            ).fetchall()
            return [_session(app_name, *row, events=EventLog()) for row in rows]

        return read

    def _user_state_job(self, app_name: str, user_id: str) -> Job[dict[str, Any]]:
        def read(conn: Any) -> dict[str, Any]:
            row = conn.execute(
                "SELECT state FROM trio_agents_user_state WHERE app_name = %s AND user_id = %s",
                (app_name, user_id),
            ).fetchone()
            state: dict[str, Any] = load_stored(row[0]) if row else {}
            return state

        return read

    def _delete_job(self, key: Key) -> Job[None]:
        def delete(conn: Any) -> None:
            # The session row first: it waits for an append in flight (which holds the row), so
            # the events statement, with a snapshot of its own, then sees that append's event too.
            conn.execute(
                "DELETE FROM trio_agents_sessions WHERE app_name=%s AND user_id=%s AND id=%s", key
            )
            conn.execute(
                "DELETE FROM trio_agents_events WHERE app_name=%s AND user_id=%s AND session_id=%s",
                key,
            )

        return delete

    def _append_job(self, key: Key, mark: Mark, event: Event, body: str) -> Job[int]:
        return Append(key, mark, event, body)

    # -- exclusivity across processes --------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lease(
        self, *, app_name: str, user_id: str, session_id: str, wait: bool = False
    ) -> AsyncIterator[None]:
        """Hold a session-level advisory lock on a connection of its own for the run.

        Another holder anywhere (any process or machine on this database and schema) makes
        ``wait=False`` raise :class:`~trio_agents.SessionBusyError`; ``wait=True`` queues in
        PostgreSQL's lock queue (cancellable). The lock goes with its connection: when the run
        ends, or when the process dies and the server notices the connection is gone.

        While the service is watched (:meth:`watching`), a lock whose connection breaks is
        taken again on a shared connection at once; when another holder took it meanwhile
        (or the store cannot be reached), the block is cancelled and the lease raises
        :class:`~trio_agents.LeaseLostError`.
        """
        async with super().lease(
            app_name=app_name, user_id=user_id, session_id=session_id, wait=wait
        ):
            schema = await self._ensure_open()
            lock = _lock_id(schema, (app_name, user_id, session_id))
            async with self._lock_slot(session_id, wait):
                held = self._waiting_lock if wait else self._shared_lock
                async with held(session_id, lock):
                    yield

    @contextlib.asynccontextmanager
    async def _waiting_lock(self, session_id: str, lock: int) -> AsyncIterator[None]:
        """Queue for ``lock`` in PostgreSQL (cancellable) on a connection of its own (watched
        as the shared ones are: when it breaks, the lock is tried again on a shared one)."""
        async with self._lock_connection(session_id) as own:
            await _cancellable(lambda call: own.conn, _keep, lambda c: _lock(c, lock, True))
            held = Held(session_id, lock, own)
            own.leases.add(held)
            self._shared.watch(own)
            async with self._holding(held):
                yield

    @contextlib.asynccontextmanager
    async def _shared_lock(self, session_id: str, lock: int) -> AsyncIterator[None]:
        """Try ``lock`` on a connection shared with other runs' locks (see ``_pg_locks``)."""
        held = Held(session_id, lock, await self._locked(session_id, lock))
        held.shared.leases.add(held)
        async with self._holding(held):
            yield

    @contextlib.asynccontextmanager
    async def _holding(self, held: Held) -> AsyncIterator[None]:
        """The run of ``held``'s lock: cancelled if the lock is lost for good (see
        :meth:`_relock`), which the lease then raises; the lock is let go at the end."""
        try:
            try:
                with held.scope:
                    yield
            finally:  # unlocked before the lease returns: free at once for any process
                held.ended = True
                held.shared.leases.discard(held)
                if not held.shared.broken:
                    await held.shared.call(functools.partial(_unlock, lock=held.lock))
        finally:  # the error leaving the block stays the error
            if not held.shared.own:  # a run's own connection is closed with its lease
                await self._give_back(held.shared)
        if held.lost is not None:
            raise LeaseLostError(held.session_id, held.lost)

    async def _locked(self, session_id: str, lock: int) -> LockConnection:
        """A shared connection on which ``lock`` is now held. A connection found lost (its
        server process terminated while it sat idle, or the server restarted) is dropped and
        the lock tried on another one: every open one may be lost, then a new one is opened.

        Raises:
            SessionBusyError: another holder has the lock.
            StoreUnavailableError: the lock could not be taken on a live connection.
        """
        tries = self._shared.connections + 1
        for attempt in itertools.count(1):
            shared = await self._shared.take(session_id)
            try:
                held = await shared.call(functools.partial(_lock, lock=lock, wait=False))
            except psycopg.OperationalError as exc:
                await self._give_back(shared)
                if shared.broken and attempt < tries:
                    continue
                raise StoreUnavailableError(
                    f"Session {session_id}: the run's lock could not be taken "
                    f"({str(exc).strip()}); retry shortly",
                    session_id=session_id,
                ) from exc
            except BaseException:
                await self._give_back(shared)
                raise
            if held:
                return shared
            await self._give_back(shared)
            raise SessionBusyError(session_id)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _relock(self, lost: LockConnection) -> None:
        """The runs whose locks went with ``lost`` take them again on another connection; a
        run that cannot (another holder took its lock meanwhile, or the store is unreachable)
        is cancelled, its lease ending with :class:`~trio_agents.LeaseLostError`."""
        for held in [held for held in lost.leases if not held.ended]:
            try:
                shared = await self._locked(held.session_id, held.lock)
            except SessionBusyError:
                held.lose("another holder took it after its connection to PostgreSQL broke")
                continue
            except Exception as exc:  # StoreUnavailableError, or anything the driver raised
                held.lose(f"it could not be taken again: {exc}")
                continue
            if held.ended:  # the run ended meanwhile (its lease gave ``lost`` back)
                await shared.call(functools.partial(_unlock, lock=held.lock))
                await self._give_back(shared)
                continue
            lost.leases.discard(held)
            shared.leases.add(held)
            held.shared = shared
            if not lost.own:  # a run's own connection is closed with its lease
                await self._give_back(lost)

    async def _give_back(self, shared: LockConnection) -> None:
        with trio.CancelScope(shield=True):
            await self._shared.give_back(shared)

    async def lease_held(self, *, app_name: str, user_id: str, session_id: str) -> bool:
        """Whether any process on this database and schema holds the session's lease now."""
        schema = await self._ensure_open()
        high, low = _lock_halves(_lock_id(schema, (app_name, user_id, session_id)))
        return await self._run(lambda conn: _lock_granted(conn, high, low))

    async def lease_holder(self, *, app_name: str, user_id: str, session_id: str) -> int | None:
        """Which connection holds the session's lease now (its server process id; None when
        free): a run of another holder is another run."""
        schema = await self._ensure_open()
        high, low = _lock_halves(_lock_id(schema, (app_name, user_id, session_id)))
        return await self._run(lambda conn: _lock_holder(conn, high, low))

    async def signal_channel(self) -> str:
        """The name of the ``LISTEN``/``NOTIFY`` channel of this database schema's servers."""
        return _channel(await self._ensure_open())

    async def signal(self, *messages: str) -> None:
        """``NOTIFY`` each of ``messages`` (at most 8000 bytes each) on :meth:`signal_channel`,
        in order, in one transaction (PostgreSQL delivers identical ones once)."""
        channel = await self.signal_channel()

        def notify(conn: Any) -> None:
            for message in messages:
                conn.execute("SELECT pg_notify(%s, %s)", (channel, message))

        await self._run(notify)

    async def signal_cancel(self, message: str, *, invocation_id: str, digest: str) -> None:
        """Send ``message``, the cancel of ``invocation_id`` (of the session ``digest`` names),
        like :meth:`signal`, and record it in the same transaction, so that a process whose
        listener was reconnecting meanwhile still finds it (:meth:`cancels_since`). Records
        older than :data:`CANCELS_KEPT` seconds are deleted on the way."""
        channel = await self.signal_channel()

        def send(conn: Any) -> None:
            conn.execute(
                "DELETE FROM trio_agents_cancels WHERE sent < now() - make_interval(secs => %s)",
                (CANCELS_KEPT,),
            )
            conn.execute(
                "INSERT INTO trio_agents_cancels (invocation_id, digest, message)"
                " VALUES (%s, %s, %s)",
                (invocation_id, digest, message),
            )
            conn.execute("SELECT pg_notify(%s, %s)", (channel, message))

        await self._run(send)

    async def cancels_since(self, seconds: float) -> list[str]:
        """The cancels (:meth:`signal_cancel`'s messages) recorded in the last ``seconds``
        seconds of the database's clock (at most :data:`CANCELS_KEPT`), oldest first."""
        window = min(seconds, CANCELS_KEPT)

        def read(conn: Any) -> list[str]:
            rows = conn.execute(
                "SELECT message FROM trio_agents_cancels"
                " WHERE sent >= now() - make_interval(secs => %s) ORDER BY seq",
                (window,),
            )
            return [message for (message,) in rows]

        return await self._run(read)

    @contextlib.asynccontextmanager
    async def _lock_slot(self, session_id: str, wait: bool) -> AsyncIterator[None]:
        """One of the ``max_lock_connections`` runs that may hold a lock at once.

        Raises:
            StoreUnavailableError: every slot is taken (and ``wait`` is False).
        """
        slots, borrower = self._lock_slots, object()
        if wait:
            await slots.acquire_on_behalf_of(borrower)
        else:
            try:
                slots.acquire_on_behalf_of_nowait(borrower)
            except trio.WouldBlock:
                await trio.lowlevel.checkpoint()
                raise StoreUnavailableError(
                    f"Session {session_id}: all {slots.total_tokens:g} runs this process may "
                    "lock at once are in flight; retry shortly",
                    session_id=session_id,
                ) from None
        try:
            yield
        finally:
            slots.release_on_behalf_of(borrower)

    @contextlib.asynccontextmanager
    async def _lock_connection(self, session_id: str) -> AsyncIterator[LockConnection]:
        """A connection of its own, for a lock queued for in PostgreSQL.

        Raises:
            StoreUnavailableError: the server refused another connection.
        """
        own = LockConnection(await open_lock_connection(self._connect, session_id), own=True)
        try:
            yield own
        finally:
            await own.aclose()

    def held_connection(self) -> Any:
        """A new autocommit connection for locks or ``LISTEN`` (no transaction ever stays open
        on it), kept however long it idles (see :data:`~._pg_locks.HOLD_SETTINGS`); blocking:
        call it in a worker thread.

        Raises:
            StoreUnavailableError: the database could not be reached (at once while it is known
                to be unreachable: see :data:`~._pg_outage.OUTAGE_CONNECT_TIMEOUT`).
        """
        try:
            return self._connect()
        except psycopg.OperationalError as exc:
            raise _unreachable(exc) from exc

    def _connect(self) -> Any:
        conn = self._open_connection(autocommit=True)
        try:
            keep_holding(conn)
        except BaseException:
            conn.close()
            raise
        return conn


def _lock_id(schema: str, key: Key) -> int:
    """The advisory lock id of a session: a 64-bit hash, namespaced to trio_agents."""
    text = json.dumps([schema, *key]).encode()
    digest = hashlib.blake2b(text, digest_size=8, person=b"trio_agents.run").digest()
    return int.from_bytes(digest, "big", signed=True)


def _lock_halves(lock: int) -> tuple[int, int]:
    """The ``classid`` and ``objid`` under which ``pg_locks`` shows a 64-bit advisory lock."""
    unsigned = lock & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


def _lock_granted(conn: Any, high: int, low: int) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1)",
        (high, low),
    ).fetchone()
    return bool(row[0])


def _lock_holder(conn: Any, high: int, low: int) -> int | None:
    row = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1",
        (high, low),
    ).fetchone()
    return None if row is None else int(row[0])


def _channel(schema: str) -> str:
    """A channel name per schema (an identifier of at most 63 bytes, whatever the schema)."""
    digest = hashlib.blake2b(schema.encode(), digest_size=8, person=b"trio_agents.sig").hexdigest()
    return f"trio_agents_{digest}"


def _lock(conn: Any, lock: int, wait: bool) -> bool:
    if wait:
        conn.execute("SELECT pg_advisory_lock(%s)", (lock,))
        return True
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
    return bool(row[0])


def _unlock(conn: Any, lock: int) -> None:
    """Unlock on the server now (closing the connection alone lets it go a moment later)."""
    try:
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
    except psycopg.Error as exc:  # the close that follows releases it anyway
        logger.warning("could not unlock a run lock (%s); closing its connection", exc)


def _keep(conn: Any) -> None:
    """Release nothing: the lease's connection stays with the lease."""


# -- cancellable transactions in worker threads ------------------------------------------------


class _Abandoned(Exception):
    """The caller was cancelled before a statement started: the transaction rolls back."""


@attrs.define(eq=False)
class _Call:
    """One transaction in a worker thread, cancellable from Trio (see :func:`_cancellable`).

    ``conn`` is set, under ``lock``, only while the transaction runs: a cancel request is sent
    under the same lock, so it can never reach a connection another caller has since taken.
    """

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    done: threading.Event = attrs.field(factory=threading.Event)
    conn: Any = None
    cancelled: bool = False
    raise_cancel: Any = None
    sent: bool = False
    """Whether the job sent a statement (else a lost connection left nothing to undo)."""

    def check(self) -> None:
        if self.cancelled:
            raise _Abandoned


class _Guarded:
    """A connection whose ``execute`` starts no statement once the caller is cancelled."""

    __slots__ = ("_call", "_conn")

    def __init__(self, conn: Any, call: _Call) -> None:
        self._conn = conn
        self._call = call

    def execute(self, query: Any, params: Any = None) -> Any:
        self._call.check()
        self._call.sent = True
        return self._conn.execute(query, params)


async def _cancellable(
    acquire: Callable[[_Call], Any],
    release: Callable[[Any], None],
    fn: Callable[[Any], T],
    *,
    retries: int = 0,
) -> T:
    """Run ``fn(conn)`` in a transaction in a worker thread on ``acquire(call)``'s connection.

    A Trio cancellation stops the call: before the transaction it starts nothing; during a
    statement the server is asked to cancel it (repeatedly, until the call ends: a request that
    arrives between statements is dropped); the transaction then rolls back and the caller sees
    ``Cancelled``. A call that committed anyway returns its result. A connection found lost
    before ``fn`` sent anything (a pooled one whose server process was terminated, or a server
    restarted since) is given back and the call starts again on the next one, ``retries`` times.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    call = _Call()
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def work() -> T:
        try:
            for attempt in itertools.count():
                conn = acquire(call)
                try:
                    return _transaction(conn, call, fn)
                except psycopg.OperationalError:
                    if attempt >= retries or call.sent or not _lost(conn):
                        raise
                finally:
                    release(conn)
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            call.done.set()

    def deliver(result: Any) -> None:
        stopped = (_Abandoned, psycopg.errors.QueryCanceled)
        if call.cancelled and isinstance(getattr(result, "error", None), stopped):
            result = outcome.capture(call.raise_cancel)
        trio.lowlevel.reschedule(task, result)

    def finished(result: Any) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(deliver, result)

    def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
        call.raise_cancel = raise_cancel
        call.cancelled = True
        trio.lowlevel.start_thread_soon(functools.partial(_cancel_until_done, call), _ignore)
        return trio.lowlevel.Abort.FAILED

    trio.lowlevel.start_thread_soon(work, finished)
    result: T = await trio.lowlevel.wait_task_rescheduled(abort)
    return result


def _transaction(conn: Any, call: _Call, fn: Callable[[Any], T]) -> T:
    with call.lock:
        call.check()
        call.conn = conn
    try:
        with conn.transaction():
            return fn(_Guarded(conn, call))
    finally:
        with call.lock:
            call.conn = None


def _lost(conn: Any) -> bool:
    """Whether ``conn`` is closed or broken (its server process is gone)."""
    return bool(conn.closed or conn.broken)


def _unreachable(exc: Exception) -> StoreUnavailableError:
    """The error of a transaction that failed because the database could not be reached."""
    return StoreUnavailableError(
        f"the PostgreSQL session store is unreachable ({str(exc).strip()}); retry shortly",
        session_id="",
    )


def _cancel_until_done(call: _Call) -> None:
    while True:
        with call.lock:
            if call.conn is not None:
                with contextlib.suppress(psycopg.Error):
                    call.conn.cancel_safe(timeout=5)
        if call.done.wait(_CANCEL_REPEAT):
            return


def _ignore(result: object) -> None:
    """Nothing to report: a failed cancel request leaves the call to end on its own."""


def _from_pool(pool: Any, reach: Reachability, call: _Call) -> Any:
    """A pooled connection; gives up (``_Abandoned``) as soon as the caller is cancelled, and
    (``PoolTimeout``) after the pool's timeout, or :data:`~._pg_outage.OUTAGE_WAIT` once the
    database is known unreachable (checked at every poll: an outage found meanwhile counts)."""
    start = time.monotonic()
    while True:
        call.check()
        waited = time.monotonic() - start
        left = reach.wait(pool.timeout) - waited
        if left <= 0:
            down = reach.down
            reason = "" if down is None else f"; the database was found unreachable: {down}"
            raise psycopg_pool.PoolTimeout(
                f"no connection to PostgreSQL after {waited:.1f} s{reason}"
            )
        with contextlib.suppress(psycopg_pool.PoolTimeout):
            return pool.getconn(timeout=min(_POLL, left))


def _to_pool(pool: Any, reach: Reachability, conn: Any) -> None:
    """Give ``conn`` back to the pool; one found lost marks the database down until the next
    success (the retry that follows then waits for a new one only briefly)."""
    if _lost(conn):
        reach.failed(ConnectionError("a pooled connection to PostgreSQL was lost"))
    pool.putconn(conn)


def _is_outage(exc: Exception) -> bool:
    """Whether ``exc`` says the database could not be reached (a lost or refused connection, a
    server shutting down), not that the pool was busy or a statement failed."""
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(("08", "57P"))


# -- SQL ----------------------------------------------------------------------------------------


def _migrate(conn: Any) -> str:
    """Bring the schema to :data:`SCHEMA_VERSION`; the name of the schema it lives in."""
    (schema,) = conn.execute("SELECT current_schema()").fetchone()
    if schema is None:
        raise ConfigurationError("PostgreSQL: no schema on the search_path to create tables in")
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    conn.execute("CREATE TABLE IF NOT EXISTS trio_agents_meta (key TEXT PRIMARY KEY, value TEXT)")
    row = conn.execute("SELECT value FROM trio_agents_meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"PostgreSQL schema {schema!r} has trio_agents schema version {version}, newer than "
            f"this trio_agents understands ({SCHEMA_VERSION}); upgrade trio_agents"
        )
    for statements in MIGRATIONS[version:]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(
        "INSERT INTO trio_agents_meta VALUES ('schema_version', %s)"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (str(SCHEMA_VERSION),),
    )
    return str(schema)


def _merge_scopes(
    conn: Any, app_name: str, user_id: str, app: Mapping[str, Any], user: Mapping[str, Any]
) -> None:
    """Fold ``app:``/``user:`` deltas into their rows (locked, merged in Python: JSON numbers
    keep their exact type, which JSONB would not)."""
    if app:
        _merge_row(conn, "trio_agents_app_state", ("app_name",), (app_name,), app)
    if user:
        _merge_row(
            conn, "trio_agents_user_state", ("app_name", "user_id"), (app_name, user_id), user
        )


def _merge_row(
    conn: Any, table: str, columns: tuple[str, ...], key: tuple[str, ...], delta: Mapping[str, Any]
) -> None:
    where = " AND ".join(f"{c} = %s" for c in columns)
    names = ", ".join(columns)
    marks = ", ".join(["%s"] * (len(columns) + 1))
    conn.execute(
        f"INSERT INTO {table} ({names}, state) VALUES ({marks}) ON CONFLICT DO NOTHING",
        (*key, "{}"),
    )
    (current,) = conn.execute(f"SELECT state FROM {table} WHERE {where} FOR UPDATE", key).fetchone()
    merged = {**load_stored(current), **delta}
    conn.execute(f"UPDATE {table} SET state = %s WHERE {where}", (json.dumps(merged), *key))


_SESSION_QUERY = (
    "SELECT s.user_id, s.id, s.state, s.revision, s.updated, a.state, u.state, s.created"
    " FROM trio_agents_sessions s"
    " LEFT JOIN trio_agents_app_state a ON a.app_name = s.app_name"
    " LEFT JOIN trio_agents_user_state u ON u.app_name = s.app_name AND u.user_id = s.user_id"
)


def _session(
    app_name: str,
    user_id: str,
    session_id: str,
    own: str,
    revision: int,
    updated: float,
    app: str | None,
    user: str | None,
    created: float,
    *,
    events: EventLog,
) -> Session:
    scopes = [load_stored(text) if text else {} for text in (own, app, user)]
    return Session(
        id=session_id,
        app_name=app_name,
        user_id=user_id,
        state=merged_state(*scopes),
        events=events,
        revision=revision,
        last_update_time=updated,
        _incarnation=created,
    )


def _read_session(conn: Any, key: Key, config: GetSessionConfig | None) -> Session | None:
    row = conn.execute(
        f"{_SESSION_QUERY} WHERE s.app_name = %s AND s.user_id = %s AND s.id = %s", key
    ).fetchone()
    if row is None:
        return None
    return _session(key[0], *row, events=EventLog(_read_events(conn, key, config)))


SessionRow = tuple[str, str, str, int, float, str | None, str | None, float]
"""A session's user id, id, own state, revision, update time, app and user state, and creation
stamp (its incarnation)."""

_EVENTS_AFTER = (
    "SELECT seq, body FROM trio_agents_events WHERE app_name = %s AND user_id = %s"
    " AND session_id = %s AND seq > %s ORDER BY seq"
)
_EVENTS_UP_TO = _EVENTS_AFTER.replace("seq > %s", "seq <= %s")


def _read_since(conn: Any, key: Key, cursor: int, known: int) -> tuple[SessionRow, Fresh] | None:
    """The session row and its events numbered after ``cursor``, ``known`` events being cached;
    the whole history instead when those do not add up to the revision (another incarnation).

    One repeatable-read snapshot: the revision and the events agree. Within a session, sequence
    numbers follow commit order (an append draws its number holding the session row's lock)."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    row: SessionRow | None = conn.execute(
        f"{_SESSION_QUERY} WHERE s.app_name = %s AND s.user_id = %s AND s.id = %s", key
    ).fetchone()
    if row is None:
        return None
    args = (*key, cursor)
    fresh = read_fresh(
        row[3],
        cursor,
        known,
        lambda: _parsed(conn, _EVENTS_AFTER, args),
        lambda: _parsed(conn, _EVENTS_UP_TO, args),
    )
    return row, fresh


def _parsed(conn: Any, query: str, args: tuple[Any, ...]) -> list[tuple[int, Event]]:
    """(seq, event) rows of ``query``, in its order."""
    return [(seq, Event.from_json(body)) for seq, body in conn.execute(query, args)]


def _read_events(conn: Any, key: Key, config: GetSessionConfig | None) -> list[Event]:
    """The session's events in commit order, windowed in SQL (only those are parsed)."""
    where = "app_name = %s AND user_id = %s AND session_id = %s"
    args: list[Any] = list(key)
    if config is not None and config.after_timestamp is not None:
        where += " AND timestamp >= %s"
        args.append(config.after_timestamp)
    if config is not None and config.num_recent_events is not None:
        query = (
            f"SELECT body FROM (SELECT body, seq FROM trio_agents_events WHERE {where}"
            " ORDER BY seq DESC LIMIT %s) AS recent ORDER BY seq"
        )
        args.append(config.num_recent_events)
    else:
        query = f"SELECT body FROM trio_agents_events WHERE {where} ORDER BY seq"
    return [Event.from_json(body) for (body,) in conn.execute(query, args)]
