"""Events, content and ids (ADK-SEMANTICS §3.1 R-EV, §3.2 R-FIN, scenarios S-EV-1/2)."""

from __future__ import annotations

import json
import os
import pickle
import time
import uuid
from copy import deepcopy
from itertools import count
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, strategies as st

from trio_agents import (
    Blob,
    CodeExecutionResult,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
)
from trio_agents._events import stamped
from trio_agents._ids import (
    new_event_id,
    new_function_call_id,
    new_invocation_id,
    new_session_id,
    now,
    use_clock,
    use_id_provider,
)
from trio_agents.testing import sequential_ids
from trio_agents.testing.strategies import events

TEXT = Content.from_text("hi", role="model")
CALL = Content.from_parts(Part.from_function_call("f", {"x": 1}, id="c1"), role="model")
RESPONSE = Content.from_parts(Part.from_function_response("f", {"r": 1}, id="c1"))
CODE_RESULT = Part(code_execution_result=CodeExecutionResult(outcome="OK", output="1"))


def is_uuid4(value: str) -> bool:
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return False
    return parsed.version == 4 and str(parsed) == value


# -- R-FIN: is_final_response (S-EV-1) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "final"),
    [
        (Event(actions=EventActions(state_delta={"a": 1})), True),
        (Event(content=TEXT, actions=EventActions(escalate=True)), True),
        (Event(content=TEXT, partial=True, actions=EventActions(skip_summarization=True)), True),
        (Event(content=CALL, partial=True, long_running_tool_ids={"c1"}), True),
        (Event(content=CALL, error_code="E"), False),
        (Event(error_code="E", error_message="m", partial=True), False),
        (Event(content=RESPONSE), False),
        (Event(content=Content.from_parts(Part.from_text("run"), CODE_RESULT)), False),
        (Event(content=Content.from_parts(CODE_RESULT, Part.from_text("done"))), True),
        (Event(content=TEXT, partial=True), False),
        (Event(content=TEXT, turn_complete=False), True),
    ],
    ids=[
        "R-FIN-3-state-only",
        "R-FIN-3-escalate-with-text",
        "R-FIN-1-partial-skip-summarization",
        "R-FIN-1-partial-long-running",
        "R-FIN-2-error-with-call",
        "R-FIN-2-error-partial",
        "R-FIN-3-response-only",
        "R-FIN-3-trailing-code-result",
        "R-FIN-3-code-result-then-text",
        "R-FIN-3-partial-text",
        "R-FIN-3-turn-not-complete",
    ],
)
def test_is_final_response_matrix(event: Event, final: bool) -> None:
    """S-EV-1: the 2.13 rules R-FIN-1..3, evaluated in order."""
    assert event.is_final_response() is final


def test_error_event_without_content_is_final() -> None:
    """R-FIN-2: an error that is neither partial nor carries calls is final."""
    assert Event(error_code="E", error_message="boom").is_final_response()


def test_skip_summarization_makes_a_response_event_final() -> None:
    """R-FIN-1: an FR event is final when skip_summarization is set."""
    event = Event(content=RESPONSE, actions=EventActions(skip_summarization=True))
    assert event.is_final_response()


# -- queries -------------------------------------------------------------------------------------


def test_function_calls_and_responses_in_part_order() -> None:
    content = Content.from_parts(
        Part.from_text("a"),
        Part.from_function_call("f", {"x": 1}, id="1"),
        Part.from_function_response("g", {"r": 2}, id="2"),
        Part.from_function_call("h"),
        Part.from_function_response("k", {}),
        role="model",
    )
    event = Event(content=content)
    assert event.get_function_calls() == [
        FunctionCall(name="f", args={"x": 1}, id="1"),
        FunctionCall(name="h", args={}, id=None),
    ]
    assert event.get_function_responses() == [
        FunctionResponse(name="g", response={"r": 2}, id="2"),
        FunctionResponse(name="k", response={}, id=None),
    ]


def test_queries_on_content_less_event() -> None:
    event = Event()
    assert event.get_function_calls() == []
    assert event.get_function_responses() == []
    assert event.text is None


def test_text_joins_non_thought_text_parts() -> None:
    content = Content.from_parts(
        Part(text="secret ", thought=True),
        Part.from_text("Hello, "),
        Part.from_function_call("f"),
        Part.from_text("world"),
        role="model",
    )
    assert Event(content=content).text == "Hello, world"
    assert content.text == "Hello, world"


def test_text_is_none_when_only_thoughts_or_no_text() -> None:
    assert Event(content=Content.from_parts(Part(text="t", thought=True))).text is None
    assert Event(content=CALL).text is None
    assert Event(content=Content.from_text("")).text == ""


# -- R-EV-1 / R-EV-2: ids and timestamps (S-EV-2) ------------------------------------------------


def test_event_gets_a_uuid4_id_and_the_current_time_at_construction() -> None:
    """S-EV-2 / R-EV-1 / R-EV-2."""
    before = time.time()
    first, second = Event(), Event()
    after = time.time()
    assert is_uuid4(first.id)
    assert is_uuid4(second.id)
    assert first.id != second.id
    assert before <= first.timestamp <= second.timestamp <= after


def test_explicit_id_and_timestamp_are_kept() -> None:
    event = Event(id="mine", timestamp=12.5)
    assert (event.id, event.timestamp) == ("mine", 12.5)


def test_providers_supply_ids_and_timestamps_inside_the_block() -> None:
    """S-EV-2 with injected providers; the defaults come back after the block."""
    ids = (f"id-{i}" for i in count())
    ticks = iter([100.0, 200.0])
    with use_id_provider(lambda: next(ids)), use_clock(lambda: next(ticks)):
        first, second = Event(), Event()
        assert (first.id, first.timestamp) == ("id-0", 100.0)
        assert (second.id, second.timestamp) == ("id-1", 200.0)
    assert is_uuid4(Event().id)
    assert abs(Event().timestamp - time.time()) < 60


async def test_providers_reach_tasks_started_inside_the_block() -> None:
    """The providers are context variables: tasks spawned in the block inherit them."""
    made: list[Event] = []
    outside: list[Event] = []

    async def make(into: list[Event]) -> None:
        await trio.lowlevel.checkpoint()
        into.append(Event())

    async with trio.open_nursery() as nursery:
        with use_id_provider(lambda: "fixed"), use_clock(lambda: 5.0):
            nursery.start_soon(make, made)
            nursery.start_soon(make, made)
        nursery.start_soon(make, outside)
    assert [(e.id, e.timestamp) for e in made] == [("fixed", 5.0)] * 2
    assert is_uuid4(outside[0].id)
    assert outside[0].timestamp != 5.0


def test_id_helpers_use_adk_prefixes() -> None:
    """R-EV-9 / R-EV-6: invocation ids are e-<uuid4>, function-call ids adk-<uuid4>."""
    invocation, call = new_invocation_id(), new_function_call_id()
    assert invocation.startswith("e-")
    assert is_uuid4(invocation.removeprefix("e-"))
    assert call.startswith("adk-")
    assert is_uuid4(call.removeprefix("adk-"))
    assert is_uuid4(new_session_id())
    assert is_uuid4(new_event_id())
    with use_id_provider(lambda: "x"):
        assert (new_invocation_id(), new_function_call_id(), new_session_id()) == (
            "e-x",
            "adk-x",
            "x",
        )
    with use_clock(lambda: 7.0):
        assert now() == 7.0


# -- immutability --------------------------------------------------------------------------------


def test_event_is_frozen() -> None:
    event = Event(content=TEXT)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.author = "other"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.actions.escalate = True  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.content.role = "user"  # type: ignore[union-attr, misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.content.parts[0].text = "x"  # type: ignore[union-attr, misc]
    with pytest.raises(TypeError):
        event.content.parts[0] = Part.from_text("x")  # type: ignore[index, union-attr]


def test_evolve_makes_a_changed_copy() -> None:
    event = Event(author="a", content=TEXT)
    changed = attrs.evolve(event, author="b")
    assert (event.author, changed.author) == ("a", "b")
    assert (changed.id, changed.timestamp, changed.content) == (
        event.id,
        event.timestamp,
        event.content,
    )


def test_default_actions_are_empty() -> None:
    actions = Event().actions
    assert actions.is_empty()
    assert actions == EventActions()
    assert not EventActions(escalate=True).is_empty()
    assert not EventActions(state_delta={"a": 1}).is_empty()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.actions.state_delta.__setitem__("k", 1),
        lambda e: e.actions.state_delta.update(k=1),
        lambda e: e.actions.artifact_delta.setdefault("f", 0),
        lambda e: e.actions.requested_auth_configs.clear(),
        lambda e: e.get_function_calls()[0].args.pop("x"),
        lambda e: e.get_function_calls()[0].args.__delitem__("x"),
    ],
)
def test_event_mappings_refuse_changes(mutate: Any) -> None:
    """ARCHITECTURE §4 'events': immutable — no write through one event reaches another."""
    call = Part.from_function_call("f", {"x": 1})
    event = Event(content=Content(role="model", parts=(call,)))
    other = Event()
    with pytest.raises(TypeError, match="immutable event"):
        mutate(event)
    assert event.get_function_calls()[0].args == {"x": 1}
    assert other.actions.is_empty()
    assert Event().actions.state_delta == {}


def test_event_mappings_copy_to_plain_dicts_and_still_serialize() -> None:
    event = Event(actions=EventActions(state_delta={"a": [1]}))
    copy = dict(event.actions.state_delta)
    copy["b"] = 2
    assert event.actions.state_delta == {"a": [1]}
    assert json.loads(json.dumps(event.actions.state_delta)) == {"a": [1]}
    assert deepcopy(event) == event
    assert pickle.loads(pickle.dumps(event)) == event


def test_long_running_tool_ids_become_a_frozenset() -> None:
    event = Event(long_running_tool_ids=["b", "a", "a"])
    assert event.long_running_tool_ids == frozenset({"a", "b"})
    assert Event().long_running_tool_ids is None


# -- content helpers -----------------------------------------------------------------------------


def test_content_from_text() -> None:
    assert Content.from_text("hi") == Content(role="user", parts=(Part(text="hi"),))
    assert Content.from_text("hi", role="model").role == "model"


def test_content_parts_become_a_tuple() -> None:
    parts = [Part.from_text("a")]
    content = Content(role="user", parts=parts)
    parts.append(Part.from_text("b"))
    assert content.parts == (Part(text="a"),)


def test_part_constructors() -> None:
    assert Part.from_text("t") == Part(text="t")
    assert Part.from_function_call("f", {"a": 1}, id="c") == Part(
        function_call=FunctionCall(name="f", args={"a": 1}, id="c")
    )
    assert Part.from_function_call("f").function_call == FunctionCall(name="f", args={})
    assert Part.from_function_response("f", {"r": 1}, id="c") == Part(
        function_response=FunctionResponse(name="f", response={"r": 1}, id="c")
    )
    assert Part.from_bytes(b"\x00\x01", "image/png") == Part(
        inline_data=Blob(data=b"\x00\x01", mime_type="image/png")
    )


def test_an_empty_id_gets_a_fresh_one_r_ev_1() -> None:
    """R-EV-1: an empty id is replaced at construction (JSON input included); others are kept."""
    with sequential_ids("x"):
        assert Event(id="").id == "x-1"
        assert Event.from_json('{"id": "", "author": "a"}').id == "x-2"
    assert Event(id="keep").id == "keep"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_draws_different_ids() -> None:
    """Ids come from a private generator seeded from the OS, reseeded after fork."""
    from trio_agents._ids import _uuid4

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, _uuid4().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    assert child != _uuid4()
    assert uuid.UUID(child).version == 4


@given(
    events(authors=st.sampled_from(["", "writer"])),
    st.sampled_from(["", "e-given"]),
    st.sampled_from(["agent", "other"]),
    st.none() | st.sampled_from(["", "par.b0"]),
)
def test_stamped_fills_only_what_is_missing_like_evolve(
    event: Event, invocation_id: str, author: str, branch: str | None
) -> None:
    """The emit path's one-pass stamp equals attrs.evolve with the same rule (R-EV-1 ids kept)."""
    event = attrs.evolve(event, invocation_id=invocation_id)
    expected = attrs.evolve(
        event,
        id=event.id,
        author=event.author or author,
        invocation_id=event.invocation_id or "e-run",
        branch=branch if event.branch is None else event.branch,
    )
    got = stamped(event, author, "e-run", branch)
    assert got == expected
    assert type(got) is Event
    assert (got.id, got.timestamp, got.actions) == (event.id, event.timestamp, event.actions)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        got.author = "changed"  # type: ignore[misc]


def test_new_id_is_a_fresh_uuid4_string() -> None:
    """As google-adk 2.13's ``Event.new_id()``: a static method giving a new uuid4 string, the
    form of the id an event built without one gets."""
    first, second = Event.new_id(), Event.new_id()
    assert first != second
    assert uuid.UUID(first).version == 4 and str(uuid.UUID(first)) == first
    assert len(Event(author="a").id) == len(first)


def test_has_trailing_code_execution_result() -> None:
    """As google-adk 2.13's public helper: True only when the last part is a code result."""
    result = Part(code_execution_result=CodeExecutionResult(outcome="OUTCOME_OK", output="4"))
    ends = Event(content=Content(role="model", parts=[Part.from_text("so"), result]))
    assert ends.has_trailing_code_execution_result()
    assert not ends.is_final_response()
    later = Event(content=Content(role="model", parts=[result, Part.from_text("it is 4")]))
    assert not later.has_trailing_code_execution_result()
    assert not Event().has_trailing_code_execution_result()
    assert not Event(content=Content(role="model", parts=[])).has_trailing_code_execution_result()
