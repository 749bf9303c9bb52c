"""Exploring timing: sleeps and timeouts perturbed by drawn factors on a virtual clock.

The trip-planning app of the testing kit's first user trial: a ParallelAgent of three LlmAgents
on ScriptedModel, each calling a tool whose latency differs (0.1, 0.4 and 1 s: ten times from
the fastest to the slowest). The buggy app's headline is the first offer that came back, so
the weather report makes the headline when the slowest tool finishes first: exploring the
scheduling order alone never finds that, exploring timing does, within 200 examples; the fixed
app passes them all.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import hypothesis
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis.database import InMemoryExampleDatabase

from trio_agents import (
    CallbackContext,
    Content,
    InMemoryRunner,
    LlmAgent,
    ParallelAgent,
    Part,
    ToolContext,
)
from trio_agents.models import LlmResponse
from trio_agents.testing import PerturbedTiming, ScriptedModel, collect
from trio_agents.testing.strategies import Interleaving, explore_interleavings, interleavings

LATENCY = {"flights": 0.1, "hotels": 0.4, "weather": 1.0}
OFFERS = {"flights": "flight OSL-ROM 420 EUR", "hotels": "hotel Roma 380 EUR", "weather": "sunny"}


def make_tool(kind: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def tool(tool_context: ToolContext) -> dict[str, Any]:
        await trio.sleep(LATENCY[kind])  # the remote API
        tool_context.state[f"offer_{kind}"] = OFFERS[kind]
        return {"offer": OFFERS[kind]}

    tool.__name__ = f"search_{kind}"
    tool.__doc__ = f"Search {kind}."
    return tool


def researcher(kind: str) -> LlmAgent:
    call = Part.from_function_call(f"search_{kind}", {})
    model = ScriptedModel(
        [LlmResponse(content=Content(role="model", parts=[call])), f"Found {kind}."]
    )
    return LlmAgent(name=kind, model=model, tools=[make_tool(kind)])


def headline_of_first_answer(callback_context: CallbackContext) -> None:
    """The bug: the headline is whichever offer came back first."""
    session = callback_context.session
    for event in session.events:
        for response in event.get_function_responses():
            if event.invocation_id == callback_context.invocation_id:
                callback_context.state["headline"] = response.response["offer"]
                return


def headline_by_priority(callback_context: CallbackContext) -> None:
    """The fix: the headline is the flight, else the hotel, else the weather."""
    state = callback_context.state
    for kind in ("flights", "hotels", "weather"):
        if state.get(f"offer_{kind}") is not None:
            state["headline"] = state[f"offer_{kind}"]
            return


def trip_app(pick_headline: Callable[[CallbackContext], None]) -> ParallelAgent:
    return ParallelAgent(
        name="research",
        sub_agents=[researcher(kind) for kind in LATENCY],
        after_agent_callback=pick_headline,
    )


def scenario(pick_headline: Callable[[CallbackContext], None]) -> Callable[[], Awaitable[None]]:
    async def plan_a_trip() -> None:
        result = await collect(
            InMemoryRunner(trip_app(pick_headline)), user_id="u", new_message="Rome"
        )
        headline = result.session.state["headline"]
        assert headline != OFFERS["weather"], "the weather report is the headline"

    return plan_a_trip


NO_DATABASE = settings(database=None)


def test_order_alone_never_finds_the_slow_branch_bug() -> None:
    """What the trial measured: with latencies apart, no scheduling order changes who is first."""
    explore_interleavings(scenario(headline_of_first_answer), timing=None, settings=NO_DATABASE)


def test_timing_finds_the_slow_branch_bug_within_200_examples() -> None:
    """The bug needs the slowest tool (1 s) to finish before the fastest (0.1 s)."""
    runs = 0
    first_failure: int | None = None
    plan = scenario(headline_of_first_answer)

    async def counted() -> None:
        nonlocal runs, first_failure
        runs += 1
        try:
            await plan()
        except AssertionError:
            first_failure = first_failure or runs
            raise

    with pytest.raises(AssertionError, match="headline") as failure:
        explore_interleavings(counted, max_examples=200, settings=NO_DATABASE)
    assert first_failure is not None and first_failure <= 200
    notes = "\n".join(failure.value.__notes__)
    seed = int(re.findall(r"seed=(\d+)\)\)", notes)[-1])
    # the seed replays both the order and the timing, by either route
    with pytest.raises(AssertionError, match="headline"):
        explore_interleavings(plan, seed=seed)
    with pytest.raises(AssertionError, match="headline"):
        Interleaving(seed).run(plan)


def test_the_fixed_app_passes_every_order_and_timing() -> None:
    explore_interleavings(scenario(headline_by_priority), max_examples=200, settings=NO_DATABASE)


def test_a_seed_without_timing_keeps_every_sleep_as_written() -> None:
    times: list[float] = []

    async def sleeps() -> None:
        await trio.sleep(1.0)
        times.append(trio.current_time())

    explore_interleavings(sleeps, max_examples=5, timing=None)
    assert times == [1.0] * len(times)


async def sleeper_times() -> list[float]:
    """When each of three sleeps (1, 2, 3 s) and a 10 s timeout end, in virtual seconds."""
    ends: dict[str, float] = {}

    async def sleep(name: str, seconds: float) -> None:
        await trio.sleep(seconds)
        ends[name] = trio.current_time()

    async with trio.open_nursery() as nursery:
        for name, seconds in (("one", 1.0), ("two", 2.0), ("three", 3.0)):
            nursery.start_soon(sleep, name, seconds)
    start = trio.current_time()
    with trio.move_on_after(10):
        await trio.sleep_forever()
    ends["timeout"] = trio.current_time() - start
    return [ends[k] for k in ("one", "two", "three", "timeout")]


@settings(max_examples=30, deadline=None)
@given(interleaving=interleavings(timing=4.0))
def test_every_sleep_and_timeout_stays_within_the_spread(interleaving: Interleaving) -> None:
    ends = interleaving.run(sleeper_times)
    for written, actual in zip([1.0, 2.0, 3.0, 10.0], ends, strict=True):
        assert written / 4.0 <= actual <= written * 4.0
    assert interleaving.run(sleeper_times) == ends  # one seed, one timing


def test_timings_vary_with_the_seed() -> None:
    seen = {tuple(Interleaving(seed).run(sleeper_times)) for seed in range(10)}
    assert len(seen) == 10
    assert Interleaving(0, timing=None).run(sleeper_times) == [1.0, 2.0, 3.0, 10.0]


def test_the_instrument_works_with_any_clock_and_keeps_a_changed_deadline() -> None:
    async def main() -> tuple[float, float]:
        with trio.CancelScope() as scope:
            scope.deadline = trio.current_time() + 5
            scope.shield = True  # registers the same deadline again: the same moved value
            await trio.sleep_forever()
        first = trio.current_time()
        with trio.move_on_after(5):
            await trio.sleep_forever()
        return first, trio.current_time() - first

    clock = trio.testing.MockClock(autojump_threshold=0)
    first, second = trio.run(main, clock=clock, instruments=[PerturbedTiming(3)])
    assert 0.5 <= first <= 50 and 0.5 <= second <= 50
    assert not math.isclose(first, 5) or not math.isclose(second, 5)


@pytest.mark.parametrize("bad", [0.5, 0, -1, "ten", True, math.nan])
def test_a_bad_timing_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="timing must be a number >= 1 or None"):
        explore_interleavings(sleeper_times, timing=bad)
    with pytest.raises(ValueError, match="timing must be a number >= 1 or None"):
        PerturbedTiming(1, spread=bad)


def test_hypothesis_settings_are_honoured() -> None:
    """A deadline from the caller's settings applies, and failures go to the given database,
    under a key of this scenario's own."""
    database = InMemoryExampleDatabase()

    async def slow_for_real() -> None:
        await trio.to_thread.run_sync(time.sleep, 0.05)  # real time, against the deadline

    with pytest.raises(hypothesis.errors.DeadlineExceeded):
        explore_interleavings(
            slow_for_real,
            max_examples=3,
            settings=settings(deadline=10, database=database, derandomize=False),
        )
    assert database.data  # the failure was saved where we said
    keys = set(database.data)

    async def other() -> None:
        raise AssertionError("another scenario")

    with pytest.raises(AssertionError):
        explore_interleavings(other, max_examples=3, settings=settings(database=database))
    assert set(database.data) - keys  # saved under a key of its own


def failing(reason: str, kind: type[Exception] = AssertionError) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        raise kind(reason)

    return run


def test_closures_of_one_factory_keep_their_own_database_entries() -> None:
    database = InMemoryExampleDatabase()

    def keys() -> set[bytes]:
        return {k for k in database.data if not k.endswith((b".secondary", b".pareto"))}

    def explore(scenario: Callable[[], Awaitable[None]]) -> None:
        with pytest.raises(Exception, match=r"one|two"):
            explore_interleavings(scenario, max_examples=3, settings=settings(database=database))

    explore(failing("one"))
    assert len(keys()) == 1
    explore(failing("one"))  # the same scenario again: the same key
    assert len(keys()) == 1
    explore(failing("two"))  # closes over another value
    assert len(keys()) == 2
    explore(failing("two", KeyError))  # over another function (a class)
    assert len(keys()) == 3
