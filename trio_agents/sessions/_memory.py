"""In-memory session storage: O(1) appends, no copies of the history."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from .._errors import SessionExistsError, SessionNotFoundError, StaleSessionError
from .._events import Event
from .._ids import new_session_id, now
from .._serde import check_event
from .._state import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    merged_state,
    split_state_delta,
)
from ._base import EventLog, GetSessionConfig, ListSessionsResponse, Session, SessionService

__all__ = ["InMemorySessionService"]


def _copied(value: Any) -> Any:
    """A copy of a JSON value that shares no container with ``value`` (R-ST-7 isolation)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_copied(item) for item in value)
    return value


_SCALARS = frozenset((int, bool, type(None)))


def _plain(delta: Mapping[str, Any], state: dict[str, Any]) -> bool:
    """Fold ``delta`` into ``state`` when it is the common case, in one pass; True if it was.

    The common case: ASCII session keys (no ``app:``, ``user:`` or ``temp:`` prefix) with ASCII
    str, int, bool or None values, which need no check beyond their type and no copy. Otherwise
    nothing is changed and the caller takes the general path.
    """
    for key, value in delta.items():
        if type(key) is not str or ":" in key or not key.isascii():
            return False
        kind = type(value)
        if kind is str:
            if not value.isascii():
                return False
        elif kind not in _SCALARS:
            return False
    state.update(delta)
    return True


@attrs.define(eq=False)
class _Stored:
    id: str
    app_name: str
    user_id: str
    state: dict[str, Any]
    created: int  # unique in the service: the incarnation of the session
    events: list[Event] = attrs.field(factory=list)
    revision: int = 0
    last_update_time: float = 0.0


class InMemorySessionService(SessionService):
    """Sessions kept in process memory.

    Snapshots share the stored history (events are immutable), so ``get_session`` costs
    O(state) and ``append_event`` O(delta), whatever the history length. Every append checks the
    snapshot's revision (:class:`~trio_agents.StaleSessionError` on a stale copy).
    """

    def __init__(self) -> None:
        super().__init__()
        self._sessions: dict[tuple[str, str, str], _Stored] = {}
        self._app_state: dict[str, dict[str, Any]] = {}
        self._user_state: dict[tuple[str, str], dict[str, Any]] = {}
        self._counter = itertools.count()

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        await trio.lowlevel.checkpoint()
        return self._create(app_name, user_id, state, session_id)

    async def _create_atomically(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None,
        session_id: str | None,
        events: Sequence[Event],
    ) -> Session:
        """Create the session and append ``events`` without a checkpoint between: all or
        nothing (a refused event takes the session and its scope writes back)."""
        await trio.lowlevel.checkpoint()
        scopes = (self._app_state.get(app_name), self._user_state.get((app_name, user_id)))
        saved = [None if scope is None else dict(scope) for scope in scopes]
        session = self._create(app_name, user_id, state, session_id)
        try:
            for event in events:
                InMemorySessionService.append_event_nowait(self, session, event)
        except BaseException:
            del self._sessions[app_name, user_id, session.id]
            self._restore(self._app_state, app_name, saved[0])
            self._restore(self._user_state, (app_name, user_id), saved[1])
            raise
        return session

    @staticmethod
    def _restore(scopes: dict[Any, dict[str, Any]], key: Any, saved: dict[str, Any] | None) -> None:
        if saved is None:
            scopes.pop(key, None)
        else:
            scopes[key] = saved

    def _create(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None,
        session_id: str | None,
    ) -> Session:
        self._check_new(app_name, user_id, session_id, state)
        session_id = (session_id or "").strip() or new_session_id()
        key = (app_name, user_id, session_id)
        if key in self._sessions:
            raise SessionExistsError(session_id)
        app, user, own = map(_copied, split_state_delta(state or {}))
        self._app_state.setdefault(app_name, {}).update(app)
        self._user_state.setdefault((app_name, user_id), {}).update(user)
        stored = _Stored(session_id, app_name, user_id, own, next(self._counter))
        stored.last_update_time = now()
        self._sessions[key] = stored
        return self._snapshot(stored, None)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        await trio.lowlevel.checkpoint()
        # This class's own shortcut: a subclass overriding get_session alone loses it.
        return InMemorySessionService.get_session_nowait(
            self, app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    def get_session_nowait(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        stored = self._sessions.get((app_name, user_id, session_id))
        if stored is None:  # a padded id names the stripped one (checked on a miss only)
            stored = self._sessions.get((app_name, user_id, self._lookup_id(session_id)))
        return None if stored is None else self._snapshot(stored, config)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        await trio.lowlevel.checkpoint()
        found = [
            s
            for s in self._sessions.values()
            if s.app_name == app_name and (user_id is None or s.user_id == user_id)
        ]
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(
            attrs.evolve(self._snapshot(s, None), events=EventLog()) for s in found
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await trio.lowlevel.checkpoint()
        self._sessions.pop((app_name, user_id, self._lookup_id(session_id)), None)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        state: dict[str, Any] = _copied(self._user_state.get((app_name, user_id), {}))
        return state

    async def append_event(self, session: Session, event: Event) -> Event:
        await trio.lowlevel.checkpoint()
        # This class's own shortcut: a subclass overriding append_event alone loses it.
        return InMemorySessionService.append_event_nowait(self, session, event)

    def append_event_nowait(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        stored = self._sessions.get((session.app_name, session.user_id, session.id))
        if stored is None:
            raise SessionNotFoundError(session.id)
        revision = stored.revision
        incarnation = session._incarnation
        recreated = incarnation is not None and incarnation != stored.created
        if recreated or session.revision != revision:
            raise StaleSessionError(
                session.id, expected=session.revision, actual=revision, recreated=recreated
            )
        # A re-delivery ends the snapshot (in step with the store) with the same id; the view's
        # fields are read directly: this check runs on every commit.
        log = session.events
        if log._stop != log._start and log._items[log._stop - 1].id == event.id:
            again = self._redelivered(session, event)
            if again is not None:
                return again
        check_event(event, delta=False)  # the delta is checked below
        delta = event.actions.state_delta
        if delta and not _plain(delta, stored.state):
            event = self._prepare_event(session, event)
            delta = event.actions.state_delta
            self._fold(stored, delta)
        events = stored.events
        events.append(event)
        stored.revision = session.revision = revision + 1
        stored.last_update_time = session.last_update_time = event.timestamp
        log = session.events
        if log._items is events:  # the snapshot is at the tip: it grows with the store
            session.events = log.grown()
            if delta:
                session.state.update(delta)
        else:
            self._apply_to_snapshot(session, event, revision + 1)
        return event

    # -- internals ----------------------------------------------------------------------------

    def _fold(self, stored: _Stored, delta: Mapping[str, Any]) -> None:
        """Apply a committed delta: one pass, containers copied (R-ST-7), scopes split."""
        for key, value in delta.items():
            if isinstance(value, (dict, list, tuple)):
                value = _copied(value)
            if ":" not in key:
                stored.state[key] = value
            elif key.startswith(APP_PREFIX):
                self._app_state.setdefault(stored.app_name, {})[key[len(APP_PREFIX) :]] = value
            elif key.startswith(USER_PREFIX):
                scope = self._user_state.setdefault((stored.app_name, stored.user_id), {})
                scope[key[len(USER_PREFIX) :]] = value
            elif not key.startswith(TEMP_PREFIX):
                stored.state[key] = value

    def _snapshot(self, stored: _Stored, config: GetSessionConfig | None) -> Session:
        events = EventLog(stored.events)
        if config is not None:
            if config.after_timestamp is not None:
                events = events.since(config.after_timestamp)
            if config.num_recent_events is not None:
                events = events.tail(config.num_recent_events)
        state = _copied(
            merged_state(
                stored.state,
                self._app_state.get(stored.app_name, {}),
                self._user_state.get((stored.app_name, stored.user_id), {}),
            )
        )
        return Session(
            id=stored.id,
            app_name=stored.app_name,
            user_id=stored.user_id,
            state=state,
            events=events,
            revision=stored.revision,
            last_update_time=stored.last_update_time,
            _incarnation=stored.created,
        )
