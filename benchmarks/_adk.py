"""The workloads W1-W8 on google-adk 2.13 (asyncio), for ratios measured in the same run.

Run by ``python -m benchmarks --adk-python PATH``, where ``PATH`` is an interpreter that has
google-adk (``pip install google-adk==2.13.0`` in a separate virtualenv; never in the project's
environment). Imports only the standard library, google-adk and :mod:`benchmarks._harness`.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks._harness import Result, Sample, Window, check, measure, result, summary

warnings.filterwarnings("ignore", category=DeprecationWarning)  # ParallelAgent, LoopAgent
for _name in ("google_adk", "google.adk", "google_genai", "google.genai", "aiosqlite"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)

from google.adk.agents import (  # ruff: ignore[module-import-not-at-top-of-file]
    BaseAgent,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
)
from google.adk.events import Event, EventActions  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.models.base_llm import BaseLlm  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.models.llm_request import LlmRequest  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.models.llm_response import LlmResponse  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.runners import InMemoryRunner, Runner  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.sessions import InMemorySessionService  # ruff: ignore[module-import-not-at-top-of-file]
from google.genai import types  # ruff: ignore[module-import-not-at-top-of-file]

IMPL = "google-adk"
MESSAGE = types.Content(role="user", parts=[types.Part(text="go")])


def asyncio_loop(sample: Sample) -> dict[str, float]:
    return asyncio.run(sample())  # type: ignore[arg-type]


class Emitter(BaseAgent):
    count: int = 0
    key: str = "i"

    async def _run_async_impl(self, ctx: Any) -> AsyncGenerator[Event, None]:
        for i in range(self.count):
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                actions=EventActions(state_delta={self.key: i}),
            )


class Step(BaseAgent):
    limit: int = 0

    async def _run_async_impl(self, ctx: Any) -> AsyncGenerator[Event, None]:
        done = int(ctx.session.state.get("iter", 0)) + 1
        yield Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            actions=EventActions(
                state_delta={"iter": done}, escalate=True if done == self.limit else None
            ),
        )


class InjectedFailure(Exception):
    pass


PROBE: dict[str, Any] = {}
"""Shared by the W8 children (a pydantic field would be copied per agent)."""


class Sibling(BaseAgent):
    fail_after: int | None = None

    async def _run_async_impl(self, ctx: Any) -> AsyncGenerator[Event, None]:
        probe = PROBE
        probe["running"] += 1
        try:
            for i in range(100_000):
                await asyncio.sleep(0.001)
                if i == self.fail_after:
                    probe["t_fail"] = time.perf_counter()
                    raise InjectedFailure
                if probe["t_fail"] is not None:
                    probe["produced_after"] += 1
                yield Event(
                    author=self.name,
                    invocation_id=ctx.invocation_id,
                    actions=EventActions(state_delta={self.name: i}),
                )
        finally:
            probe["running"] -= 1


async def _run(runner: Runner, session_id: str, user: str = "user") -> int:
    count = 0
    async for _ in runner.run_async(user_id=user, session_id=session_id, new_message=MESSAGE):
        count += 1
    return count


async def _timed(root: BaseAgent) -> tuple[float, int, dict[str, Any], list[Event]]:
    runner = InMemoryRunner(agent=root, app_name="bench")
    service = runner.session_service
    session = await service.create_session(app_name="bench", user_id="user")
    with Window() as window:
        count = await _run(runner, session.id)
    stored = await service.get_session(app_name="bench", user_id="user", session_id=session.id)
    assert stored is not None
    return window.seconds, count, dict(stored.state), list(stored.events)


def w1(n: int, first: bool) -> Result:
    async def sample() -> dict[str, float]:
        seconds, count, state, stored = await _timed(Emitter(name="emitter", count=n))
        check(count == n, f"W1: {count} events seen, expected {n}")
        check(len(stored) == n + 1 and state["i"] == n - 1, "W1: history and state")
        return {"us_per_event": seconds / n * 1e6, "events_per_s": n / seconds}

    return measure("W1", f"n={n}", IMPL, "us_per_event", {"n": n}, sample, loop=asyncio_loop,
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
                   loop=asyncio_loop, warm_up=first)  # fmt: skip


def w3(k: int, first: bool, each: int = 5) -> Result:
    async def sample() -> dict[str, float]:
        kids = [Emitter(name=f"b{i}", count=each, key=f"b{i}") for i in range(k)]
        seconds, count, state, _ = await _timed(ParallelAgent(name="par", sub_agents=kids))
        check(count == k * each, "W3: event count")
        check(all(state[f"b{i}"] == each - 1 for i in range(k)), "W3: state")
        return {"us_per_event": seconds / (k * each) * 1e6, "total_ms": seconds * 1e3}

    return measure("W3", f"k={k} e={each}", IMPL, "us_per_event", {"k": k, "e": each}, sample,
                   loop=asyncio_loop, warm_up=first, memory=True)  # fmt: skip


def w4(m: int, first: bool) -> Result:
    async def sample() -> dict[str, float]:
        loop = LoopAgent(name="loop", max_iterations=m, sub_agents=[Step(name="step", limit=m)])
        seconds, count, state, _ = await _timed(loop)
        check(count == m and state["iter"] == m, "W4: read-your-writes across iterations")
        return {"us_per_iteration": seconds / m * 1e6}

    return measure("W4", f"m={m}", IMPL, "us_per_iteration", {"m": m}, sample,
                   loop=asyncio_loop, warm_up=first)  # fmt: skip


USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=10, candidates_token_count=5, total_token_count=15
)


class ToolLoopLlm(BaseLlm):
    """W5's scripted in-process model: calls ``advance`` until step ``t``, then answers."""

    t: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await asyncio.sleep(0)
        last = llm_request.contents[-1] if llm_request.contents else None
        answers = [p.function_response for p in (last.parts or []) if p.function_response]
        step = int(answers[0].response["step"]) if answers and answers[0].response else 0
        if step < self.t:
            call = types.Part(function_call=types.FunctionCall(name="advance", args={"step": step}))
            content = types.Content(role="model", parts=[call])
        else:
            text = types.Part(text=f"done after {self.t} tool calls")
            content = types.Content(role="model", parts=[text])
        yield LlmResponse(content=content, usage_metadata=USAGE)


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
            model=ToolLoopLlm(model="scripted", t=t),
            instruction="Call advance until you are done.",
            tools=[advance],
        )
        seconds, count, _, stored = await _timed(agent)
        check(count == 2 * t + 1 and len(stored) == 2 * t + 2, f"W5: {count} events")
        last = stored[-1].content
        text = "".join(p.text or "" for p in (last.parts or [])) if last else ""
        check(text == f"done after {t} tool calls", "W5: final answer stored")
        return {"us_per_step": seconds / t * 1e6, "us_per_model_call": seconds / (t + 1) * 1e6}

    return measure("W5", f"t={t}", IMPL, "us_per_step", {"t": t}, sample, loop=asyncio_loop,
                   warm_up=first)  # fmt: skip


def w7(s: int, first: bool, each: int = 5) -> Result:
    async def sample() -> dict[str, float]:
        runner = InMemoryRunner(agent=Emitter(name="emitter", count=each), app_name="bench")
        service = runner.session_service
        ids = [
            (await service.create_session(app_name="bench", user_id=f"user{j}")).id
            for j in range(s)
        ]
        with Window() as window:
            counts = await asyncio.gather(*(_run(runner, ids[j], f"user{j}") for j in range(s)))
        check(sum(counts) == s * each, "W7: event count")
        seconds = window.seconds
        return {
            "us_per_event": seconds / (s * each) * 1e6,
            "us_per_invocation": seconds / s * 1e6,
            "invocations_per_s": s / seconds,
            "events_per_s": s * each / seconds,
        }

    return measure("W7", f"s={s} e={each}", IMPL, "us_per_event", {"s": s, "e": each}, sample,
                   loop=asyncio_loop, warm_up=first, memory=True)  # fmt: skip


def _only_leaf(exc: BaseException) -> bool:
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for sub in exc.exceptions:
                walk(sub)
        else:
            leaves.append(exc)

    walk(exc)
    return len(leaves) == 1 and isinstance(leaves[0], InjectedFailure)


def w8(k: int, first: bool, fails_after: int = 3) -> Result:
    async def sample() -> dict[str, float]:
        probe = PROBE
        probe.update(running=0, t_fail=None, produced_after=0)
        kids = [Sibling(name="failer", fail_after=fails_after)]
        kids += [Sibling(name=f"s{i}") for i in range(k - 1)]
        runner = InMemoryRunner(agent=ParallelAgent(name="par", sub_agents=kids), app_name="bench")
        session = await runner.session_service.create_session(app_name="bench", user_id="user")
        delivered_after = 0
        try:
            async for _ in runner.run_async(
                user_id="user", session_id=session.id, new_message=MESSAGE
            ):
                if probe["t_fail"] is not None:
                    delivered_after += 1
        except (InjectedFailure, BaseExceptionGroup) as exc:
            t_return = time.perf_counter()
            check(_only_leaf(exc), f"W8: unexpected {exc!r}")
        else:
            raise AssertionError("W8: the failure was not observed")
        return {
            "latency_ms": (t_return - probe["t_fail"]) * 1e3,
            "produced_after": probe["produced_after"],
            "delivered_after": delivered_after,
            "unstopped_at_return": probe["running"],
        }

    return measure("W8", f"k={k}", IMPL, "latency_ms", {"k": k}, sample, loop=asyncio_loop,
                   warm_up=first)  # fmt: skip


# -- W6: history growth ------------------------------------------------------------------------


def _w6_event(i: int) -> Event:
    return Event(
        author="writer",
        content=types.Content(role="model", parts=[types.Part(text=f"event {i}")]),
        actions=EventActions(state_delta={"i": i}),
    )


async def _w6(service: Any, backend: str, sizes: list[int]) -> list[Result]:
    runner = Runner(app_name="bench", agent=Emitter(name="one", count=1), session_service=service)
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
            appended += 2
        session = await service.get_session(app_name="bench", user_id="user", session_id=session.id)
        check(len(session.events) == appended, f"W6: {len(session.events)} stored, {appended} sent")
        metrics = {
            "us_per_append": summary(windows),
            "invoke_ms": summary(invokes),
            "fill_s": summary([fill]),
        }
        params = {"backend": backend, "n": size}
        out.append(result("W6", f"{backend} n={size}", IMPL, "us_per_append", params, metrics))
    return out


def w6(backend: str, sizes: list[int]) -> list[Result]:
    if backend == "memory":
        return asyncio.run(_w6(InMemorySessionService(), backend, sizes))
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    async def run(path: Path) -> list[Result]:
        service = SqliteSessionService(str(path))
        try:
            return await _w6(service, backend, sizes)
        finally:
            await service.close()

    with tempfile.TemporaryDirectory() as directory:
        return asyncio.run(run(Path(directory) / "w6.db"))


# -- the plan ----------------------------------------------------------------------------------


def plan(quick: bool) -> Iterator[tuple[str, Callable[[], list[Result]]]]:
    """(workload, thunk) pairs, the same sizes as the trio_agents plan."""

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
