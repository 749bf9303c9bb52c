"""Scoped state: the write-through :class:`State` view and the delta helpers (R-ST-1, R-ST-4..6)."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agents import SerializationError, State
from trio_agents._state import check_state_delta, merged_state, split_state_delta, strip_temp


def make(value: dict[str, Any] | None = None, delta: dict[str, Any] | None = None):
    value = {} if value is None else value
    delta = {} if delta is None else delta
    return State(value, delta), value, delta


# -- State ---------------------------------------------------------------------------------------


def test_write_goes_to_session_state_and_delta() -> None:
    """R-ST-1: a write lands at once in the live state and in the pending delta."""
    state, value, delta = make({"old": 0})
    state["k"] = {"nested": [1]}
    assert value == {"old": 0, "k": {"nested": [1]}}
    assert delta == {"k": {"nested": [1]}}
    assert state["k"] == {"nested": [1]}


def test_read_sees_the_latest_write_in_the_live_state() -> None:
    """Writes land in the live state and the delta at once (R-ST-1), so the live state holds the
    latest write of every key, whoever made it; a pending write it lacks is read from the delta.
    (ADK reads its own delta first, which can return a value another branch has replaced.)"""
    state, _, _ = make({"k": "later write", "only": 1}, {"k": "replaced", "pending": 2})
    assert state["k"] == "later write"
    assert state["pending"] == 2
    assert state["only"] == 1
    assert state.get("missing", "default") == "default"
    with pytest.raises(KeyError):
        state["missing"]


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        (1, "x", "1"),
        ("bad_key", {1, 2}, "bad_key"),
        ("bad_key", object(), "bad_key"),
        ("bad_key", {"inner": [object()]}, "bad_key"),
    ],
    ids=["int-key", "set", "object", "nested-object"],
)
def test_invalid_write_raises_naming_the_key_and_writes_nothing(
    key: Any, value: Any, named: str
) -> None:
    state, session_value, delta = make({"a": 1})
    with pytest.raises(SerializationError) as info:
        state[key] = value
    assert named in str(info.value)
    assert named in info.value.path
    assert session_value == {"a": 1}
    assert delta == {}
    assert not state.has_delta()


def test_keys_cannot_be_deleted() -> None:
    """R-ST-1: there is no deletion API."""
    state, value, delta = make({"a": 1}, {"b": 2})
    with pytest.raises(TypeError, match="'a'"):
        del state["a"]
    with pytest.raises(TypeError):
        state.pop("b")
    with pytest.raises(TypeError):
        state.clear()
    assert (value, delta) == ({"a": 1}, {"b": 2})


def test_update_and_setdefault_write_through() -> None:
    """R-ST-1: ``update`` and ``setdefault`` exist and track the delta."""
    state, value, delta = make({"present": 1})
    state.update({"x": 1}, y=2)
    assert state.setdefault("present", 99) == 1
    assert state.setdefault("z", 3) == 3
    assert delta == {"x": 1, "y": 2, "z": 3}
    assert value == {"present": 1, "x": 1, "y": 2, "z": 3}


def test_iteration_len_and_contains_cover_both_layers_once() -> None:
    state, _, _ = make({"a": 1, "shared": 2}, {"shared": 3, "b": 4})
    assert list(state) == ["a", "shared", "b"]
    assert len(state) == 3
    assert "a" in state
    assert "b" in state
    assert "c" not in state
    assert 1 not in state
    assert dict(state) == {"a": 1, "shared": 2, "b": 4}


def test_to_dict_is_the_live_state_with_pending_writes_and_is_a_copy() -> None:
    state, value, _ = make({"a": 1, "k": "latest"}, {"k": "replaced", "b": 2})
    snapshot = state.to_dict()
    assert snapshot == {"a": 1, "k": "latest", "b": 2}
    snapshot["a"] = 2
    assert value["a"] == 1


def test_has_delta_tracks_pending_writes() -> None:
    state, _, _ = make({"a": 1})
    assert not state.has_delta()
    state["a"] = 1
    assert state.has_delta()
    assert State({}, {"x": 1}).has_delta()


def test_prefix_constants() -> None:
    """R-ST-4 prefixes."""
    assert (State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX) == ("app:", "user:", "temp:")


# -- delta helpers -------------------------------------------------------------------------------


def test_split_state_delta_strips_prefixes_and_drops_temp() -> None:
    """R-ST-4: app/user parts are stored without their prefix; temp: is never stored."""
    delta = {"a": 1, "app:b": 2, "user:c": 3, "temp:d": 4, "application": 5, "user": 6}
    assert split_state_delta(delta) == (
        {"b": 2},
        {"c": 3},
        {"a": 1, "application": 5, "user": 6},
    )
    assert split_state_delta({}) == ({}, {}, {})


def test_merged_state_prefixes_scopes_and_user_wins_over_app_over_session() -> None:
    """R-ST-6: session keys, then app: keys, then user: keys; later scopes win clashes."""
    session = {"s": 1, "app:x": "session", "user:y": "session", "app:z": "session"}
    merged = merged_state(session, {"x": "app", "y": "app"}, {"y": "user"})
    assert merged == {
        "s": 1,
        "app:x": "app",
        "user:y": "user",
        "app:z": "session",
        "app:y": "app",
    }
    assert merged_state({"app:k": "s", "user:k": "s"}, {"k": "a"}, {"k": "u"}) == {
        "app:k": "a",
        "user:k": "u",
    }


def test_merged_state_does_not_change_its_inputs() -> None:
    session, app, user = {"a": 1}, {"b": 2}, {"c": 3}
    merged = merged_state(session, app, user)
    merged["a"] = 9
    assert (session, app, user) == ({"a": 1}, {"b": 2}, {"c": 3})


def test_strip_temp_returns_none_without_temp_keys() -> None:
    assert strip_temp({}) is None
    assert strip_temp({"a": 1, "app:b": 2, "temporary": 3}) is None


def test_strip_temp_returns_a_copy_without_temp_keys() -> None:
    delta = {"a": 1, "temp:t": 2, "user:u": 3}
    assert strip_temp(delta) == {"a": 1, "user:u": 3}
    assert strip_temp({"temp:only": 1}) == {}
    assert delta == {"a": 1, "temp:t": 2, "user:u": 3}


def test_check_state_delta_accepts_json() -> None:
    check_state_delta({"a": None, "b": [1, 2.5, "x", True], "c": {"d": {"e": []}}})
    check_state_delta({})


@pytest.mark.parametrize(
    ("delta", "named"),
    [({3: "x"}, "3"), ({"ok": 1, "bad_key": {1}}, "bad_key"), ({"bad_key": [object()]}, "bad_key")],
    ids=["int-key", "set", "nested-object"],
)
def test_check_state_delta_names_the_bad_key(delta: dict[Any, Any], named: str) -> None:
    with pytest.raises(SerializationError) as info:
        check_state_delta(delta, "where")
    assert named in str(info.value)
    assert named in info.value.path
