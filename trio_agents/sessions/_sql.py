"""What the SQL session services share; a backend is its dialect.

:class:`SqlSessionService` holds the logic of a session store on a SQL database: checking what
is stored before anything is written, the revision check of every append, the ``temp:`` rule,
reading a session through the history cache (:mod:`._event_cache`) and folding an append into
the caller's snapshot. A backend (:class:`~trio_agents.sessions.SqliteSessionService`,
:class:`~trio_agents.sessions.PostgresSessionService`) supplies only its dialect: how a job
reaches a connection (:meth:`SqlSessionService._run`), the jobs themselves (its SQL, its
placeholders and JSON types) and its run lease.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

import attrs
import trio

from .._errors import StaleSessionError
from .._events import Event
from .._ids import new_session_id, now
from .._serde import check_event
from .._state import TEMP_PREFIX, check_state_delta, split_state_delta, strip_temp
from ._base import EventLog, GetSessionConfig, ListSessionsResponse, Session, SessionService
from ._event_cache import EventCache, Fresh, needs_window, windowed

__all__: list[str] = []  # internal: the SQL backends derive from it

T = TypeVar("T")
Key: TypeAlias = tuple[str, str, str]
Job: TypeAlias = Callable[[Any], T]
"""A function of a connection, run by :meth:`SqlSessionService._run` as one transaction."""
Scopes: TypeAlias = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
History: TypeAlias = Sequence[tuple[Event, str]]
"""Events to store at creation, each with its JSON."""


@attrs.frozen
class Mark:
    """What an append's snapshot saw of its session: the stored session must still be there."""

    revision: int
    incarnation: float | None  # the session's ``created`` stamp; None: a snapshot built by hand

    @classmethod
    def of(cls, session: Session) -> Mark:
        return cls(session.revision, session._incarnation)

    def matches(self, revision: int, created: float) -> bool:
        """Whether the stored session, at ``revision`` and ``created`` then, is as seen."""
        return revision == self.revision and self.incarnation in (None, created)

    def stale(self, session_id: str, revision: int, created: float) -> StaleSessionError:
        """Why an append to the stored session, at ``revision`` and ``created``, is refused."""
        recreated = self.incarnation not in (None, created)
        return StaleSessionError(
            session_id, expected=self.revision, actual=revision, recreated=recreated
        )


class SqlSessionService(SessionService, abc.ABC):
    """A session store on a SQL database; subclasses supply the dialect."""

    _cache: EventCache

    # -- the dialect ----------------------------------------------------------------------------

    @abc.abstractmethod
    async def _run(self, job: Job[T], *, batched: bool = False) -> T:
        """Run ``job`` as one transaction on a connection (``batched``: an append, which the
        backend may commit together with other appends)."""

    @abc.abstractmethod
    def _create_job(
        self, key: Key, scopes: Scopes, stamp: float, history: History
    ) -> Job[Session | None]:
        """Insert the session (``SessionExistsError`` if taken), merge the scopes, append the
        ``history`` (each as :meth:`_append_job` would), read it: one transaction."""

    @abc.abstractmethod
    def _read_job(self, key: Key, config: GetSessionConfig | None) -> Job[Session | None]:
        """The session as ``config`` windows it, in one snapshot (None if missing)."""

    @abc.abstractmethod
    def _read_since_job(self, key: Key, cursor: int, known: int) -> Job[tuple[Any, Fresh] | None]:
        """The session row and the events after ``cursor`` (:func:`._event_cache.read_fresh`)."""

    @abc.abstractmethod
    def _session_of(self, key: Key, row: Any, events: EventLog) -> Session:
        """A :class:`Session` from a row of :meth:`_read_since_job` and its events."""

    @abc.abstractmethod
    def _list_job(self, app_name: str, user_id: str | None) -> Job[list[Session]]:
        """The sessions of an app (of one user, or all), without events."""

    @abc.abstractmethod
    def _user_state_job(self, app_name: str, user_id: str) -> Job[dict[str, Any]]:
        """The user's scope (keys without the prefix; empty when there is none)."""

    @abc.abstractmethod
    def _delete_job(self, key: Key) -> Job[None]:
        """Delete the session and its events."""

    @abc.abstractmethod
    def _append_job(self, key: Key, mark: Mark, event: Event, body: str) -> Job[int]:
        """Store ``event`` if the session is still as ``mark`` saw it, fold its delta into the
        scopes; the new revision (``StaleSessionError`` / ``SessionNotFoundError`` otherwise)."""

    # -- sessions -------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session; ``temp:`` keys of ``state`` are dropped (R-ST-4)."""
        return await self._create(app_name, user_id, state, session_id, [])

    async def _create_atomically(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None,
        session_id: str | None,
        events: Sequence[Event],
    ) -> Session:
        """Create the session and append ``events`` in one transaction (all or nothing)."""
        stored = [self._storable(event) for event in events if not event.partial]
        history = [(event, event.to_json()) for event in stored]
        return await self._create(app_name, user_id, state, session_id, history)

    async def _create(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None,
        session_id: str | None,
        history: History,
    ) -> Session:
        self._check_new(app_name, user_id, session_id, state)
        key = (app_name, user_id, (session_id or "").strip() or new_session_id())
        scopes = split_state_delta(state or {})
        session = await self._run(self._create_job(key, scopes, now(), history))
        assert session is not None
        self._cache.discard(key)  # left by a deleted namesake (which the next read would notice)
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session, or None; a cached history is brought up to date, not read again."""
        key = (app_name, user_id, self._lookup_id(session_id))
        base = self._cache.get(key)
        if not self._cache.capacity or (base is None and needs_window(config)):
            return await self._run(self._read_job(key, config))
        cursor, known = (0, 0) if base is None else (base.cursor, base.count)
        found = await self._run(self._read_since_job(key, cursor, known))
        if found is None:
            self._cache.discard(key)
            return None
        row, fresh = found
        return self._session_of(key, row, windowed(self._cache.merge(key, base, fresh), config))

    async def _still_last(self, session: Session, event: Event) -> bool:
        """Whether the stored session is as ``session`` saw it, ending with ``event``
        (otherwise the append goes on, and raises what a stale or missing session raises)."""
        stored = await self.get_session(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            config=GetSessionConfig(num_recent_events=1),
        )
        return (
            stored is not None
            and stored.revision == session.revision
            and session._incarnation in (None, stored._incarnation)
            and [e.id for e in stored.events] == [event.id]
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The sessions of a user (or of every user), without events, with merged state (see
        :meth:`SessionService.list_sessions` for their order)."""
        return ListSessionsResponse(await self._run(self._list_job(app_name, user_id)))

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The ``user:`` state of a user (see :meth:`SessionService.get_user_state`)."""
        return await self._run(self._user_state_job(app_name, user_id))

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and its events (nothing happens if it does not exist)."""
        key = (app_name, user_id, self._lookup_id(session_id))
        await self._run(self._delete_job(key))
        self._cache.discard(key)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Commit ``event`` to ``session`` (see :meth:`SessionService.append_event`)."""
        if event.partial:
            await trio.lowlevel.checkpoint()
            return event
        again = self._redelivered(session, event)
        if again is not None and await self._still_last(session, again):
            return again
        given, event = event, self._storable(event)
        key = (session.app_name, session.user_id, session.id)
        # The revision is read here, not in the job: one snapshot, one check.
        job = self._append_job(key, Mark.of(session), event, event.to_json())
        revision = await self._run(job, batched=True)
        if event is not given:  # temp: keys live on in this invocation only (R-ST-4)
            delta = given.actions.state_delta
            session.state.update((k, v) for k, v in delta.items() if k.startswith(TEMP_PREFIX))
        self._apply_to_snapshot(session, event, revision)
        return event

    @staticmethod
    def _storable(event: Event) -> Event:
        """``event`` checked, as it is stored: without its delta's ``temp:`` keys."""
        check_event(event, delta=False)  # the delta is checked below
        delta = event.actions.state_delta
        check_state_delta(delta)
        stored = strip_temp(delta)
        if stored is None:
            return event
        return attrs.evolve(event, actions=attrs.evolve(event.actions, state_delta=stored))
