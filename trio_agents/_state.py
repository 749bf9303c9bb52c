"""Scoped session state.

Keys without a prefix belong to the session; ``app:`` keys are shared by every session of the
app, ``user:`` keys by every session of one user, and ``temp:`` keys live only for the rest of the
invocation that wrote them (never persisted, R-ST-4).

:class:`State` is the write-through view handed to callbacks, tools and custom agents (R-ST-1):
a write lands at once in the live session state (so later code in the same invocation reads it)
*and* in a pending delta that the next emitted event carries to the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, ClassVar, TypeAlias

from ._errors import SerializationError
from ._serde import check_key, check_storable

__all__ = [
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "State",
    "Watched",
    "check_state_delta",
    "collect_mutations",
    "merged_state",
    "split_state_delta",
    "strip_temp",
]

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


def check_state_key(key: object) -> str:
    """Return ``key`` if it is a string, else raise :class:`SerializationError` naming it."""
    if not isinstance(key, str):
        raise SerializationError(
            f"state keys must be str, got {type(key).__name__} {key!r}", path=repr(key)
        )
    return key


_NUMBERS = (int, bool, type(None))

STATE_DEPTH = 3
"""How deep a state value sits in a stored event (event, actions, stateDelta): its own nesting
counts from there, so a value any session accepts fits in every document that holds it."""


def check_state_delta(delta: Mapping[Any, Any], where: str = "state_delta") -> None:
    """Raise :class:`SerializationError` naming the first key or value that cannot be stored.

    Storable: JSON whose strings are valid Unicode and that nests at most
    :data:`~trio_agents._serde.MAX_DEPTH` levels (see :func:`~trio_agents._serde.check_storable`).
    """
    for key, value in delta.items():
        if type(key) is not str:
            check_state_key(key)
        if not key.isascii():
            check_key(key, where)
        kind = type(value)
        if kind is str:
            if value.isascii():
                continue  # the common case, checked without building a path
        elif kind in _NUMBERS:
            continue
        check_storable(value, f"{where}[{key!r}]", STATE_DEPTH)


def strip_temp(delta: Mapping[str, Any]) -> dict[str, Any] | None:
    """``delta`` minus its ``temp:`` keys, or None when it has none (the common case)."""
    if not any(key.startswith(TEMP_PREFIX) for key in delta):
        return None
    return {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}


def split_state_delta(
    delta: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Split a delta into (app, user, session) parts, prefixes stripped, ``temp:`` dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(APP_PREFIX):
            app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            user[key[len(USER_PREFIX) :]] = value
        elif not key.startswith(TEMP_PREFIX):
            session[key] = value
    return app, user, session


def merged_state(
    session: Mapping[str, Any], app: Mapping[str, Any], user: Mapping[str, Any]
) -> dict[str, Any]:
    """The merged view of R-ST-6: session keys, then ``app:`` keys, then ``user:`` keys."""
    state = dict(session)
    for key, value in app.items():
        state[APP_PREFIX + key] = value
    for key, value in user.items():
        state[USER_PREFIX + key] = value
    return state


Watched: TypeAlias = dict[str, tuple[Any, str]]
"""Containers read through a :class:`State`, by key: (the object, its JSON text at read time)."""


def _json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def collect_mutations(watched: Watched, delta: dict[str, Any]) -> list[str]:
    """Put containers mutated in place since they were read into ``delta`` (R-ST-2).

    A change counts only if the container still survives a JSON round trip; the delta gets that
    round-tripped copy, so later mutations of the live object cannot alter a committed event.
    Returns the keys that changed (each is a write made now).
    """
    changed = []
    for key, (obj, before) in watched.items():
        now = _json_text(obj)
        if now is not None and now != before:
            delta[key] = json.loads(now)
            watched[key] = (obj, now)
            changed.append(key)
    return changed


class WriteClock:
    """The order of the state writes of one invocation: the rule that keeps state monotonic.

    Every write through a :class:`State` view gets a time from this clock; a value set directly
    on an event's ``state_delta`` is written when the event is committed. The live state always
    holds the latest write of each key. When an event is committed, a key whose write a later
    write has already replaced is dropped from the event's delta: it would bring back an older
    value. So the live state never goes backwards, a synchronous read-modify-write never loses
    an update, and the stored deltas, folded in commit order, end at the live state.
    """

    __slots__ = ("_latest", "_now", "_pending", "_values")

    def __init__(self) -> None:
        self._now = 0
        self._latest: dict[str, int] = {}
        self._values: dict[str, Any] = {}
        self._pending: dict[int, tuple[Mapping[str, Any], dict[str, int]]] = {}

    @property
    def now(self) -> int:
        """The time of the latest write."""
        return self._now

    def tick(self, key: str, value: Any) -> int:
        """Record a write of ``value`` to ``key`` now; its time."""
        self._now += 1
        self._latest[key] = self._now
        self._values[key] = value
        return self._now

    def restore(self, live: dict[str, Any], delta: Mapping[str, Any], since: int) -> None:
        """After a commit that awaited: put back in ``live`` the writes of ``delta``'s keys that
        were made while it was being stored (the store applied the older value over them)."""
        for key in delta:
            if self._latest.get(key, 0) > since:
                live[key] = self._values[key]

    def carry(self, delta: Mapping[str, Any], times: Mapping[str, int]) -> None:
        """``delta`` (an event's, about to be emitted) carries writes made at ``times``."""
        carried = {key: t for key, t in times.items() if key in delta}
        if carried:
            self._pending[id(delta)] = (delta, carried)

    def settle(self, delta: Mapping[str, Any]) -> dict[str, Any] | None:
        """At commit: ``delta`` without its replaced keys, or None when it stays as it is."""
        entry = self._pending.pop(id(delta), None)
        times = entry[1] if entry is not None and entry[0] is delta else {}
        latest = self._latest
        replaced = None
        for key in delta:
            written = times.get(key)
            if written is None:
                self.tick(key, delta[key])  # set on the event itself: written now
            elif written < latest.get(key, 0):
                replaced = [key] if replaced is None else [*replaced, key]
        if replaced is None:
            return None
        return {key: value for key, value in delta.items() if key not in replaced}


class State(MutableMapping[str, Any]):
    """A write-through, delta-tracking view over the live session state (R-ST-1).

    Reads look in the pending delta first, then in the session state. Writes go to both.
    Keys must be strings and values JSON-representable; anything else raises
    :class:`~trio_agents.SerializationError` naming the key, before anything is written.
    There is no deletion (as in ADK): write ``None`` instead.

    A dict or list read through the view is snapshotted; if code then mutates it in place, the
    change joins the delta when the pending actions are next read (R-ST-2).
    """

    APP_PREFIX: ClassVar[str] = APP_PREFIX
    USER_PREFIX: ClassVar[str] = USER_PREFIX
    TEMP_PREFIX: ClassVar[str] = TEMP_PREFIX

    __slots__ = ("_clock", "_delta", "_times", "_value", "_watched")

    def __init__(
        self,
        value: dict[str, Any],
        delta: dict[str, Any],
        watched: Watched | None = None,
        times: dict[str, int] | None = None,
        clock: WriteClock | None = None,
    ) -> None:
        self._value = value
        self._delta = delta
        self._watched = watched
        self._times = times
        self._clock = clock

    def __getitem__(self, key: str) -> Any:
        # The live state holds the latest write by anyone (WriteClock); the delta only a key the
        # live state lacks (a view over a snapshot).
        value = self._value[key] if key in self._value else self._delta[key]
        if self._watched is not None and isinstance(value, (dict, list)):
            self._watch(key, value)
        return value

    def _watch(self, key: str, value: dict[str, Any] | list[Any]) -> None:
        assert self._watched is not None
        seen = self._watched.get(key)
        if seen is None or seen[0] is not value:
            text = _json_text(value)
            if text is not None:
                self._watched[key] = (value, text)

    def __setitem__(self, key: str, value: Any) -> None:
        check_state_key(key)
        check_storable(value, f"state[{key!r}]", STATE_DEPTH)
        self._value[key] = value
        self._delta[key] = value
        self._stamp(key)

    def _stamp(self, key: str) -> None:
        if self._clock is not None and self._times is not None:
            self._times[key] = self._clock.tick(key, self._value.get(key, self._delta.get(key)))

    def __delitem__(self, key: str) -> None:
        raise TypeError(f"state keys cannot be deleted (key {key!r}); assign None instead")

    def __contains__(self, key: object) -> bool:
        return key in self._delta or key in self._value

    def __iter__(self) -> Iterator[str]:
        yield from self._value
        for key in self._delta:
            if key not in self._value:
                yield key

    def __len__(self) -> int:
        return len(self._value) + sum(1 for k in self._delta if k not in self._value)

    def __repr__(self) -> str:
        return f"State({self.to_dict()!r})"

    def has_delta(self) -> bool:
        """True when this view has pending writes (in-place container changes included)."""
        if self._watched:
            for key in collect_mutations(self._watched, self._delta):
                self._stamp(key)
        return bool(self._delta)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of the merged view (the live state, which holds every pending write)."""
        return {**self._delta, **self._value}
