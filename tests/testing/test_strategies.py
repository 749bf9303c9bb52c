"""trio_agents.testing.strategies: drawn data is valid and storable; drawn applications run and
keep the handshake rules (ARCHITECTURE §2) under drawn interleavings."""

from __future__ import annotations

import functools
import json
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from tests.testing.delivery import NEEDS_FULL_DELIVERY
from trio_agents import Content, Event, EventActions, Part
from trio_agents._serde import dumps, loads, structure, unstructure
from trio_agents._state import check_state_delta
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import Application, Stop, check_invariants, run_application
from trio_agents.testing.strategies import (
    Interleaving,
    applications,
    contents,
    event_actions,
    events,
    interleavings,
    json_values,
    parts,
    scripts,
    state_deltas,
    state_keys,
    stops,
    turns,
)

SCOPES = ("app:", "user:", "temp:")


def _through_json(record: Any) -> Any:
    return structure(loads(dumps(unstructure(record))), type(record))


@given(event=events(), _random=st.random_module())
def test_every_drawn_event_round_trips_through_json(event: Event, _random: Any) -> None:
    text = event.to_json()
    assert Event.from_json(text) == event
    assert Event.from_dict(json.loads(text)) == event


@given(content=contents(), _random=st.random_module())
def test_every_drawn_content_round_trips_through_json(content: Content, _random: Any) -> None:
    assert 1 <= len(content.parts) <= 3
    assert content.role in ("user", "model")
    assert _through_json(content) == content
    assert Event.from_json(Event(content=content).to_json()).content == content


@given(part=parts())
def test_every_drawn_part_round_trips_through_json(part: Part) -> None:
    assert _through_json(part) == part


@given(actions=event_actions(), _random=st.random_module())
def test_every_drawn_event_actions_round_trip_through_json(
    actions: EventActions, _random: Any
) -> None:
    assert _through_json(actions) == actions
    assert Event.from_json(Event(actions=actions).to_json()).actions == actions


@given(value=json_values())
def test_json_values_are_json(value: Any) -> None:
    assert loads(dumps(value)) == value


@given(delta=state_deltas())
def test_state_deltas_are_storable_and_scoped(delta: dict[str, Any]) -> None:
    check_state_delta(delta)  # raises on a key or value that cannot be stored
    for key in delta:
        scope, _, name = key.rpartition(":")
        assert scope + ":" in SCOPES if scope else ":" not in key
        assert name


@given(delta=state_deltas(keys=state_keys(scopes=["app:", "temp:"]), max_size=6))
def test_state_deltas_keep_to_the_scopes_asked_for(delta: dict[str, Any]) -> None:
    assert len(delta) <= 6
    assert all(k.startswith(("app:", "temp:")) for k in delta)


@given(delta=state_deltas(keys=state_keys(scopes=[""]), values=st.integers()))
def test_session_scoped_deltas_have_no_prefix(delta: dict[str, Any]) -> None:
    assert not any(k.startswith(SCOPES) for k in delta)
    assert all(isinstance(v, int) for v in delta.values())


@given(event=events(partial=st.just(False), actions=st.just(EventActions())))
def test_event_strategy_arguments_are_honoured(event: Event) -> None:
    assert event.partial is False
    assert event.actions == EventActions()
    assert event.author != "user"


@given(script=scripts(max_steps=4, failures=False))
def test_scripts_without_failures_never_raise(script: list[Any]) -> None:
    assert len(script) <= 4
    assert all(step.kind != "raise" for step in script)


@given(turn=turns(["x", "y"], failures=False))
def test_turns_transfer_to_a_known_target(turn: Any) -> None:
    assert turn.kind not in ("fail", "tool_fail")
    if turn.kind == "transfer":
        assert turn.target in ("x", "y")


def _run(app: Application, stop: Stop) -> Any:
    clock = trio.testing.MockClock(autojump_threshold=0)
    return trio.run(
        functools.partial(run_application, app, stop, session_service=InMemorySessionService()),
        clock=clock,
    )


@NEEDS_FULL_DELIVERY
@settings(max_examples=40, deadline=None)
@given(app=applications(failures=False), interleaving=interleavings())
def test_drawn_applications_run_to_completion_and_keep_every_rule(
    app: Application, interleaving: Interleaving
) -> None:
    run = _run(app, Stop())
    assert run.error is None, app.describe()
    assert not run.stopped
    assert check_invariants(run.delivered, run.session) == []
    assert app.violations(run) == []


@NEEDS_FULL_DELIVERY
@settings(max_examples=40, deadline=None)
@given(app=applications(max_depth=2), stop=stops(), interleaving=interleavings())
def test_drawn_applications_stopped_or_failing_keep_every_rule(
    app: Application, stop: Stop, interleaving: Interleaving
) -> None:
    run = _run(app, stop)
    problems = app.violations(run)
    assert problems == [], f"{app.describe()}\n{stop!r} {interleaving!r}\n{run.error!r}"


@settings(max_examples=20, deadline=None)
@given(app=applications(llm=False, streaming=True), _random=st.random_module())
def test_application_options_shape_the_tree(app: Application, _random: Any) -> None:
    assert app.streaming
    assert "LlmAgent" not in app.describe()
    names = [line.strip() for line in app.describe().splitlines()]
    assert len(names) == len(set(names))  # every agent name is unique


@given(stop=stops(max_after=3, max_at=2.0))
def test_stops_stay_in_range(stop: Stop) -> None:
    assert stop.after <= 3
    assert stop.at <= 2.0
