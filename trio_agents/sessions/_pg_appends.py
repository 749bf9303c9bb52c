"""The SQL of a batch of PostgreSQL appends (what one group commit writes).

A batch's appends are checked and written as if they had run one after the other in the batch's
order. The rows they touch are locked first: sessions, then app state, then user state, each in
key order (the order an append alone or a ``create_session`` takes them in), so batches in several
processes wait for one another but never deadlock. Each append's revision is then checked against
its locked session row as the batch's earlier appends left it: an append through a stale snapshot,
or to a session deleted meanwhile, is refused alone and nothing of it is written. The accepted
ones are written by a few statements for the whole batch (every event in one insert, every
session in one update, every app and user row in one more each): on a connection in pipeline mode
that is two round trips, the locks and the writes, whatever the size of the batch. State deltas
are merged in Python (JSON numbers keep their exact type, which JSONB would not).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import outcome

from .._errors import SessionNotFoundError, StaleSessionError
from .._events import Event
from .._serde import load_stored
from .._state import split_state_delta

__all__ = ["Append", "write_batch"]

Key = tuple[str, str, str]
UserKey = tuple[str, str]


@attrs.frozen(eq=False)
class Append:
    """Commit ``event`` (serialized as ``body``) if its session is still at ``revision``.

    A job of the service's ``_run``: called on a connection, it is a batch of one.
    """

    key: Key
    revision: int
    event: Event
    body: str

    def __call__(self, conn: Any) -> int:
        """Write this append alone in the connection's transaction; the new revision."""
        result: int = write_batch(conn, [self])[0].unwrap()
        return result


@attrs.define(eq=False)
class _Locked:
    """A locked row as the batch's accepted appends leave it (``text``: its stored state)."""

    text: str | None
    revision: int = 0
    updated: float = 0.0
    merged: dict[str, Any] | None = None  # set once a delta is merged into it

    def merging(self, delta: dict[str, Any]) -> dict[str, Any]:
        """The row's state with ``delta`` merged in (not kept: see :func:`_accept`)."""
        current = self.merged if self.merged is not None else load_stored(self.text or "{}")
        return {**current, **delta}


def write_batch(conn: Any, appends: Sequence[Append]) -> list[outcome.Outcome[int]]:
    """Lock, check and write ``appends`` in the connection's open transaction (committed by the
    caller); each one's outcome: its new revision, or why it was refused (nothing of it written).

    Raises whatever a statement raises: the transaction must then be rolled back.
    """
    deltas = [split_state_delta(a.event.actions.state_delta) for a in appends]
    own = {a.key for a, (_, _, mine) in zip(appends, deltas, strict=True) if mine}
    apps = sorted({a.key[0] for a, (app, _, _) in zip(appends, deltas, strict=True) if app})
    users = sorted({a.key[:2] for a, (_, user, _) in zip(appends, deltas, strict=True) if user})
    with _pipeline(conn):
        locked = _lock(conn, sorted({a.key for a in appends}), own, apps, users)
        sessions = {(a, u, i): _Locked(text, revision) for a, u, i, revision, text in locked[0]}
        app_rows = {app: _Locked(text) for app, text in locked[1]}
        user_rows = {(app, user): _Locked(text) for app, user, text in locked[2]}
        results: list[outcome.Outcome[int]] = [
            outcome.capture(_accept, a, delta, sessions, app_rows, user_rows)
            for a, delta in zip(appends, deltas, strict=True)
        ]
        accepted = [a for a, r in zip(appends, results, strict=True) if _ok(r)]
        if accepted:
            _write(conn, accepted, {a.key: sessions[a.key] for a in accepted}, app_rows, user_rows)
    return results


def _ok(result: outcome.Outcome[int]) -> bool:
    return isinstance(result, outcome.Value)


def _pipeline(conn: Any) -> contextlib.AbstractContextManager[Any]:
    """Pipeline mode on a plain psycopg connection (when libpq has it), else nothing."""
    import psycopg

    if isinstance(conn, psycopg.Connection) and psycopg.Pipeline.is_supported():
        return conn.pipeline()
    return contextlib.nullcontext()


def _lock(
    conn: Any, keys: list[Key], own: set[Key], apps: list[str], users: list[UserKey]
) -> tuple[list[Any], list[Any], list[Any]]:
    """Lock the batch's rows in one round trip: its sessions (with their state where an append
    changes it), the app and user rows its deltas merge into (created empty if missing)."""
    app_ids, user_ids, ids = _columns(keys, 3)
    sessions = conn.execute(_LOCK_SESSIONS, (app_ids, user_ids, ids, [k in own for k in keys]))
    app_rows = user_rows = None
    if apps:
        conn.execute(_ENSURE_APPS, (apps,))
        app_rows = conn.execute(_LOCK_APPS, (apps,))
    if users:
        pairs = _columns(users, 2)
        conn.execute(_ENSURE_USERS, pairs)
        user_rows = conn.execute(_LOCK_USERS, pairs)
    return sessions.fetchall(), _fetched(app_rows), _fetched(user_rows)


def _fetched(cursor: Any) -> list[Any]:
    return [] if cursor is None else list(cursor.fetchall())


def _accept(
    append: Append,
    delta: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    sessions: dict[Key, _Locked],
    app_rows: dict[str, _Locked],
    user_rows: dict[UserKey, _Locked],
) -> int:
    """Check ``append`` against its locked session as the batch left it so far and fold it in;
    the new revision. Everything is computed before anything is kept, so a refusal (or an
    error) leaves the rows as they were."""
    key = append.key
    session = sessions.get(key)
    if session is None:
        raise SessionNotFoundError(key[2])
    if session.revision != append.revision:
        raise StaleSessionError(key[2], expected=append.revision, actual=session.revision)
    app, user, own = delta
    parts = ((session, own), (app_rows.get(key[0]), app), (user_rows.get(key[:2]), user))
    merged = [(row, row.merging(part)) for row, part in parts if part and row is not None]
    for row, state in merged:
        row.merged = state
    session.revision += 1
    session.updated = append.event.timestamp
    return session.revision


def _write(
    conn: Any,
    accepted: list[Append],
    sessions: dict[Key, _Locked],
    app_rows: dict[str, _Locked],
    user_rows: dict[UserKey, _Locked],
) -> None:
    """The accepted appends' events, in the batch's order; the rows they changed."""
    events = [(*a.key, a.event.timestamp, a.body) for a in accepted]
    conn.execute(_INSERT_EVENTS, _columns(events, 5))
    conn.execute(
        _UPDATE_SESSIONS,
        _columns(
            [(*k, r.revision, r.updated, _dumped(r)) for k, r in sessions.items()],
            6,
        ),
    )
    apps = [(name, _dumped(row)) for name, row in app_rows.items() if row.merged is not None]
    if apps:
        conn.execute(_UPDATE_APPS, _columns(apps, 2))
    users = [(*k, _dumped(row)) for k, row in user_rows.items() if row.merged is not None]
    if users:
        conn.execute(_UPDATE_USERS, _columns(users, 3))


def _dumped(row: _Locked) -> str | None:
    return None if row.merged is None else json.dumps(row.merged)


def _columns(rows: Iterable[tuple[Any, ...]], width: int) -> tuple[list[Any], ...]:
    """Rows as ``width`` column lists (the arrays ``unnest`` takes back apart)."""
    columns: tuple[list[Any], ...] = tuple([] for _ in range(width))
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return columns


_LOCK_SESSIONS = (
    "SELECT s.app_name, s.user_id, s.id, s.revision, CASE WHEN k.own THEN s.state END"
    " FROM trio_agents_sessions s"
    " JOIN unnest(%b::text[], %b::text[], %b::text[], %b::bool[]) AS k(app_name, user_id, id, own)"
    " ON s.app_name = k.app_name AND s.user_id = k.user_id AND s.id = k.id"
    " ORDER BY s.app_name, s.user_id, s.id FOR UPDATE OF s"
)
_ENSURE_APPS = (
    "INSERT INTO trio_agents_app_state (app_name, state)"
    " SELECT app_name, '{}' FROM unnest(%b::text[]) AS k(app_name) ON CONFLICT DO NOTHING"
)
_LOCK_APPS = (
    "SELECT app_name, state FROM trio_agents_app_state WHERE app_name = ANY(%b::text[])"
    " ORDER BY app_name FOR UPDATE"
)
_ENSURE_USERS = (
    "INSERT INTO trio_agents_user_state (app_name, user_id, state)"
    " SELECT app_name, user_id, '{}' FROM unnest(%b::text[], %b::text[]) AS k(app_name, user_id)"
    " ON CONFLICT DO NOTHING"
)
_LOCK_USERS = (
    "SELECT s.app_name, s.user_id, s.state FROM trio_agents_user_state s"
    " JOIN unnest(%b::text[], %b::text[]) AS k(app_name, user_id)"
    " ON s.app_name = k.app_name AND s.user_id = k.user_id"
    " ORDER BY s.app_name, s.user_id FOR UPDATE OF s"
)
_INSERT_EVENTS = (
    "INSERT INTO trio_agents_events (app_name, user_id, session_id, timestamp, body)"
    " SELECT app_name, user_id, id, ts, body"
    " FROM unnest(%b::text[], %b::text[], %b::text[], %b::float8[], %b::text[])"
    " WITH ORDINALITY AS k(app_name, user_id, id, ts, body, n) ORDER BY n"
)
_UPDATE_SESSIONS = (
    "UPDATE trio_agents_sessions s SET revision = k.revision, updated = k.updated,"
    " state = COALESCE(k.state, s.state)"
    " FROM unnest(%b::text[], %b::text[], %b::text[], %b::bigint[], %b::float8[], %b::text[])"
    " AS k(app_name, user_id, id, revision, updated, state)"
    " WHERE s.app_name = k.app_name AND s.user_id = k.user_id AND s.id = k.id"
)
_UPDATE_APPS = (
    "UPDATE trio_agents_app_state s SET state = k.state"
    " FROM unnest(%b::text[], %b::text[]) AS k(app_name, state) WHERE s.app_name = k.app_name"
)
_UPDATE_USERS = (
    "UPDATE trio_agents_user_state s SET state = k.state"
    " FROM unnest(%b::text[], %b::text[], %b::text[]) AS k(app_name, user_id, state)"
    " WHERE s.app_name = k.app_name AND s.user_id = k.user_id"
)
