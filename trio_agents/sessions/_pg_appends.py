"""The SQL of a batch of PostgreSQL appends (what one group commit writes).

A batch's appends are checked and written as if they had run one after the other in the batch's
order. The rows they touch are locked first: sessions, then app state, then user state, each in key
order (the order ``create_session`` takes them in too), so batches in several processes wait for one
another but never deadlock. Each append's revision (and incarnation) is then checked against its
locked session row as the batch's earlier appends left it: an append through a stale snapshot, or to
a session deleted (or deleted and created again) meanwhile, is refused alone and nothing of it is
written. The accepted ones are written by one statement for the whole batch (every event, every
session row, every app and user row it changed). So a batch is four round trips (``BEGIN``, the
locks, the writes, ``COMMIT``; one more for app and one for user state when a delta has such keys)
whatever its size. State deltas are merged in Python (JSON numbers keep their exact type, which
JSONB would not).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import outcome

from .._errors import SessionNotFoundError
from .._events import Event
from .._serde import load_stored
from .._state import split_state_delta
from ._sql import Mark

__all__: list[str] = []  # internal: the PostgreSQL session service's group commit

Key = tuple[str, str, str]


@attrs.frozen(eq=False)
class Append:
    """Commit ``event`` (serialized as ``body``) if its session is still as ``mark`` saw it.

    A job of the service's ``_run``: called on a connection, it is a batch of one.
    """

    key: Key
    mark: Mark
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
    created: float = 0.0
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
    pairs = list(zip(appends, deltas, strict=True))
    own = {a.key for a, (_, _, mine) in pairs if mine}
    sessions = _lock_sessions(conn, sorted({a.key for a in appends}), own)
    app_rows = _lock_scope(
        conn, _LOCK_APPS, sorted({(a.key[0],) for a, (app, _, _) in pairs if app})
    )
    user_rows = _lock_scope(
        conn, _LOCK_USERS, sorted({a.key[:2] for a, (_, user, _) in pairs if user})
    )
    results: list[outcome.Outcome[int]] = [
        outcome.capture(_accept, a, delta, sessions, app_rows, user_rows) for a, delta in pairs
    ]
    accepted = [a for a, r in zip(appends, results, strict=True) if isinstance(r, outcome.Value)]
    if accepted:
        _write(conn, accepted, {a.key: sessions[a.key] for a in accepted}, app_rows, user_rows)
    return results


def _lock_sessions(conn: Any, keys: list[Key], own: set[Key]) -> dict[Key, _Locked]:
    """Lock the batch's sessions, in key order; read the state of those an append changes."""
    rows = [(*key, key in own) for key in keys]
    found = _execute(conn, _LOCK_SESSIONS, rows, _SESSION_KEY).fetchall()
    return {
        (app, user, id_): _Locked(text, revision, created)
        for app, user, id_, revision, created, text in found
    }


def _lock_scope(
    conn: Any, query: str, keys: list[tuple[str, ...]]
) -> dict[tuple[str, ...], _Locked]:
    """Lock the app or user rows ``keys`` (created empty if missing), in key order."""
    if not keys:
        return {}
    found = _execute(conn, query, keys, ("text",) * len(keys[0])).fetchall()
    return {tuple(row[:-1]): _Locked(row[-1]) for row in found}


def _accept(
    append: Append,
    delta: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    sessions: dict[Key, _Locked],
    app_rows: dict[tuple[str, ...], _Locked],
    user_rows: dict[tuple[str, ...], _Locked],
) -> int:
    """Check ``append`` against its locked session as the batch left it so far and fold it in;
    the new revision. Everything is computed before anything is kept, so a refusal (or an
    error) leaves the rows as they were."""
    key = append.key
    session = sessions.get(key)
    if session is None:
        raise SessionNotFoundError(key[2])
    if not append.mark.matches(session.revision, session.created):
        raise append.mark.stale(key[2], session.revision, session.created)
    app, user, own = delta
    parts = ((session, own), (app_rows.get(key[:1]), app), (user_rows.get(key[:2]), user))
    merged = [(row, row.merging(part)) for row, part in parts if part and row is not None]
    for row, state in merged:
        row.merged = state
    session.revision += 1
    session.updated = append.event.timestamp
    return session.revision


Part = tuple[str, list[tuple[Any, ...]], tuple[str, ...]]  # a query, its rows, their types


def _write(
    conn: Any,
    accepted: list[Append],
    sessions: dict[Key, _Locked],
    app_rows: dict[tuple[str, ...], _Locked],
    user_rows: dict[tuple[str, ...], _Locked],
) -> None:
    """One statement: the accepted appends' events, in the batch's order, and the rows they
    changed."""
    insert = _INSERT_EVENT if len(accepted) == 1 else _INSERT_EVENTS
    parts: list[Part] = [(insert, [(*a.key, a.event.timestamp, a.body) for a in accepted], _EVENT)]
    for query, rows, casts in ((_UPDATE_APPS, app_rows, _APP), (_UPDATE_USERS, user_rows, _USER)):
        changed = [(*k, _dumped(row)) for k, row in rows.items() if row.merged is not None]
        if changed:
            parts.append((query, changed, casts))
    touched = [(*k, r.revision, r.updated, _dumped(r)) for k, r in sessions.items()]
    *ctes, main = [_filled(part) for part in [*parts, (_UPDATE_SESSIONS, touched, _SESSION)]]
    withs = ", ".join(f"w{i} AS ({query})" for i, (query, _) in enumerate(ctes))
    conn.execute(f"WITH {withs} {main[0]}", [p for _, params in [*ctes, main] for p in params])


def _filled(part: Part) -> tuple[str, list[Any]]:
    """The query of ``part`` reading its rows, and its parameters."""
    query, rows, casts = part
    source, params = _source(rows, casts)
    return query.format(rows=source), params


def _source(rows: list[tuple[Any, ...]], casts: tuple[str, ...]) -> tuple[str, list[Any]]:
    """A table of ``rows`` of the types ``casts`` for a query, and its parameters: one row as
    plain parameters, several as one array per column (``unnest``; in binary, where a text
    array of JSON would be quoted and escaped), so a query's text does not depend on the
    number of rows and is prepared once."""
    if len(rows) == 1:
        return "(VALUES (" + ", ".join(f"%s::{cast}" for cast in casts) + "))", list(rows[0])
    columns = [list(column) for column in zip(*rows, strict=True)]
    return "unnest(" + ", ".join(f"%b::{cast}[]" for cast in casts) + ")", columns


def _dumped(row: _Locked) -> str | None:
    return None if row.merged is None else json.dumps(row.merged)


def _execute(conn: Any, query: str, rows: list[tuple[Any, ...]], casts: tuple[str, ...]) -> Any:
    """``query`` reading ``rows`` as its table ``k``."""
    return conn.execute(*_filled((query, rows, casts)))


# The types of the rows of each query (its table ``k``, see ``_source``).
_SESSION_KEY = ("text", "text", "text", "boolean")
_EVENT = ("text", "text", "text", "float8", "text")
_APP = ("text", "text")
_USER = ("text", "text", "text")
_SESSION = ("text", "text", "text", "bigint", "float8", "text")

_LOCK_SESSIONS = (
    "SELECT s.app_name, s.user_id, s.id, s.revision, s.created, CASE WHEN k.own THEN s.state END"
    " FROM trio_agents_sessions s JOIN {rows} AS k(app_name, user_id, id, own)"
    " ON s.app_name = k.app_name AND s.user_id = k.user_id AND s.id = k.id"
    " ORDER BY s.app_name, s.user_id, s.id FOR UPDATE OF s"
)
# A missing row is inserted, an existing one locked by a no-op update: one statement either way.
_LOCK_APPS = (
    "INSERT INTO trio_agents_app_state (app_name, state)"
    " SELECT app_name, '{{}}' FROM {rows} AS k(app_name)"
    " ON CONFLICT (app_name) DO UPDATE SET state = trio_agents_app_state.state"
    " RETURNING app_name, state"
)
_LOCK_USERS = (
    "INSERT INTO trio_agents_user_state (app_name, user_id, state)"
    " SELECT app_name, user_id, '{{}}' FROM {rows} AS k(app_name, user_id)"
    " ON CONFLICT (app_name, user_id) DO UPDATE SET state = trio_agents_user_state.state"
    " RETURNING app_name, user_id, state"
)
_INSERT_EVENT = (
    "INSERT INTO trio_agents_events (app_name, user_id, session_id, timestamp, body)"
    " SELECT * FROM {rows} AS k(app_name, user_id, id, timestamp, body)"
)
# Several events take their sequence numbers (the order they read back in) in the batch's order.
_INSERT_EVENTS = (
    "INSERT INTO trio_agents_events (app_name, user_id, session_id, timestamp, body)"
    " SELECT app_name, user_id, id, timestamp, body FROM {rows} WITH ORDINALITY"
    " AS k(app_name, user_id, id, timestamp, body, n) ORDER BY n"
)
_UPDATE_APPS = (
    "UPDATE trio_agents_app_state s SET state = k.state"
    " FROM {rows} AS k(app_name, state) WHERE s.app_name = k.app_name"
)
_UPDATE_USERS = (
    "UPDATE trio_agents_user_state s SET state = k.state"
    " FROM {rows} AS k(app_name, user_id, state)"
    " WHERE s.app_name = k.app_name AND s.user_id = k.user_id"
)
_UPDATE_SESSIONS = (
    "UPDATE trio_agents_sessions s SET revision = k.revision, updated = k.updated,"
    " state = COALESCE(k.state, s.state)"
    " FROM {rows} AS k(app_name, user_id, id, revision, updated, state)"
    " WHERE s.app_name = k.app_name AND s.user_id = k.user_id AND s.id = k.id"
)
