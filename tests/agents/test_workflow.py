"""Workflow agents: SequentialAgent (R-SEQ), ParallelAgent (R-PAR), LoopAgent (R-LOOP).

Branches are ordered by sleeps on a virtual clock (``autojump_clock``): a branch that sleeps
runs strictly after every branch that can still make progress, so the orders asserted here are
exact and the tests take no real time.
"""

from __future__ import annotations

import pytest
import trio

from tests.agents.helpers import Forever, Say, authored, run_agent, texts
from trio_agents import (
    BaseAgent,
    Event,
    EventActions,
    InvocationContext,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
)


class Boom(Exception):
    pass


# -- SequentialAgent -----------------------------------------------------------------------------


async def test_sequential_runs_children_in_order_on_the_same_branch_r_seq_1() -> None:
    seq = SequentialAgent(name="seq", sub_agents=[Say(name="a", words=("1", "2")), Say(name="b")])
    events, _ = await run_agent(seq)
    assert authored(events) == [("a", "1"), ("a", "2"), ("b", "hi")]
    assert {e.branch for e in events} == {None}


async def test_sequential_ignores_escalate_r_seq_2() -> None:
    seq = SequentialAgent(name="seq", sub_agents=[Say(name="a", escalate_at=0), Say(name="b")])
    events, _ = await run_agent(seq)
    assert [e.author for e in events] == ["a", "b"]


async def test_empty_workflow_agents_emit_nothing_r_seq_6_r_par_8() -> None:
    for agent in (SequentialAgent(name="s"), ParallelAgent(name="p"), LoopAgent(name="l")):
        events, _ = await run_agent(agent)
        assert events == []


async def test_later_children_see_earlier_state_r_seq_1() -> None:
    class Reader(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await ctx.emit(
                Event(actions=EventActions(state_delta={"copy": ctx.session.state["i"]}))
            )

    class Writer(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await ctx.emit(Event(actions=EventActions(state_delta={"i": 7})))

    events, _ = await run_agent(
        SequentialAgent(name="s", sub_agents=[Writer(name="w"), Reader(name="r")])
    )
    assert events[-1].actions.state_delta == {"copy": 7}


# -- ParallelAgent -------------------------------------------------------------------------------


async def test_parallel_branches_are_named_and_run_concurrently_r_par_1(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = Say(name="slow", words=("late",), delay=0.05)
    fast = Say(name="fast", words=("early",))
    events, _ = await run_agent(ParallelAgent(name="par", sub_agents=[slow, fast]))
    assert [(e.author, e.branch) for e in events] == [("fast", "par.fast"), ("slow", "par.slow")]


async def test_nested_branch_names_r_par_1() -> None:
    inner = ParallelAgent(name="inner", sub_agents=[Say(name="Y")])
    seq = SequentialAgent(
        name="X", sub_agents=[ParallelAgent(name="inner2", sub_agents=[Say(name="Z")])]
    )
    outer = ParallelAgent(name="outer", sub_agents=[inner, seq])
    events, _ = await run_agent(outer)
    branches = {e.author: e.branch for e in events}
    assert branches == {"Y": "outer.inner.inner.Y", "Z": "outer.X.inner2.Z"}


async def test_parallel_sequential_child_shares_its_branch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seq = SequentialAgent(name="seq", sub_agents=[Say(name="a2"), Say(name="a3")])
    par = ParallelAgent(name="par", sub_agents=[seq, Say(name="a1", delay=0.05)])
    events, _ = await run_agent(par)
    assert [(e.author, e.branch) for e in events] == [
        ("a2", "par.seq"),
        ("a3", "par.seq"),
        ("a1", "par.a1"),
    ]


async def test_parallel_failure_cancels_and_drains_siblings_before_surfacing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    siblings = [Forever(name=f"s{i}") for i in range(5)]
    failer = Say(name="failer", words=("x",), delay=0.01, error=Boom("failer failed"))
    par = ParallelAgent(name="par", sub_agents=[failer, *siblings])
    with pytest.raises(Boom, match="failer failed"):
        await run_agent(par)
    assert all(s.finished for s in siblings)


async def test_two_simultaneous_failures_arrive_as_a_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = trio.Event()

    class Fail(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            if self.name == "f1":
                await trio.sleep(0.01)
                gate.set()
            else:
                await gate.wait()
            raise Boom(self.name)

    par = ParallelAgent(name="par", sub_agents=[Fail(name="f1"), Fail(name="f2")])
    with pytest.RaisesGroup(Boom, Boom):
        await run_agent(par)


async def test_escalation_by_a_direct_child_ends_the_parallel_agent_r_par_6(
    autojump_clock: trio.testing.MockClock,
) -> None:
    others = [Forever(name=f"s{i}") for i in range(3)]
    escalator = Say(name="boss", words=("stop", "never"), delay=0.01, escalate_at=0)
    par = ParallelAgent(name="par", sub_agents=[escalator, *others])
    after = Say(name="after", words=("next",))
    events, _ = await run_agent(SequentialAgent(name="seq", sub_agents=[par, after]))
    assert ("boss", "stop") in authored(events)
    assert ("boss", "never") not in authored(events)
    assert authored(events)[-1] == ("after", "next")
    assert all(o.finished for o in others)


async def test_escalation_from_a_grandchild_does_not_end_the_parallel_agent_r_par_6(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deep = SequentialAgent(name="deep", sub_agents=[Say(name="g", escalate_at=0)])
    sibling = Say(name="sib", words=("a", "b"), delay=0.02)
    events, _ = await run_agent(ParallelAgent(name="par", sub_agents=[deep, sibling]))
    assert texts([e for e in events if e.author == "sib"]) == ["a", "b"]


# -- LoopAgent -----------------------------------------------------------------------------------


async def test_loop_runs_max_iterations_passes_r_loop_1() -> None:
    loop = LoopAgent(name="loop", max_iterations=2, sub_agents=[Say(name="A"), Say(name="B")])
    events, _ = await run_agent(loop)
    assert [e.author for e in events] == ["A", "B", "A", "B"]


@pytest.mark.parametrize("limit", [0, -1])
async def test_loop_with_non_positive_max_makes_no_pass_r_loop_1(limit: int) -> None:
    events, _ = await run_agent(
        LoopAgent(name="loop", max_iterations=limit, sub_agents=[Say(name="A")])
    )
    assert events == []


async def test_escalate_lets_the_current_agent_finish_then_exits_r_loop_2() -> None:
    first = Say(name="A", words=("esc", "still"), escalate_at=0)
    skipped = Say(name="B")
    events, _ = await run_agent(LoopAgent(name="loop", sub_agents=[first, skipped]))
    assert authored(events) == [("A", "esc"), ("A", "still")]
    assert skipped.runs == 0


async def test_escalate_exits_enclosing_loops_r_loop_3() -> None:
    inner = LoopAgent(name="inner", sub_agents=[Say(name="A", escalate_at=0)])
    outer = LoopAgent(name="outer", max_iterations=5, sub_agents=[inner, Say(name="B")])
    events, _ = await run_agent(outer)
    assert [e.author for e in events] == ["A"]


async def test_loop_over_parallel_with_escalating_branch_exits_r_loop_3(
    autojump_clock: trio.testing.MockClock,
) -> None:
    par = ParallelAgent(name="par", sub_agents=[Say(name="A", escalate_at=0), Forever(name="F")])
    events, _ = await run_agent(LoopAgent(name="loop", max_iterations=10, sub_agents=[par]))
    assert [e.author for e in events if e.author == "A"] == ["A"]


async def test_loop_reads_its_own_writes_across_iterations_r_loop_4() -> None:
    class Step(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            n = ctx.session.state.get("iter", 0) + 1
            await ctx.emit(
                Event(actions=EventActions(state_delta={"iter": n}, escalate=n == 4 or None))
            )

    events, _ = await run_agent(LoopAgent(name="loop", sub_agents=[Step(name="step")]))
    assert [e.actions.state_delta["iter"] for e in events] == [1, 2, 3, 4]


async def test_silent_infinite_loop_still_yields_to_the_scheduler() -> None:
    class Silent(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            return None

    with trio.move_on_after(0.05) as scope:
        await run_agent(LoopAgent(name="loop", sub_agents=[Silent(name="quiet")]))
    assert scope.cancelled_caught
