"""R-ST-2: containers read from state and mutated in place join the delta."""

from __future__ import annotations

from typing import Any

from trio_agents import (
    BaseAgent,
    CallbackContext,
    Content,
    Event,
    EventActionsDraft,
    InMemoryRunner,
    InvocationContext,
    State,
)


async def _run(agent: BaseAgent, state: dict[str, Any]) -> tuple[list[Event], dict[str, Any]]:
    runner = InMemoryRunner(agent)
    session = await runner.session_service.create_session(
        app_name=runner.app_name, user_id="u", state=state
    )
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        delivered = [e async for e in events]
    stored = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session.id
    )
    assert stored is not None
    return delivered, dict(stored.state)


def test_in_place_change_joins_the_delta_when_actions_are_read() -> None:
    """R-ST-2: snapshot at read time, compared when the actions are read."""
    draft = EventActionsDraft()
    live: dict[str, Any] = {"items": [1], "conf": {"a": 1}, "n": 3}
    state = draft.state_view(live)
    state["items"].append(2)
    state["conf"]["b"] = 2
    assert state["n"] == 3
    assert draft.state_delta == {"items": [1, 2], "conf": {"a": 1, "b": 2}}


def test_reading_without_changing_adds_nothing() -> None:
    draft = EventActionsDraft()
    state = draft.state_view({"items": [1], "conf": {"a": 1}})
    assert state["items"] == [1]
    assert state["conf"] == {"a": 1}
    assert not state.has_delta()
    assert draft.is_empty()


def test_a_change_that_is_not_json_is_not_added() -> None:
    """R-ST-2: only changes that survive a JSON round trip are recorded."""
    draft = EventActionsDraft()
    state = draft.state_view({"items": [1]})
    state["items"].append({1, 2})
    assert draft.state_delta == {}


def test_the_delta_holds_a_copy_so_later_mutation_cannot_alter_it() -> None:
    draft = EventActionsDraft()
    state = draft.state_view({"items": [1]})
    items = state["items"]
    items.append(2)
    frozen = draft.freeze()
    items.append(3)
    assert frozen.state_delta == {"items": [1, 2]}
    assert draft.state_delta == {"items": [1, 2, 3]}


def test_has_delta_sees_in_place_changes() -> None:
    draft = EventActionsDraft()
    state: State = draft.state_view({"conf": {}})
    state["conf"]["x"] = 1
    assert state.has_delta()


async def test_callback_mutation_is_committed_and_persisted() -> None:
    """R-ST-2 with R-ST-3: an agent-callback write rides on a content-less agent event."""

    def before(callback_context: CallbackContext) -> None:
        callback_context.state["seen"].append("before")

    class Quiet(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            pass

    events, state = await _run(Quiet(name="quiet", before_agent_callback=before), {"seen": []})
    assert [dict(e.actions.state_delta) for e in events] == [{"seen": ["before"]}]
    assert state["seen"] == ["before"]


async def test_custom_agent_mutation_rides_on_its_next_event() -> None:
    class Counter(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            ctx.state["tally"]["runs"] += 1
            await ctx.emit(Event(content=Content.from_text("counted", role="model")))

    events, state = await _run(Counter(name="counter"), {"tally": {"runs": 41}})
    assert events[-1].actions.state_delta == {"tally": {"runs": 42}}
    assert state["tally"] == {"runs": 42}
