"""``Event.to_json``'s fast path (text written field by field) against the general path
(``dumps(unstructure(event))``): the same text for every event, and for a value the fast path
does not write itself, the same text or the same error."""

from __future__ import annotations

import collections
import json
import math
from typing import Any

import pytest
from hypothesis import given, strategies as st

from trio_agents import Content, Event, EventActions, Part, SerializationError, UsageMetadata
from trio_agents._events import replace
from trio_agents._serde import dumps, json_text, unstructure
from trio_agents._serde_text import event_text, record_text
from trio_agents.testing.strategies import json_values as shipped_json_values

from .test_serde import events


def general(event: Event) -> str:
    return dumps(unstructure(event), path="event")


@given(events)
def test_the_fast_text_of_every_event_is_the_general_text(event: Event) -> None:
    expected = general(event)
    assert record_text(event) == expected  # written by the fast path itself, not its fallback
    assert event.to_json() == expected


class Named(str):
    pass


# Values the fields' types do not announce (set with ``replace``, which skips converters): the
# fast path writes them as the general path does, or hands them over to it.
ODD_EVENT_VALUES: dict[str, list[Any]] = {
    "id": [Named("e-1"), 7, True, None, b"x"],
    "author": [1.5, ["a"], {"k": 1}, Named("root")],
    "timestamp": [1, True, "2.5", math.nan, math.inf, -math.inf, -0.0, None, "x"],
    "partial": [0, 1, "yes", 2.5],
    "custom_metadata": [
        collections.OrderedDict(b=1, a=2),
        {1: "int key", 2.5: "float key", None: 0},
        {True: 1, False: 0},
        {"set": {1}},
        {"nan": math.nan},
        [("k", "v")],
        "",
        0,
        {},
    ],
    "long_running_tool_ids": [frozenset({"b", "a"}), ["z", "y"], frozenset(), 3],
    "usage_metadata": [UsageMetadata(total_token_count=True), {"a": 1}],
}
ODD_ACTION_VALUES: dict[str, list[Any]] = {
    "state_delta": [{}, {"x": object()}, {(1, 2): 3}, {"deep": [[[1]]]}, {"f": math.inf}],
    "artifact_delta": [{"f": True}, [("f", 1)], {"f": 1.5}],
    "escalate": [1, "no", None],
}
ODD = [("event", f, v) for f, vs in ODD_EVENT_VALUES.items() for v in vs] + [
    ("actions", f, v) for f, vs in ODD_ACTION_VALUES.items() for v in vs
]


def _odd(event: Event, target: str, field: str, value: Any) -> Event:
    if target == "event":
        return replace(event, {field: value})
    return replace(event, {"actions": replace(event.actions, {field: value})})


def _outcome(write: Any, event: Event) -> tuple[str, Any]:
    try:
        return "text", write(event)
    except Exception as exc:
        return "error", (type(exc), str(exc))


@pytest.mark.parametrize(("target", "field", "value"), ODD)
def test_an_odd_value_gives_the_general_text_or_error(target: str, field: str, value: Any) -> None:
    base = Event(invocation_id="i", author="a", timestamp=2.5, content=Content.from_text("hi"))
    odd = _odd(base, target, field, value)
    assert _outcome(Event.to_json, odd) == _outcome(general, odd)


@given(events, st.sampled_from(ODD))
def test_odd_values_in_any_event_give_the_general_text_or_error(
    event: Event, change: tuple[str, str, Any]
) -> None:
    odd = _odd(event, *change)
    assert _outcome(Event.to_json, odd) == _outcome(general, odd)


def test_a_container_holding_itself_is_refused_as_before() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    event = replace(Event(), {"custom_metadata": loop})
    with pytest.raises(SerializationError) as fast:
        event.to_json()
    with pytest.raises(SerializationError) as slow:
        general(event)
    assert str(fast.value) == str(slow.value)


def test_nested_records_and_bytes_are_written_as_unstructure_lays_them_out() -> None:
    content = Content(
        role="model",
        parts=[
            Part(text='a\u2028"b\\', thought=True, thought_signature=b"\xff\xfe"),
            Part.from_function_call("f", {"k": [1, 2.5, None]}),
        ],
    )
    event = Event(
        content=content,
        usage_metadata=UsageMetadata(total_token_count=3),
        long_running_tool_ids=["b", "a"],
        actions=EventActions(state_delta={"é": "\x00"}, artifact_delta={"f": 2}),
    )
    assert record_text(event) == general(event)
    assert '"thoughtSignature":"__4="' in record_text(event)
    assert '"longRunningToolIds":["a","b"]' in record_text(event)


def test_json_text_is_compact_and_keeps_non_ascii() -> None:
    assert (
        json_text({"a": [1, 2.5, None, True], "é": "\u2028"})
        == '{"a":[1,2.5,null,true],"é":"\u2028"}'
    )
    assert event_text(Event(id="x", timestamp=1)).startswith('{"id":"x","invocationId":"",')


@given(shipped_json_values(max_leaves=20))
def test_dumps_writes_what_the_json_module_writes(value: Any) -> None:
    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_dumps_still_locates_what_it_cannot_write() -> None:
    with pytest.raises(SerializationError) as nan:
        dumps({"a": [1, math.nan]}, path="response")
    assert (
        str(nan.value) == "cannot encode as JSON: response['a'][1] is nan, which JSON cannot carry"
    )
    with pytest.raises(SerializationError) as odd:
        dumps({"k": {1, 2}})
    assert odd.value.path == "value['k']"
