"""Sessions in a SQLite file: durable, versioned, and exclusive across processes.

The connection lives on a thread of its own (:class:`~trio_agents._sqlite_thread.SqliteThread`);
Trio never waits on a lock inside a statement for long: a statement gives up after
:data:`~trio_agents._sqlite_thread.LOCK_SLICE` and the job is retried from Trio until
``busy_timeout``, so a cancelled caller is released promptly, with nothing half-done (every job
is one transaction).

Every append is one ``BEGIN IMMEDIATE`` transaction whose ``UPDATE … WHERE revision = ?`` is the
revision check (and ``created = ?`` the incarnation check: a session deleted and created again under
the same id is another), which stores the event and folds its delta into the session, user and app
state. Events are read back in commit order (a sequence column). The service keeps the histories it
has read (:mod:`._event_cache`), so reading a session again parses only the events committed since,
by any process; a windowed read of a session not in that cache is cut in SQL, so it parses only the
events asked for. Invocations on one session are exclusive across processes through an OS file lock
(:mod:`._lockfile`), which dies with the process that holds it.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar

import trio

from .._errors import (
    ConfigurationError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
)
from .._events import Event
from .._serde import load_stored
from .._sqlite_thread import SqliteThread
from .._state import merged_state, split_state_delta
from ._base import EventLog, GetSessionConfig, Session
from ._event_cache import (
    DEFAULT_CACHED_SESSIONS,
    EventCache,
    Fresh,
    read_fresh,
)
from ._lockfile import lock_path, try_lock, unlock
from ._sql import History, Job, Mark, Scopes, SqlSessionService
from ._sqlite_schema import connection_setup

__all__ = ["SqliteSessionService"]


T = TypeVar("T")
Key = tuple[str, str, str]
"""(app_name, user_id, session_id)."""


class SqliteSessionService(SqlSessionService):
    """Sessions in the SQLite file at ``path`` (created when missing), safe to share between
    processes on one machine.

    ``durable=True`` (the default) commits with ``synchronous=FULL``: a committed event survives
    a power cut. ``durable=False`` uses ``synchronous=NORMAL``: appends skip the fsync and are
    several times faster; a crash of the process still loses nothing, a power cut may lose the
    last commits.

    ``busy_timeout`` (seconds) bounds how long a call waits for another process's write lock
    before raising ``sqlite3.OperationalError`` ("database is locked").

    A run leases its session (:meth:`lease`): while it runs, a run on that session from any
    other process, or another service in this process, gets
    :class:`~trio_agents.SessionBusyError` or waits its turn. The lease is a ``flock`` on a
    lock file in ``<path>-leases/`` beside the database, so it lasts exactly as long as its
    holder: a process that dies, even by ``SIGKILL``, frees its sessions at once.

    The histories of the ``cached_sessions`` most recently read sessions stay in memory, so
    ``get_session`` on one of them reads and parses only the events committed since (by this
    service or any other writer of the file); ``cached_sessions=0`` reads every history whole.

    A file that is not a trio_agents session database, or one written by a newer version, raises
    :class:`~trio_agents.ConfigurationError` on first use and is left untouched. Close the
    service with :meth:`aclose` or ``async with``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = True,
        busy_timeout: float = 10.0,
        cached_sessions: int = DEFAULT_CACHED_SESSIONS,
    ) -> None:
        super().__init__()
        if busy_timeout < 0:
            raise ConfigurationError(f"busy_timeout must be >= 0, got {busy_timeout}")
        if cached_sessions < 0:
            raise ConfigurationError(f"cached_sessions must be >= 0, got {cached_sessions}")
        self.path = os.fspath(path)
        self.durable = durable
        self.busy_timeout = busy_timeout
        self._db = SqliteThread(self.path, connection_setup(self.path, durable=durable))
        self._cache = EventCache(cached_sessions)

    def __repr__(self) -> str:
        return f"SqliteSessionService({self.path!r}, durable={self.durable})"

    async def aclose(self) -> None:
        """Finish the pending calls, then close the connection and its thread."""
        await self._db.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()

    async def _run(self, job: Job[T], *, batched: bool = False) -> T:
        """Run ``job`` (one transaction, or with ``batched`` a part of one shared with the
        appends queued beside it) on the connection's thread, retrying while locked."""
        try:
            return await self._db.run_patiently(job, patience=self.busy_timeout, batched=batched)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CANTOPEN:
                raise ConfigurationError(
                    f"cannot open the session database {self.path!r}: {exc}"
                ) from exc
            raise

    # -- the dialect (the logic is SqlSessionService's) -------------------------------------

    def _create_job(
        self, key: Key, scopes: Scopes, stamp: float, history: History
    ) -> Job[Session | None]:
        return functools.partial(_create, key=key, scopes=scopes, stamp=stamp, history=history)

    def _read_job(self, key: Key, config: GetSessionConfig | None) -> Job[Session | None]:
        return functools.partial(_get, key=key, config=config)

    def _read_since_job(self, key: Key, cursor: int, known: int) -> Job[tuple[Any, Fresh] | None]:
        return functools.partial(_get_since, key=key, cursor=cursor, known=known)

    def _session_of(self, key: Key, row: Any, events: EventLog) -> Session:
        return _session(key, row, events)

    def _list_job(self, app_name: str, user_id: str | None) -> Job[list[Session]]:
        return functools.partial(_list, app_name=app_name, user_id=user_id)

    def _user_state_job(self, app_name: str, user_id: str) -> Job[dict[str, Any]]:
        return functools.partial(_user_state, key=(app_name, user_id))

    def _delete_job(self, key: Key) -> Job[None]:
        return functools.partial(_delete, key=key)

    def _append_job(self, key: Key, mark: Mark, event: Event, body: str) -> Job[int]:
        # Runs inside the transaction the connection's thread opens for a batch of appends
        # (group commit, see _sqlite_thread).
        return functools.partial(_append_in_transaction, key=key, mark=mark, event=event, body=body)

    # -- exclusivity across processes --------------------------------------------------------

    @asynccontextmanager
    async def lease(
        self, *, app_name: str, user_id: str, session_id: str, wait: bool = False
    ) -> AsyncIterator[None]:
        """Exclusive across processes: an OS lock on the session's lock file, which the kernel
        releases when this process dies, however it dies (see :mod:`._lockfile`).

        In this process the base class's per-session queue comes first, so tasks queue here in
        arrival order. Between processes (and services) a waiting run retries the lock, with
        backoff up to :data:`LEASE_POLL` seconds. The attempts never block: each is a
        non-blocking ``flock`` in a worker thread, and the wait between them is a
        ``trio.sleep``, so a cancelled waiter leaves at once holding nothing. (A blocking
        ``flock`` in a thread could not be cancelled: the thread would go on waiting and take
        the lock for nobody.)
        """
        async with super().lease(
            app_name=app_name, user_id=user_id, session_id=session_id, wait=wait
        ):
            if self.path in _PRIVATE_DATABASES:  # no other connection can see it
                yield
                return
            path = lock_path(self.path, (app_name, user_id, session_id))
            fd = await _take_lock(path, session_id, wait)
            try:
                yield
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(unlock, path, fd)


LEASE_POLL = 0.1
"""The longest pause, in seconds, between two attempts of a run waiting for a session that
another process (or service) holds."""

_PRIVATE_DATABASES = ("", ":memory:")


async def _take_lock(path: str, session_id: str, wait: bool) -> int:
    """The descriptor holding ``path``'s lock; :class:`SessionBusyError` if held and not
    ``wait``. An attempt under way when the caller is cancelled still returns its lock (the
    thread is not abandoned), so the caller's ``finally`` releases it."""
    delay = 0.005
    while (fd := await trio.to_thread.run_sync(try_lock, path)) is None:
        if not wait:
            raise SessionBusyError(session_id)
        await trio.sleep(delay)
        delay = min(delay * 2, LEASE_POLL)
    return fd


# -- jobs: each runs on the connection's thread as one transaction (appends: a batch's) ---------


class _transaction:
    """``BEGIN`` … ``COMMIT``; on any failure (an interrupt too) the transaction is rolled back
    and the original error propagates."""

    def __init__(self, conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> None:
        self.conn = conn
        self.mode = mode

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute(f"BEGIN {self.mode}")
        return self.conn

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if kind is None:
                self.conn.execute("COMMIT")
        finally:
            if self.conn.in_transaction:  # SQLite rolls some failures back by itself
                self.conn.execute("ROLLBACK")


def _loads(text: str | None) -> dict[str, Any]:
    return {} if text is None else dict(load_stored(text))


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _create(
    conn: sqlite3.Connection,
    *,
    key: Key,
    scopes: Scopes,
    stamp: float,
    history: History,
) -> Session | None:
    app, user, own = scopes
    with _transaction(conn):
        try:
            conn.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, 0, ?, ?)",
                (*key, _dumps(own), stamp, stamp),
            )
        except sqlite3.IntegrityError:
            raise SessionExistsError(key[2]) from None
        _merge_scopes(conn, key, app, user)
        for revision, (event, body) in enumerate(history):
            mark = Mark(revision, None)  # the row this transaction inserted
            _append_in_transaction(conn, key=key, mark=mark, event=event, body=body)
        return _read_session(conn, key, None if history else GetSessionConfig(num_recent_events=0))


def _get(conn: sqlite3.Connection, *, key: Key, config: GetSessionConfig | None) -> Session | None:
    with _transaction(conn, "DEFERRED"):  # one snapshot: the revision matches the events
        return _read_session(conn, key, config)


_EVENTS_AFTER = (
    "SELECT seq, body FROM events WHERE app_name=? AND user_id=? AND session_id=? AND seq > ?"
    " ORDER BY seq"
)
_EVENTS_UP_TO = _EVENTS_AFTER.replace("seq > ?", "seq <= ?")


def _get_since(
    conn: sqlite3.Connection, *, key: Key, cursor: int, known: int
) -> tuple[SessionRow, Fresh] | None:
    """The session row and its events numbered after ``cursor``, ``known`` events being cached;
    the whole history instead when those do not add up to the revision (another incarnation)."""
    with _transaction(conn, "DEFERRED"):  # one snapshot: the revision matches the events
        row = _session_row(conn, key)
        if row is None:
            return None
        args = (*key, cursor)
        fresh = read_fresh(
            row[1],
            cursor,
            known,
            lambda: _parsed(conn, _EVENTS_AFTER, args),
            lambda: _parsed(conn, _EVENTS_UP_TO, args),
        )
    return row, fresh


def _parsed(conn: sqlite3.Connection, query: str, args: tuple[Any, ...]) -> list[tuple[int, Event]]:
    """(seq, event) rows, parsed as they are read: a cancelled caller's interrupt stops a long
    read between rows."""
    return [(seq, Event.from_json(body)) for seq, body in conn.execute(query, args)]


def _list(conn: sqlite3.Connection, *, app_name: str, user_id: str | None) -> list[Session]:
    query = "SELECT user_id, id, state, revision, updated, created FROM sessions WHERE app_name = ?"
    args: tuple[str, ...] = (app_name,)
    if user_id is not None:
        query, args = query + " AND user_id = ?", (app_name, user_id)
    with _transaction(conn, "DEFERRED"):
        rows = conn.execute(query + " ORDER BY updated, user_id, id", args).fetchall()
        app = _scope(conn, "SELECT state FROM app_state WHERE app_name = ?", (app_name,))
        users: dict[str, dict[str, Any]] = {}
        for user, *_ in rows:
            if user not in users:
                users[user] = _scope(
                    conn,
                    "SELECT state FROM user_state WHERE app_name = ? AND user_id = ?",
                    (app_name, user),
                )
    return [
        Session(
            id=sid,
            app_name=app_name,
            user_id=user,
            state=merged_state(_loads(state), app, users[user]),
            revision=revision,
            last_update_time=updated,
            _incarnation=created,
        )
        for user, sid, state, revision, updated, created in rows
    ]


def _user_state(conn: sqlite3.Connection, *, key: tuple[str, str]) -> dict[str, Any]:
    with _transaction(conn, "DEFERRED"):
        return _scope(conn, "SELECT state FROM user_state WHERE app_name = ? AND user_id = ?", key)


def _delete(conn: sqlite3.Connection, *, key: Key) -> None:
    with _transaction(conn):
        conn.execute("DELETE FROM events WHERE app_name=? AND user_id=? AND session_id=?", key)
        conn.execute("DELETE FROM sessions WHERE app_name=? AND user_id=? AND id=?", key)


def _append_in_transaction(
    conn: sqlite3.Connection, *, key: Key, mark: Mark, event: Event, body: str
) -> int:
    """Store ``event`` if the session is still as ``mark`` saw it; return the new revision.

    Runs inside a transaction (and savepoint) that the connection's thread opened for a batch
    of appends: concurrent appends to different sessions share one commit and one fsync."""
    app, user, own = split_state_delta(event.actions.state_delta)
    revision, incarnation = mark.revision, mark.incarnation
    rows = conn.execute(
        "UPDATE sessions SET revision = revision + 1, updated = ?"
        " WHERE app_name=? AND user_id=? AND id=? AND revision=? AND (? IS NULL OR created=?)"
        " RETURNING state",
        (event.timestamp, *key, revision, incarnation, incarnation),
    ).fetchall()
    if not rows:
        _refuse_append(conn, key, mark)
    if own:
        conn.execute(
            "UPDATE sessions SET state = ? WHERE app_name=? AND user_id=? AND id=?",
            (_dumps({**_loads(rows[0][0]), **own}), *key),
        )
    conn.execute(
        "INSERT INTO events (app_name, user_id, session_id, timestamp, body)"
        " VALUES (?, ?, ?, ?, ?)",
        (*key, event.timestamp, body),
    )
    _merge_scopes(conn, key, app, user)
    return revision + 1


def _refuse_append(conn: sqlite3.Connection, key: Key, mark: Mark) -> None:
    row = conn.execute(
        "SELECT revision, created FROM sessions WHERE app_name=? AND user_id=? AND id=?", key
    ).fetchone()
    if row is None:
        raise SessionNotFoundError(key[2])
    raise mark.stale(key[2], *row)


def _scope(conn: sqlite3.Connection, query: str, args: tuple[str, ...]) -> dict[str, Any]:
    row = conn.execute(query, args).fetchone()
    return _loads(row and row[0])


def _merge_scopes(
    conn: sqlite3.Connection, key: Key, app: Mapping[str, Any], user: Mapping[str, Any]
) -> None:
    if app:
        merged = {**_scope(conn, "SELECT state FROM app_state WHERE app_name = ?", key[:1]), **app}
        conn.execute("INSERT OR REPLACE INTO app_state VALUES (?, ?)", (key[0], _dumps(merged)))
    if user:
        query = "SELECT state FROM user_state WHERE app_name = ? AND user_id = ?"
        merged = {**_scope(conn, query, key[:2]), **user}
        conn.execute(
            "INSERT OR REPLACE INTO user_state VALUES (?, ?, ?)", (*key[:2], _dumps(merged))
        )


SessionRow = tuple[str, int, float, str | None, str | None, float]
"""A session's own state, revision and update time, its app and user state (JSON), and its
creation stamp (its incarnation)."""


def _session_row(conn: sqlite3.Connection, key: Key) -> SessionRow | None:
    row: SessionRow | None = conn.execute(
        "SELECT s.state, s.revision, s.updated,"
        " (SELECT state FROM app_state a WHERE a.app_name = s.app_name),"
        " (SELECT state FROM user_state u WHERE u.app_name = s.app_name AND u.user_id = s.user_id),"
        " s.created FROM sessions s WHERE s.app_name=? AND s.user_id=? AND s.id=?",
        key,
    ).fetchone()
    return row


def _session(key: Key, row: SessionRow, events: EventLog) -> Session:
    own, revision, updated, app, user, created = row
    return Session(
        id=key[2],
        app_name=key[0],
        user_id=key[1],
        state=merged_state(_loads(own), _loads(app), _loads(user)),
        events=events,
        revision=revision,
        last_update_time=updated,
        _incarnation=created,
    )


def _read_session(
    conn: sqlite3.Connection, key: Key, config: GetSessionConfig | None
) -> Session | None:
    row = _session_row(conn, key)
    if row is None:
        return None
    return _session(key, row, EventLog(_read_events(conn, key, config)))


def _read_events(
    conn: sqlite3.Connection, key: Key, config: GetSessionConfig | None
) -> list[Event]:
    """The events in commit order; the window is cut in SQL, so only it is parsed (R-ST-8)."""
    where = "app_name = ? AND user_id = ? AND session_id = ?"
    args: list[Any] = list(key)
    if config is not None and config.after_timestamp is not None:
        where += " AND timestamp >= ?"
        args.append(config.after_timestamp)
    if config is not None and config.num_recent_events is not None:
        if config.num_recent_events == 0:
            return []
        query = (
            f"SELECT body FROM (SELECT body, seq FROM events WHERE {where}"
            " ORDER BY seq DESC LIMIT ?) ORDER BY seq"
        )
        args.append(config.num_recent_events)
    else:
        query = f"SELECT body FROM events WHERE {where} ORDER BY seq"
    return [Event.from_json(body) for (body,) in conn.execute(query, args)]
