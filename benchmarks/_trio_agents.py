"""The workloads W1-W8 on trio_agents (definitions: ``docs/benchmarks/workloads.md``)."""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import Result, Sample, Window, check, measure, result, summary
from trio_agents import (
    BaseAgent,
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    Part,
    Runner,
    SequentialAgent,
    UsageMetadata,
)
from trio_agents.models import LlmRequest, LlmResponse, Model
from trio_agents.sessions import InMemorySessionService, SessionService

IMPL = "trio_agents"
logging.getLogger("trio_agents").setLevel(logging.CRITICAL)


def trio_loop(sample: Sample) -> dict[str, float]:
    return trio.run(sample)


class Emitter(BaseAgent):
    """Emits ``count`` events with state delta ``{key: i}``."""

    count: int = 0
    key: str = "i"

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        key = self.key
        for i in range(self.count):
            await ctx.emit(Event(actions=EventActions(state_delta={key: i})))


class Step(BaseAgent):
    """W4's loop body: reads ``iter``, writes ``iter + 1``, escalates on the last iteration."""

    limit: int = 0

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        done = int(ctx.session.state.get("iter", 0)) + 1
        escalate = True if done == self.limit else None
        await ctx.emit(Event(actions=EventActions(state_delta={"iter": done}, escalate=escalate)))


class InjectedFailure(Exception):
    pass


class Sibling(BaseAgent):
    """W8's child: sleeps ``pause``, emits; the failer raises after ``fail_after`` events."""

    pause: float = 0.001
    fail_after: int | None = None
    probe: Any = None

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        probe = self.probe
        probe["running"] += 1
        try:
            for i in range(100_000):
                await trio.sleep(self.pause)
                if i == self.fail_after:
                    probe["t_fail"] = time.perf_counter()
                    raise InjectedFailure
                if probe["t_fail"] is not None:
                    probe["produced_after"] += 1
                await ctx.emit(Event(actions=EventActions(state_delta={self.name: i})))
        finally:
            probe["running"] -= 1


async def _run(runner: Runner, session_id: str, user: str = "user") -> int:
    count = 0
    async with runner.run(user_id=user, session_id=session_id, new_message="go") as events:
        async for _ in events:
            count += 1
    return count


async def _timed(root: BaseAgent) -> tuple[float, int, dict[str, Any], list[Event]]:
    """Run ``root`` once on a fresh session; (window, events seen, final state, history)."""
    runner = InMemoryRunner(root, app_name="bench")
    session = await runner.session_service.create_session(app_name="bench", user_id="user")
    with Window() as window:
        count = await _run(runner, session.id)
    stored = await runner.session_service.get_session(
        app_name="bench", user_id="user", session_id=session.id
    )
    assert stored is not None
    return window.seconds, count, stored.state, list(stored.events)


def w1(n: int, first: bool) -> Result:
    async def sample() -> dict[str, float]:
        seconds, count, state, stored = await _timed(Emitter(name="emitter", count=n))
        check(count == n, f"W1: {count} events seen, expected {n}")
        check(len(stored) == n + 1 and state["i"] == n - 1, "W1: history and state")
        return {"us_per_event": seconds / n * 1e6, "events_per_s": n / seconds}

    return measure("W1", f"n={n}", IMPL, "us_per_event", {"n": n}, sample, loop=trio_loop,
                   warm_up=first)  # fmt: skip


def w2(depth: int, each: int, first: bool) -> Result:
    async def sample() -> dict[str, float]:
        kids = [Emitter(name=f"a{d}", count=each, key=f"a{d}") for d in range(depth)]
        seconds, count, state, _ = await _timed(SequentialAgent(name="seq", sub_agents=kids))
        check(count == depth * each, "W2: event count")
        check(all(state[f"a{d}"] == each - 1 for d in range(depth)), "W2: state")
        return {
            "us_per_event": seconds / (depth * each) * 1e6,
            "us_per_agent": seconds / depth * 1e6,
            "total_ms": seconds * 1e3,
        }

    params = {"d": depth, "e": each}
    return measure("W2", f"d={depth} e={each}", IMPL, "us_per_event", params, sample,
                   loop=trio_loop, warm_up=first)  # fmt: skip


def w3(k: int, first: bool, each: int = 5) -> Result:
    async def sample() -> dict[str, float]:
        kids = [Emitter(name=f"b{i}", count=each, key=f"b{i}") for i in range(k)]
        seconds, count, state, _ = await _timed(ParallelAgent(name="par", sub_agents=kids))
        check(count == k * each, "W3: event count")
        check(all(state[f"b{i}"] == each - 1 for i in range(k)), "W3: state")
        return {"us_per_event": seconds / (k * each) * 1e6, "total_ms": seconds * 1e3}

    return measure("W3", f"k={k} e={each}", IMPL, "us_per_event", {"k": k, "e": each}, sample,
                   loop=trio_loop, warm_up=first, memory=True)  # fmt: skip


def w4(m: int, first: bool) -> Result:
    async def sample() -> dict[str, float]:
        loop = LoopAgent(name="loop", max_iterations=m, sub_agents=[Step(name="step", limit=m)])
        seconds, count, state, _ = await _timed(loop)
        check(count == m and state["iter"] == m, "W4: read-your-writes across iterations")
        return {"us_per_iteration": seconds / m * 1e6}

    return measure("W4", f"m={m}", IMPL, "us_per_iteration", {"m": m}, sample, loop=trio_loop,
                   warm_up=first)  # fmt: skip


USAGE = UsageMetadata(prompt_token_count=10, candidates_token_count=5, total_token_count=15)


class ToolLoopModel(Model):
    """W5's scripted in-process model: calls ``advance`` until step ``t``, then answers."""

    def __init__(self, t: int) -> None:
        self.model = "scripted"
        self.t = t

    async def generate(self, request: LlmRequest) -> LlmResponse:
        await trio.lowlevel.checkpoint()
        last = request.contents[-1] if request.contents else None
        answers = [p.function_response for p in (last.parts if last else ()) if p.function_response]
        step = int(answers[0].response["step"]) if answers else 0
        if step < self.t:
            call = Part.from_function_call("advance", {"step": step})
            return LlmResponse(content=Content(role="model", parts=(call,)), usage_metadata=USAGE)
        text = Content.from_text(f"done after {self.t} tool calls", role="model")
        return LlmResponse(content=text, usage_metadata=USAGE)


async def advance(step: int) -> dict[str, int]:  # ruff: ignore[unused-async]
    """Advance one step.

    Args:
        step: The current step.
    """
    return {"step": step + 1}


def w5(t: int, first: bool) -> Result:
    async def sample() -> dict[str, float]:
        agent = LlmAgent(
            name="assistant",
            model=ToolLoopModel(t),
            instruction="Call advance until you are done.",
            tools=[advance],
        )
        seconds, count, _, stored = await _timed(agent)
        check(count == 2 * t + 1 and len(stored) == 2 * t + 2, "W5: 2T + 1 events")
        check(stored[-1].text == f"done after {t} tool calls", "W5: final answer stored")
        return {"us_per_step": seconds / t * 1e6, "us_per_model_call": seconds / (t + 1) * 1e6}

    return measure("W5", f"t={t}", IMPL, "us_per_step", {"t": t}, sample, loop=trio_loop,
                   warm_up=first)  # fmt: skip


def w7(s: int, first: bool, each: int = 5) -> Result:
    async def sample() -> dict[str, float]:
        runner = InMemoryRunner(Emitter(name="emitter", count=each), app_name="bench")
        service = runner.session_service
        ids = [
            (await service.create_session(app_name="bench", user_id=f"user{j}")).id
            for j in range(s)
        ]
        counts: list[int] = []

        async def one(j: int) -> None:
            counts.append(await _run(runner, ids[j], f"user{j}"))

        with Window() as window:
            async with trio.open_nursery() as nursery:
                for j in range(s):
                    nursery.start_soon(one, j)
        check(sum(counts) == s * each, "W7: event count")
        seconds = window.seconds
        return {
            "us_per_event": seconds / (s * each) * 1e6,
            "us_per_invocation": seconds / s * 1e6,
            "invocations_per_s": s / seconds,
            "events_per_s": s * each / seconds,
        }

    return measure("W7", f"s={s} e={each}", IMPL, "us_per_event", {"s": s, "e": each}, sample,
                   loop=trio_loop, warm_up=first, memory=True)  # fmt: skip


def w8(k: int, first: bool, fails_after: int = 3) -> Result:
    async def sample() -> dict[str, float]:
        probe: dict[str, Any] = {"running": 0, "t_fail": None, "produced_after": 0}
        kids = [Sibling(name="failer", fail_after=fails_after, probe=probe)]
        kids += [Sibling(name=f"s{i}", probe=probe) for i in range(k - 1)]
        runner = InMemoryRunner(ParallelAgent(name="par", sub_agents=kids), app_name="bench")
        session = await runner.session_service.create_session(app_name="bench", user_id="user")
        delivered_after = 0
        try:
            async with runner.run(user_id="user", session_id=session.id, new_message="go") as ev:
                async for _ in ev:
                    if probe["t_fail"] is not None:
                        delivered_after += 1
        except InjectedFailure:
            t_return = time.perf_counter()
        else:
            raise AssertionError("W8: the failure was not observed")
        return {
            "latency_ms": (t_return - probe["t_fail"]) * 1e3,
            "produced_after": probe["produced_after"],
            "delivered_after": delivered_after,
            "unstopped_at_return": probe["running"],
        }

    return measure("W8", f"k={k}", IMPL, "latency_ms", {"k": k}, sample, loop=trio_loop,
                   warm_up=first)  # fmt: skip


# -- W6: history growth ------------------------------------------------------------------------


def _w6_event(i: int) -> Event:
    return Event(
        author="writer",
        content=Content.from_text(f"event {i}", role="model"),
        actions=EventActions(state_delta={"i": i}),
    )


async def _w6(service: SessionService, backend: str, sizes: list[int]) -> list[Result]:
    """Part A: 5 windows of 50 appends at each checkpoint; part B: 5 one-event invocations."""
    runner = Runner(agent=Emitter(name="one", count=1), app_name="bench", session_service=service)
    session = await service.create_session(app_name="bench", user_id="user")
    out: list[Result] = []
    appended, started = 0, time.perf_counter()
    for size in sizes:
        while appended < size:
            await service.append_event(session, _w6_event(appended))
            appended += 1
        fill = time.perf_counter() - started
        windows = []
        for _ in range(5):
            batch = [_w6_event(appended + i) for i in range(50)]
            with Window() as window:
                for event in batch:
                    await service.append_event(session, event)
            appended += 50
            windows.append(window.seconds / 50 * 1e6)
        invokes = []
        for _ in range(5):
            with Window() as window:
                count = await _run(runner, session.id)
            check(count == 1, "W6: the one-event invocation")
            invokes.append(window.seconds * 1e3)
            appended += 2  # the user message and the event
        fresh = await service.get_session(app_name="bench", user_id="user", session_id=session.id)
        assert fresh is not None
        check(len(fresh.events) == appended, f"W6: {len(fresh.events)} stored, {appended} sent")
        session = fresh
        metrics = {
            "us_per_append": summary(windows),
            "invoke_ms": summary(invokes),
            "fill_s": summary([fill]),
        }
        params = {"backend": backend, "n": size}
        out.append(result("W6", f"{backend} n={size}", IMPL, "us_per_append", params, metrics))
    return out


def w6(backend: str, sizes: list[int]) -> list[Result]:
    """W6 on the in-memory store, or on SQLite in a temporary file (if the backend exists)."""
    if backend == "memory":
        return trio.run(_w6, InMemorySessionService(), backend, sizes)
    try:
        from trio_agents.sessions import SqliteSessionService
    except ImportError as exc:
        return [_skipped("W6", f"sqlite n={n}", f"no SqliteSessionService: {exc}") for n in sizes]

    async def run(path: Path) -> list[Result]:
        async with SqliteSessionService(path) as service:
            return await _w6(service, backend, sizes)

    with tempfile.TemporaryDirectory() as directory:
        return trio.run(run, Path(directory) / "w6.db")


def _skipped(workload: str, case: str, reason: str) -> Result:
    return result(workload, case, IMPL, "", {}, {}, notes=f"skipped: {reason}")


# -- the plan ----------------------------------------------------------------------------------


def plan(quick: bool) -> Iterator[tuple[str, Callable[[], list[Result]]]]:
    """(workload, thunk) pairs; ``quick`` uses tiny sizes."""

    def sized(case: Callable[..., Result], sizes: list[Any]) -> Callable[[], list[Result]]:
        def run() -> list[Result]:
            return [
                case(*(size if isinstance(size, tuple) else (size,)), first=i == 0)
                for i, size in enumerate(sizes)
            ]

        return run

    if quick:
        yield "W1", sized(w1, [100])
        yield "W2", sized(w2, [(10, 10)])
        yield "W3", sized(w3, [10])
        yield "W4", sized(w4, [100])
        yield "W5", sized(w5, [10])
        yield "W6", lambda: w6("memory", [300]) + w6("sqlite", [100])
        yield "W7", sized(w7, [50])
        yield "W8", sized(w8, [10])
        return
    yield "W1", sized(w1, [100, 1000, 5000])
    yield "W2", sized(w2, [(10, 100), (100, 10)])
    yield "W3", sized(w3, [10, 100, 1000])
    yield "W4", sized(w4, [100, 1000])
    yield "W5", sized(w5, [10, 50, 200])
    yield "W6", lambda: w6("memory", [1000, 5000, 10000]) + w6("sqlite", [500, 1000, 2000])
    yield "W7", sized(w7, [100, 1000])
    yield "W8", sized(w8, [10, 100, 1000])
