"""Scoped session state.

Keys without a prefix belong to the session; ``app:`` keys are shared by every session of the
app, ``user:`` keys by every session of one user, and ``temp:`` keys live only for the rest of the
invocation that wrote them (never persisted, R-ST-4).

:class:`State` is the write-through view handed to callbacks, tools and custom agents (R-ST-1):
a write lands at once in the live session state (so later code in the same invocation reads it)
*and* in a pending delta that the next emitted event carries to the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, ClassVar

from ._errors import SerializationError
from ._serde import check_json_value

__all__ = [
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "State",
    "check_state_delta",
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


def check_state_delta(delta: Mapping[Any, Any], where: str = "state_delta") -> None:
    """Raise :class:`SerializationError` naming the first key or value that is not JSON."""
    for key, value in delta.items():
        check_state_key(key)
        check_json_value(value, f"{where}[{key!r}]")


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


class State(MutableMapping[str, Any]):
    """A write-through, delta-tracking view over the live session state (R-ST-1).

    Reads look in the pending delta first, then in the session state. Writes go to both.
    Keys must be strings and values JSON-representable; anything else raises
    :class:`~trio_agents.SerializationError` naming the key, before anything is written.
    There is no deletion (as in ADK): write ``None`` instead.
    """

    APP_PREFIX: ClassVar[str] = APP_PREFIX
    USER_PREFIX: ClassVar[str] = USER_PREFIX
    TEMP_PREFIX: ClassVar[str] = TEMP_PREFIX

    __slots__ = ("_delta", "_value")

    def __init__(self, value: dict[str, Any], delta: dict[str, Any]) -> None:
        self._value = value
        self._delta = delta

    def __getitem__(self, key: str) -> Any:
        if key in self._delta:
            return self._delta[key]
        return self._value[key]

    def __setitem__(self, key: str, value: Any) -> None:
        check_state_key(key)
        check_json_value(value, f"state[{key!r}]")
        self._value[key] = value
        self._delta[key] = value

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
        """True when this view has pending writes."""
        return bool(self._delta)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of the merged view (session state overlaid by pending writes)."""
        return {**self._value, **self._delta}
