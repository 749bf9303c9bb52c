"""The hand-written constructors of ``Event`` and ``EventActions`` against their attrs fields.

Both classes declare their fields with attrs and construct through a faster hand-written
``__init__``. These tests make the fields the one source of truth: a field added to the class
but not to the constructor (or with another default or converter) fails here.
"""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

from trio_agents import Content, Event, EventActions, ToolConfirmation, UsageMetadata
from trio_agents._content import EMPTY, FrozenDict

SAMPLES: dict[str, Any] = {
    "id": "e-1",
    "invocation_id": "inv",
    "author": "a",
    "branch": "x.y",
    "timestamp": 12.5,
    "content": Content.from_text("hi"),
    "partial": True,
    "turn_complete": False,
    "finish_reason": "STOP",
    "error_code": "E",
    "error_message": "m",
    "interrupted": True,
    "custom_metadata": {"k": 1},
    "usage_metadata": UsageMetadata(total_token_count=3),
    "long_running_tool_ids": ["c1", "c2"],
    "actions": EventActions(escalate=True),
    "state_delta": {"s": 1},
    "artifact_delta": {"f": 2},
    "transfer_to_agent": "b",
    "escalate": True,
    "skip_summarization": False,
    "requested_auth_configs": {"c": {"x": 1}},
    "requested_tool_confirmations": {"adk-1": ToolConfirmation(hint="ok?")},
    "end_of_agent": True,
    "agent_state": {"step": 2},
}


@pytest.mark.parametrize("cls", [Event, EventActions])
def test_the_constructor_takes_exactly_the_fields_in_order(cls: type) -> None:
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert params == [field.name for field in attrs.fields(cls)]
    assert all(
        p.kind is inspect.Parameter.KEYWORD_ONLY
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
    )


@pytest.mark.parametrize("cls", [Event, EventActions])
def test_defaults_match_the_fields(cls: type) -> None:
    built = cls()
    for field in attrs.fields(cls):
        value = getattr(built, field.name)
        if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            assert value is not None, field.name  # minted: a fresh id, the current time
        else:
            expected = field.converter(field.default) if field.converter else field.default
            assert value == expected, field.name


@pytest.mark.parametrize("cls", [Event, EventActions])
def test_every_field_is_stored_through_its_converter(cls: type) -> None:
    for field in attrs.fields(cls):
        assert field.name in SAMPLES, f"add a sample value for the new field {field.name!r}"
        sample = SAMPLES[field.name]
        built = cls(**{field.name: sample})
        expected = field.converter(sample) if field.converter else sample
        assert getattr(built, field.name) == expected, field.name
        assert type(getattr(built, field.name)) is type(expected), field.name


def test_mappings_are_frozen_and_empty_ones_shared() -> None:
    actions = EventActions(state_delta={"a": 1}, artifact_delta=None)
    assert type(actions.state_delta) is FrozenDict
    assert actions.artifact_delta is EMPTY
    assert Event(long_running_tool_ids=["x"]).long_running_tool_ids == frozenset({"x"})


def test_evolve_goes_through_the_same_constructor() -> None:
    event = Event(author="a", content=Content.from_text("x"))
    changed = attrs.evolve(event, long_running_tool_ids=["c"], author="b")
    assert changed.long_running_tool_ids == frozenset({"c"})
    assert (changed.id, changed.timestamp) == (event.id, event.timestamp)
