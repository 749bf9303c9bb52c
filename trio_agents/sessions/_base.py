"""The session model and the :class:`SessionService` interface every backend implements."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import attrs
import trio

from .._errors import ConfigurationError, SerializationError, SessionBusyError
from .._events import Event
from .._serde import check_text
from .._state import TEMP_PREFIX, check_state_delta, strip_temp

__all__ = ["EventLog", "GetSessionConfig", "ListSessionsResponse", "Session", "SessionService"]

Key = tuple[str, str, str]
"""(app name, user id, session id)."""


class EventLog(Sequence[Event]):
    """A read-only view of a session's history, in commit order.

    Views share the store's append-only list instead of copying it, so reading a session and
    appending to it cost O(1) whatever the length of the history.
    """

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[Event] | None = None, start: int = 0, stop: int | None = None):
        self._items: list[Event] = [] if items is None else items
        self._start = start
        self._stop = len(self._items) if stop is None else stop

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            return self._items[self._start : self._stop][index]
        size = self._stop - self._start
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("event index out of range")
        return self._items[self._start + index]

    def __len__(self) -> int:
        return self._stop - self._start

    def __iter__(self) -> Iterator[Event]:
        items = self._items
        for i in range(self._start, self._stop):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventLog({list(self)!r})"

    def appended(self, event: Event) -> EventLog:
        """A view with ``event`` added at the end (in place when this view is at the tip)."""
        if self._stop == len(self._items):
            self._items.append(event)
            return EventLog(self._items, self._start, self._stop + 1)
        items = self._items[self._start : self._stop]
        items.append(event)
        return EventLog(items)

    def grown(self) -> EventLog:
        """A view one event longer, after an append to the shared list at this view's end."""
        log = _new_log(EventLog)
        log._items, log._start, log._stop = self._items, self._start, self._stop + 1
        return log

    def tail(self, count: int) -> EventLog:
        """A view of the last ``count`` events."""
        return EventLog(self._items, max(self._start, self._stop - count), self._stop)

    def head(self, count: int) -> EventLog:
        """A view of the first ``count`` events (no copy)."""
        return EventLog(self._items, self._start, min(self._stop, self._start + max(count, 0)))

    def since(self, timestamp: float) -> EventLog:
        """The events whose timestamp is at or after ``timestamp`` (R-ST-8), in commit order."""
        return EventLog([e for e in self if e.timestamp >= timestamp])


_new_log = object.__new__


@attrs.frozen(kw_only=True)
class GetSessionConfig:
    """Which events :meth:`SessionService.get_session` returns (R-ST-8)."""

    num_recent_events: int | None = attrs.field(default=None)
    after_timestamp: float | None = None

    @num_recent_events.validator
    def _check(self, attribute: attrs.Attribute[int | None], value: int | None) -> None:
        if value is not None and value < 0:
            raise ConfigurationError(f"num_recent_events must be >= 0, got {value}")


def _event_log(value: Iterable[Event] | EventLog) -> EventLog:
    return value if isinstance(value, EventLog) else EventLog(list(value))


@attrs.define(kw_only=True, on_setattr=attrs.setters.NO_OP)
class Session:
    """A snapshot of one conversation: merged state, history and the store's revision.

    ``state`` is the merged view (session keys, ``app:`` keys, ``user:`` keys). ``revision`` is
    the number of events the store had committed when the snapshot was taken; appending through an
    outdated snapshot raises :class:`~trio_agents.StaleSessionError`. So does appending through a
    snapshot of a session that was deleted and created again under the same id since, even at
    the same revision: a store marks each snapshot it hands out with the session's incarnation
    (a snapshot built by hand carries none, and only its revision is checked).
    """

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = attrs.field(factory=dict)
    events: EventLog = attrs.field(factory=EventLog, converter=_event_log)
    revision: int = 0
    last_update_time: float = 0.0
    _incarnation: float | None = attrs.field(
        default=None, eq=False, repr=False, alias="_incarnation"
    )
    """Which creation of the session the snapshot was read from (the store's mark; internal)."""


class ListSessionsResponse(list[Session]):
    """What :meth:`SessionService.list_sessions` returns: a list of sessions that is also
    google-adk's response object (``.sessions`` is the list itself)."""

    __slots__ = ()

    @property
    def sessions(self) -> list[Session]:
        """The sessions (this list), as google-adk's ``ListSessionsResponse.sessions``."""
        return self


class SessionService(abc.ABC):
    """Stores sessions, their events and their scoped state.

    Every method is a checkpoint. ``append_event`` is atomic: it either commits the event (history,
    state, revision) or raises and changes nothing. If cancelled, nothing is appended.
    """

    def __init__(self) -> None:
        self._leases: dict[Key, _Held] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that overrides ``append_event`` or ``get_session`` but not its
        ``_nowait`` shortcut loses the inherited shortcut, which would skip the override: the
        Runner then awaits the override (wrapping a built-in store's methods works)."""
        super().__init_subclass__(**kwargs)
        for name in ("append_event", "get_session"):
            shortcut = f"{name}_nowait"
            if name in cls.__dict__ and shortcut not in cls.__dict__:
                setattr(cls, shortcut, getattr(SessionService, shortcut))

    @abc.abstractmethod
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session; ``temp:`` keys of ``state`` are dropped (R-ST-4)."""

    @abc.abstractmethod
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session, or None when there is no such session.

        Whitespace around ``session_id`` is ignored, as by :meth:`create_session` (and by
        :meth:`delete_session`).
        """

    @abc.abstractmethod
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> list[Session]:
        """The sessions of a user (or of every user), without events, with merged state.

        The shipped backends return a :class:`ListSessionsResponse`: a list that also answers
        ``.sessions``, as google-adk's response does.

        Ordered as google-adk orders them: by ``last_update_time`` (the creation, then the last
        committed event's timestamp), then user id, then id (by code point).
        """

    @abc.abstractmethod
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session; deleting a missing session does nothing."""

    @abc.abstractmethod
    async def append_event(self, session: Session, event: Event) -> Event:
        """Commit ``event`` to ``session`` and return the committed event (R-ST-5).

        Partial events are returned untouched and not stored. ``temp:`` keys are applied to
        ``session.state`` but removed from the committed event's delta. ``session`` is updated
        in place (state, events, revision, last_update_time). Appending again the event that
        ``session`` ends with (same id, equal fields) stores nothing and returns the stored
        event, as google-adk's in-memory store does for an equal re-delivery.

        Raises:
            SessionNotFoundError: the session does not exist (any more).
            StaleSessionError: ``session.revision`` is older than the stored revision.
            SerializationError: a state key or value cannot be stored as JSON.
        """

    async def _create_with_history(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None,
        session_id: str | None,
        events: Sequence[Event],
    ) -> Session:
        """Create a session with ``events`` as its history (restoring an exported session): all
        of it is stored, or nothing.

        The built-in stores create and append in one transaction, so a failure (a refused
        event, an I/O error, a cancellation) leaves neither the session nor the ``app:`` and
        ``user:`` keys of ``state``. This fallback, for other stores and for subclasses of the
        built-in ones that override ``create_session`` or ``append_event``, calls those
        methods and deletes the session again on a failure; keys it wrote to those scopes stay.
        """
        if self._creates_atomically():
            return await self._create_atomically(app_name, user_id, state, session_id, events)
        session = await self.create_session(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )
        try:
            for event in events:
                await self.append_event(session, event)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.delete_session(app_name=app_name, user_id=user_id, session_id=session.id)
            raise
        return session

    async def _create_atomically(
        self,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None,
        session_id: str | None,
        events: Sequence[Event],
    ) -> Session:
        """A store's own :meth:`_create_with_history`, in one transaction (none here)."""
        raise NotImplementedError

    def _creates_atomically(self) -> bool:
        """Whether this store has its own :meth:`_create_atomically`, and its class does not
        override the ``create_session`` or ``append_event`` that one stands for."""
        cls = type(self)
        owner = next(k for k in cls.__mro__ if "_create_atomically" in k.__dict__)
        return owner is not SessionService and all(
            getattr(cls, name) is getattr(owner, name)
            for name in ("create_session", "append_event")
        )

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The ``user:`` state of a user, read without a session, keys without the prefix.

        As google-adk: shared by all the user's sessions of the app, empty when the user has
        none, and a copy (changing it changes nothing stored). A backend that cannot read it
        raises :class:`NotImplementedError` (every shipped backend can).
        """
        raise NotImplementedError(f"{type(self).__name__} does not support get_user_state")

    async def flush(self) -> None:
        """Wait until every event appended so far is stored (a checkpoint).

        As google-adk's: the shipped backends store each event before ``append_event``
        returns, so there is nothing to wait for; a buffering backend would override this.
        """
        await trio.lowlevel.checkpoint()

    def get_session_nowait(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """Read a session without waiting, when the backend can (as :meth:`get_session`).

        Raises :class:`trio.WouldBlock` when the backend needs I/O; the caller then awaits
        :meth:`get_session`. The Runner uses this (after the lease, its entry checkpoint) to
        start in-memory runs without extra scheduling round trips.
        """
        raise trio.WouldBlock

    def append_event_nowait(self, session: Session, event: Event) -> Event:
        """Commit without waiting, when the backend can (as :meth:`append_event`).

        Raises :class:`trio.WouldBlock` when the backend needs I/O; the caller then awaits
        :meth:`append_event`. The Runner uses this to commit in-memory events without an extra
        scheduling round trip.
        """
        raise trio.WouldBlock

    # -- helpers for implementations ----------------------------------------------------------

    @staticmethod
    def _check_new(
        app_name: str, user_id: str, session_id: str | None, state: Mapping[str, Any] | None
    ) -> None:
        """Refuse, before anything is stored, what some backend could not store or read back.

        Raises:
            SerializationError: an id with a lone surrogate or a NUL character (the path names
                it), or a state key or value that cannot be stored.
        """
        for name, value in (("app_name", app_name), ("user_id", user_id)):
            _check_id(name, value)
        if session_id is not None:
            _check_id("session_id", session_id)
        if state:
            check_state_delta(state, "state")

    @staticmethod
    def _lookup_id(session_id: str) -> str:
        """The id a read or a delete looks for: ``session_id`` without surrounding whitespace,
        as :meth:`create_session` stored it (google-adk strips it on every lookup too)."""
        return session_id.strip() if isinstance(session_id, str) else session_id

    @staticmethod
    def _redelivered(session: Session, event: Event) -> Event | None:
        """The stored event, when ``event`` is the one ``session`` ends with delivered again.

        As google-adk's in-memory store: an equal re-delivery (same id and fields, ``temp:``
        keys aside) is not appended twice. Only the snapshot's last event is compared, so the
        check costs O(1).
        """
        log = session.events
        if not log:
            return None
        last = log[-1]
        if last.id != event.id:
            return None
        if last is event or last == event:
            return last
        stripped = strip_temp(event.actions.state_delta)
        if stripped is None:
            return None
        bare = attrs.evolve(event, actions=attrs.evolve(event.actions, state_delta=stripped))
        return last if last == bare else None

    @staticmethod
    def _prepare_event(session: Session, event: Event) -> Event:
        """Validate ``event``'s delta, apply its ``temp:`` keys to ``session``, strip them."""
        delta = event.actions.state_delta
        if not delta:
            return event
        check_state_delta(delta)
        stripped = strip_temp(delta)
        if stripped is None:
            return event
        for key, value in delta.items():
            if key.startswith(TEMP_PREFIX):
                session.state[key] = value
        return attrs.evolve(event, actions=attrs.evolve(event.actions, state_delta=stripped))

    @staticmethod
    def _apply_to_snapshot(session: Session, event: Event, revision: int) -> None:
        """Fold a committed event into the caller's snapshot."""
        session.state.update(event.actions.state_delta)
        session.events = session.events.appended(event)
        session.revision = revision
        session.last_update_time = event.timestamp

    # -- run exclusivity ------------------------------------------------------------------------

    def lease(
        self, *, app_name: str, user_id: str, session_id: str, wait: bool = False
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the right to run an invocation on one session (``async with``; a checkpoint).

        With ``wait=False`` a session that is already leased raises
        :class:`~trio_agents.SessionBusyError` at once; with ``wait=True`` the caller queues
        (first come, first served). This implementation is per process; persistent backends
        extend it across processes.
        """
        return _Lease(self._leases, (app_name, user_id, session_id), wait)


def _check_id(name: str, value: str) -> None:
    if not isinstance(value, str):
        raise SerializationError(f"{name} must be a string, got {type(value).__name__}", path=name)
    check_text(value, name)
    if "\x00" in value:
        raise SerializationError(f"{name} must not contain NUL characters", path=name)


class _Held:
    """A held lease; ``waiting`` parks the runs queued behind it (made on first use)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting: trio.lowlevel.ParkingLot | None = None


class _Lease:
    """The per-process lease of one session: a dict entry while held, handed over in order."""

    __slots__ = ("_key", "_leases", "_wait")

    def __init__(self, leases: dict[Key, _Held], key: Key, wait: bool) -> None:
        self._leases = leases
        self._key = key
        self._wait = wait

    async def __aenter__(self) -> None:
        held = self._leases.get(self._key)
        if held is None:
            self._leases[self._key] = _Held()
            try:
                await trio.lowlevel.checkpoint()
            except BaseException:  # cancelled on the way in: the lease was never used
                self._release()
                raise
            return
        if not self._wait:
            await trio.lowlevel.checkpoint()
            raise SessionBusyError(self._key[2])
        if held.waiting is None:
            held.waiting = trio.lowlevel.ParkingLot()
        await held.waiting.park()  # woken by _release, which hands the lease over

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        held = self._leases[self._key]
        if held.waiting is None or not held.waiting.unpark():
            del self._leases[self._key]
