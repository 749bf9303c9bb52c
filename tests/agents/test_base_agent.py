"""BaseAgent: names, the tree, callbacks (R-AG-1..5)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.agents.helpers import Say, run_agent, texts
from trio_agents import (
    BaseAgent,
    CallbackContext,
    ConfigurationError,
    Content,
    Event,
    InMemoryRunner,
    InvocationContext,
    SequentialAgent,
)


@pytest.mark.parametrize("name", ["not valid", "1abc", "", "a-b", "user", 3])
def test_invalid_agent_names_are_rejected_r_ag_5(name: Any) -> None:
    with pytest.raises(ConfigurationError, match="agent name"):
        Say(name=name)


def test_an_agent_cannot_have_two_parents() -> None:
    child = Say(name="child")
    SequentialAgent(name="first", sub_agents=[child])
    with pytest.raises(ConfigurationError, match="'child' already has parent 'first'"):
        SequentialAgent(name="second", sub_agents=[child])


def test_unknown_keyword_is_a_type_error_declared_fields_are_accepted() -> None:
    assert Say(name="a", words=("x",)).words == ("x",)
    with pytest.raises(TypeError, match="unexpected keyword 'colour'"):
        Say(name="a", colour="red")


def test_tree_navigation() -> None:
    leaf = Say(name="leaf")
    mid = SequentialAgent(name="mid", sub_agents=[leaf])
    root = SequentialAgent(name="root", sub_agents=[mid, Say(name="other")])
    assert leaf.parent_agent is mid
    assert mid.parent_agent is root
    assert leaf.root_agent is root
    assert root.find_agent("root") is root
    assert root.find_agent("leaf") is leaf
    assert root.find_sub_agent("root") is None
    assert root.find_agent("missing") is None


async def test_incomplete_agent_raises_not_implemented() -> None:
    with pytest.raises(NotImplementedError):
        await run_agent(BaseAgent(name="bare"))


def test_callback_with_wrong_signature_is_rejected_at_construction() -> None:
    def wrong(ctx: Any) -> None:
        return None

    with pytest.raises(ConfigurationError, match=r"before_agent_callback .*callback_context"):
        Say(name="a", before_agent_callback=wrong)


def _chain(results: list[Any], calls: list[int]) -> list[Any]:
    def make(i: int, result: Any, is_async: bool) -> Any:
        if is_async:

            async def acb(callback_context: CallbackContext) -> Any:
                calls.append(i)
                return result

            return acb

        def cb(callback_context: CallbackContext) -> Any:
            calls.append(i)
            return result

        return cb

    return [make(i, r, i % 2 == 1) for i, r in enumerate(results)]


R2 = Content.from_text("r2", role="model")
R1 = Content.from_text("r1", role="model")


@pytest.mark.parametrize(
    ("results", "expected_calls", "expected_texts"),
    [
        ([None, R2, R1, None], [0, 1], ["r2"]),
        ([None, None, None, None], [0, 1, 2, 3], ["body"]),
        ([R1, R2, None, None], [0], ["r1"]),
    ],
    ids=["second-wins", "all-none", "first-wins"],
)
async def test_before_agent_callback_chain_r_ag_2(
    results: list[Any], expected_calls: list[int], expected_texts: list[str]
) -> None:
    calls: list[int] = []
    agent = Say(name="a", words=("body",), before_agent_callback=_chain(results, calls))
    events, _ = await run_agent(agent)
    assert calls == expected_calls
    assert texts(events) == expected_texts
    assert agent.runs == (1 if expected_texts == ["body"] else 0)


@pytest.mark.parametrize(
    ("results", "expected_calls", "expected_texts"),
    [
        ([None, R2, R1, None], [0, 1], ["body", "r2"]),
        ([None, None, None, None], [0, 1, 2, 3], ["body"]),
        ([R1, R2, None, None], [0], ["body", "r1"]),
    ],
    ids=["second-wins", "all-none", "first-wins"],
)
async def test_after_agent_callback_chain_r_ag_2(
    results: list[Any], expected_calls: list[int], expected_texts: list[str]
) -> None:
    calls: list[int] = []
    agent = Say(name="a", words=("body",), after_agent_callback=_chain(results, calls))
    events, _ = await run_agent(agent)
    assert calls == expected_calls
    assert texts(events) == expected_texts
    assert {e.author for e in events} == {"a"}


async def test_callback_state_writes_ride_on_a_content_less_event_r_st_3() -> None:
    def before(callback_context: CallbackContext) -> None:
        callback_context.state["seen"] = True

    events, _ = await run_agent(Say(name="a", words=("x",), before_agent_callback=before))
    assert events[0].content is None
    assert dict(events[0].actions.state_delta) == {"seen": True}
    assert texts(events[1:]) == ["x"]


async def test_before_callback_content_skips_the_agent_but_not_the_sequence_r_ag_4_r_seq_3() -> (
    None
):
    skipped = Say(
        name="skipped", words=("never",), before_agent_callback=lambda callback_context: R1
    )
    after = Say(name="after", words=("still runs",))
    events, _ = await run_agent(SequentialAgent(name="seq", sub_agents=[skipped, after]))
    assert texts(events) == ["r1", "still runs"]
    assert skipped.runs == 0


async def test_end_invocation_stops_only_the_current_agent_r_ag_4() -> None:
    class Stopper(BaseAgent):
        async def _run_async_impl(self, ctx: Any) -> None:
            ctx.end_invocation = True

    after_calls: list[str] = []
    stopper = Stopper(
        name="stopper", after_agent_callback=lambda callback_context: after_calls.append("x")
    )
    events, _ = await run_agent(SequentialAgent(name="seq", sub_agents=[stopper, Say(name="next")]))
    assert texts(events) == ["hi"]
    assert after_calls == []


async def test_callback_returning_a_non_content_is_a_configuration_error() -> None:
    agent = Say(name="a", before_agent_callback=lambda callback_context: "plain string")
    with pytest.raises(ConfigurationError, match="must return Content"):
        await run_agent(agent)


async def test_after_callbacks_run_best_effort_when_the_agent_is_cancelled_r_ag_3() -> None:
    """R-AG-3 [2.13]: cancelled after its before-callbacks, an agent's after-callbacks still run;
    their result is ignored (nothing is emitted) and a failure in them never replaces the
    cancellation."""
    seen: list[bool] = []

    def after(callback_context: CallbackContext) -> Content:
        seen.append(callback_context.cancelled)
        raise RuntimeError("cleanup failed")

    class Stuck(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await ctx.emit(Event(content=Content.from_text("started", role="model")))
            await trio.sleep_forever()

    runner = InMemoryRunner(Stuck(name="stuck", after_agent_callback=after))
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        async for _ in events:
            events.cancel("stop")
    assert seen == [True]
    stored = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session.id
    )
    assert stored is not None
    assert [e.text for e in stored.events] == ["go", "started"]
