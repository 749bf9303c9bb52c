"""The floors: each workload's communication pattern with nothing else.

Their list is in ``docs/benchmarks/workloads.md`` ("The floors").

An event is a tuple, a commit is ``list.append`` plus ``dict.update``; no validation, no copies.

* ``trio.chan``: producer task(s) → zero-buffer memory channel → committer task, each producer
  waiting for a per-item ack on its own buffer-1 channel (``trio.chan0``: a zero-buffer ack);
* ``trio.lowlevel``: two tasks handing off with ``wait_task_rescheduled``/``reschedule``;
* ``trio.gen``: no producer task, an async generator driven by the committing loop, one
  checkpoint per event; ``asyncio.queue`` / ``asyncio.gen``: the asyncio equivalents (W1);
* ``trio.commit`` and ``trio.sqlite3-thread``: W6's in-memory and SQLite appends.

Short cases are repeated inside one event loop until a sample lasts ``min_seconds`` (0.2 s).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import (
    Result,
    Sample,
    Window,
    check,
    measure,
    repeated,
    result,
    summary,
    traced_peak,
)

CHAN, CHAN0, LOWLEVEL, GEN = "trio.chan", "trio.chan0", "trio.lowlevel", "trio.gen"
AQUEUE, AGEN = "asyncio.queue", "asyncio.gen"
COMMIT, SQLITE = "trio.commit", "trio.sqlite3-thread"
Producers = list[tuple[str, int]]
"""(key, count): one producer emitting ``count`` events with delta ``{key: i}``."""


def trio_loop(sample: Sample) -> dict[str, float]:
    return trio.run(sample)


def asyncio_loop(sample: Sample) -> dict[str, float]:
    return asyncio.run(sample())  # type: ignore[arg-type]


# -- trio.chan: producers → zero-buffer channel → committer, per-item ack ----------------------


async def chan(producers: Producers, *, concurrent: bool, ack_buffer: int = 1) -> float:
    """One run of the channel pattern; returns its window in seconds."""
    history: list[tuple[str, dict[str, int]]] = []
    state: dict[str, int] = {}
    send, receive = trio.open_memory_channel[Any](0)

    async def produce(key: str, count: int, send: trio.MemorySendChannel[Any]) -> None:
        ack_send, ack_receive = trio.open_memory_channel[None](ack_buffer)
        async with send:
            for i in range(count):
                await send.send(((key, {key: i}), ack_send))
                await ack_receive.receive()

    async def commit() -> None:
        async with receive:
            async for event, ack in receive:
                history.append(event)
                state.update(event[1])
                if ack_buffer:
                    ack.send_nowait(None)
                else:
                    await ack.send(None)

    with Window() as window:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit)
            async with send:
                if concurrent:
                    async with trio.open_nursery() as inner:
                        for key, count in producers:
                            inner.start_soon(produce, key, count, send.clone())
                else:
                    for key, count in producers:
                        await produce(key, count, send.clone())
    _check_floor(producers, history, state)
    return window.seconds


def _check_floor(producers: Producers, history: list[Any], state: dict[str, int]) -> None:
    check(len(history) == sum(count for _, count in producers), "floor event count")
    check(all(state[key] == count - 1 for key, count in producers if count), "floor state")


# -- trio.gen: an async generator driven by the committing loop ------------------------------


async def _events(producers: Producers) -> AsyncIterator[tuple[str, dict[str, int]]]:
    for key, count in producers:
        for i in range(count):
            await trio.lowlevel.checkpoint()
            yield key, {key: i}


async def gen(producers: Producers) -> float:
    history: list[Any] = []
    state: dict[str, int] = {}
    with Window() as window:
        async for event in _events(producers):
            history.append(event)
            state.update(event[1])
    _check_floor(producers, history, state)
    return window.seconds


# -- trio.lowlevel: the scheduler's two-task round trip -----------------------------------------


async def lowlevel(n: int) -> float:
    """Producer parks until the committer reschedules it, per event."""
    history: list[Any] = []
    state: dict[str, int] = {}
    slot: dict[str, Any] = {"item": None, "producer": None, "committer": None}
    parked = trio.Event()

    def abort(_: object) -> trio.lowlevel.Abort:
        return trio.lowlevel.Abort.SUCCEEDED

    async def produce() -> None:
        await parked.wait()
        slot["producer"] = trio.lowlevel.current_task()
        for i in range(n):
            slot["item"] = ("i", {"i": i})
            trio.lowlevel.reschedule(slot["committer"])
            await trio.lowlevel.wait_task_rescheduled(abort)
        slot["item"] = None
        trio.lowlevel.reschedule(slot["committer"])

    async def commit() -> None:
        slot["committer"] = trio.lowlevel.current_task()
        parked.set()  # no checkpoint until the park below
        while True:
            await trio.lowlevel.wait_task_rescheduled(abort)
            event = slot["item"]
            if event is None:
                return
            history.append(event)
            state.update(event[1])
            trio.lowlevel.reschedule(slot["producer"])

    with Window() as window:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit)
            nursery.start_soon(produce)
    _check_floor([("i", n)], history, state)
    return window.seconds


# -- asyncio floors (W1) ------------------------------------------------------------------------


async def asyncio_queue(n: int) -> float:
    history: list[Any] = []
    state: dict[str, int] = {}
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def produce() -> None:
        ack: asyncio.Queue[None] = asyncio.Queue()
        for i in range(n):
            await queue.put((("i", {"i": i}), ack))
            await ack.get()
        await queue.put(None)

    async def commit() -> None:
        while (item := await queue.get()) is not None:
            event, ack = item
            history.append(event)
            state.update(event[1])
            ack.put_nowait(None)

    with Window() as window:
        await asyncio.gather(produce(), commit())
    _check_floor([("i", n)], history, state)
    return window.seconds


async def _asyncio_events(n: int) -> AsyncIterator[tuple[str, dict[str, int]]]:
    for i in range(n):
        await asyncio.sleep(0)
        yield "i", {"i": i}


async def asyncio_gen(n: int) -> float:
    history: list[Any] = []
    state: dict[str, int] = {}
    with Window() as window:
        async for event in _asyncio_events(n):
            history.append(event)
            state.update(event[1])
    _check_floor([("i", n)], history, state)
    return window.seconds


# -- W4, W5, W7, W8 -----------------------------------------------------------------------------


async def loop_chan(m: int) -> float:
    """W4: each iteration reads ``iter`` from the committed state and emits ``iter + 1``."""
    state: dict[str, int] = {}
    history: list[Any] = []
    send, receive = trio.open_memory_channel[Any](0)

    async def step() -> None:
        ack_send, ack_receive = trio.open_memory_channel[None](1)
        async with send:
            for _ in range(m):
                done = state.get("iter", 0) + 1
                await send.send((("step", {"iter": done}, done == m), ack_send))
                await ack_receive.receive()

    async def commit() -> None:
        async for event, ack in receive:
            history.append(event)
            state.update(event[1])
            ack.send_nowait(None)

    with Window() as window:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit)
            await step()
    check(len(history) == m and state["iter"] == m, "floor W4 read-your-writes")
    return window.seconds


async def loop_gen(m: int) -> float:
    state: dict[str, int] = {}
    history: list[Any] = []

    async def steps() -> AsyncIterator[tuple[str, dict[str, int], bool]]:
        for _ in range(m):
            await trio.lowlevel.checkpoint()
            done = state.get("iter", 0) + 1
            yield "step", {"iter": done}, done == m

    with Window() as window:
        async for event in steps():
            history.append(event)
            state.update(event[1])
    check(len(history) == m and state["iter"] == m, "floor W4 read-your-writes")
    return window.seconds


async def _model(history: list[Any], t: int) -> tuple[str, Any]:
    await trio.lowlevel.checkpoint()
    last = history[-1]
    step = last[2]["step"] if last[0] == "response" else 0
    return ("call", step) if step < t else ("text", f"done after {t} tool calls")


async def _tool(step: int) -> dict[str, int]:
    await trio.lowlevel.checkpoint()
    return {"step": step + 1}


async def _tool_loop(t: int, history: list[Any]) -> AsyncIterator[tuple[Any, ...]]:
    """W5's events: per step a model call and a tool call; then the final text."""
    while True:
        kind, value = await _model(history, t)
        if kind == "text":
            yield ("text", value)
            return
        yield ("call", "advance", {"step": value})
        yield ("response", "advance", await _tool(value))


async def tool_loop_chan(t: int) -> float:
    history: list[Any] = [("user", "go")]
    send, receive = trio.open_memory_channel[Any](0)

    async def agent() -> None:
        ack_send, ack_receive = trio.open_memory_channel[None](1)
        async with send:
            async for event in _tool_loop(t, history):
                await send.send((event, ack_send))
                await ack_receive.receive()

    async def commit() -> None:
        async for event, ack in receive:
            history.append(event)
            ack.send_nowait(None)

    with Window() as window:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit)
            nursery.start_soon(agent)
    check(len(history) == 2 * t + 2 and history[-1][0] == "text", "floor W5 events")
    return window.seconds


async def tool_loop_gen(t: int) -> float:
    history: list[Any] = [("user", "go")]
    with Window() as window:
        async for event in _tool_loop(t, history):
            await trio.lowlevel.checkpoint()
            history.append(event)
    check(len(history) == 2 * t + 2 and history[-1][0] == "text", "floor W5 events")
    return window.seconds


async def sessions_chan(s: int, each: int) -> float:
    """W7: S invocations at once, each with its own channel, committer and producer."""
    sessions = [([], {}) for _ in range(s)]

    async def invocation(history: list[Any], state: dict[str, int]) -> None:
        await chan_into(history, state, each)

    with Window() as window:
        async with trio.open_nursery() as nursery:
            for history, state in sessions:
                nursery.start_soon(invocation, history, state)
    check(sum(len(h) for h, _ in sessions) == s * each, "floor W7 count")
    return window.seconds


async def chan_into(history: list[Any], state: dict[str, int], count: int) -> None:
    send, receive = trio.open_memory_channel[Any](0)

    async def produce() -> None:
        ack_send, ack_receive = trio.open_memory_channel[None](1)
        async with send:
            for i in range(count):
                await send.send((("i", {"i": i}), ack_send))
                await ack_receive.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        async for event, ack in receive:
            history.append(event)
            state.update(event[1])
            ack.send_nowait(None)


async def sessions_gen(s: int, each: int) -> float:
    sessions: list[tuple[list[Any], dict[str, int]]] = [([], {}) for _ in range(s)]

    async def invocation(history: list[Any], state: dict[str, int]) -> None:
        async for event in _events([("i", each)]):
            history.append(event)
            state.update(event[1])

    with Window() as window:
        async with trio.open_nursery() as nursery:
            for history, state in sessions:
                nursery.start_soon(invocation, history, state)
    check(sum(len(h) for h, _ in sessions) == s * each, "floor W7 count")
    return window.seconds


class InjectedFailure(Exception):
    pass


async def cancellation(k: int, fails_after: int = 3, pause: float = 0.001) -> dict[str, float]:
    """W8: K children behind one committer; the failer raises after F events."""
    marks: dict[str, Any] = {"t_fail": None, "running": 0, "after": 0, "committed_after": 0}
    send, receive = trio.open_memory_channel[Any](0)

    async def child(name: str, fail: bool, send: trio.MemorySendChannel[Any]) -> None:
        ack_send, ack_receive = trio.open_memory_channel[None](1)
        marks["running"] += 1
        try:
            async with send:
                for i in range(100_000):
                    await trio.sleep(pause)
                    if fail and i == fails_after:
                        marks["t_fail"] = time.perf_counter()
                        raise InjectedFailure
                    if marks["t_fail"] is not None:
                        marks["after"] += 1
                    await send.send(((name, {name: i}), ack_send))
                    await ack_receive.receive()
        finally:
            marks["running"] -= 1

    async def commit() -> None:
        async for _, ack in receive:
            if marks["t_fail"] is not None:
                marks["committed_after"] += 1
            ack.send_nowait(None)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit)
            async with send:
                for i in range(k):
                    name = "failer" if i == 0 else f"s{i - 1}"
                    nursery.start_soon(child, name, i == 0, send.clone())
    except BaseExceptionGroup as group:
        t_return = time.perf_counter()
        check(_only_leaf(group), f"W8 floor: unexpected {group!r}")
    else:
        raise AssertionError("W8 floor: the failure was not observed")
    return {
        "latency_ms": (t_return - marks["t_fail"]) * 1e3,
        "produced_after": marks["after"],
        "delivered_after": marks["committed_after"],
        "unstopped_at_return": marks["running"],
    }


def _only_leaf(group: BaseExceptionGroup[Any]) -> bool:
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for sub in exc.exceptions:
                walk(sub)
        else:
            leaves.append(exc)

    walk(group)
    return len(leaves) == 1 and isinstance(leaves[0], InjectedFailure)


# -- W6: appends --------------------------------------------------------------------------------


def _w6_event(i: int) -> tuple[str, str, dict[str, int]]:
    return ("writer", f"event {i}", {"i": i})


def commit_appends(sizes: list[int]) -> list[Result]:
    """In-memory append: list append + dict update, timed in windows of 50."""
    history: list[Any] = []
    state: dict[str, int] = {}
    rows, started = [], time.perf_counter()
    for size in sizes:
        while len(history) < size:
            event = _w6_event(len(history))
            history.append(event)
            state.update(event[2])
        windows = []
        for _ in range(5):
            batch = [_w6_event(len(history) + i) for i in range(50)]
            with Window() as window:
                for event in batch:
                    history.append(event)
                    state.update(event[2])
            windows.append(window.seconds / 50 * 1e6)
        check(len(history) == size + 250, "floor W6 stored length")
        rows.append((size, windows, time.perf_counter() - started))
    return [_w6_result("memory", COMMIT, size, w, fill) for size, w, fill in rows]


def sqlite_appends(sizes: list[int]) -> list[Result]:
    """One persistent sqlite3 connection (default journal and sync settings); per append
    INSERT event + UPDATE session state + COMMIT, each run in a thread via ``trio.to_thread``."""

    async def run(path: Path) -> list[tuple[int, list[float], float]]:
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, state TEXT NOT NULL)")
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, session TEXT, body TEXT)")
        conn.execute("INSERT INTO sessions VALUES ('s', '{}')")
        conn.commit()
        limiter = trio.CapacityLimiter(1)
        state: dict[str, int] = {}

        def append(event: tuple[str, str, dict[str, int]]) -> None:
            state.update(event[2])
            conn.execute("INSERT INTO events (session, body) VALUES ('s', ?)", (json.dumps(event),))
            conn.execute("UPDATE sessions SET state = ? WHERE id = 's'", (json.dumps(state),))
            conn.commit()

        rows, done, started = [], 0, time.perf_counter()
        try:
            for size in sizes:
                while done < size:
                    await trio.to_thread.run_sync(append, _w6_event(done), limiter=limiter)
                    done += 1
                windows = []
                for _ in range(5):
                    batch = [_w6_event(done + i) for i in range(50)]
                    with Window() as window:
                        for event in batch:
                            await trio.to_thread.run_sync(append, event, limiter=limiter)
                    done += 50
                    windows.append(window.seconds / 50 * 1e6)
                (stored,) = conn.execute("SELECT count(*) FROM events").fetchone()
                check(stored == done, "floor W6 stored length")
                rows.append((size, windows, time.perf_counter() - started))
        finally:
            conn.close()
        return rows

    with tempfile.TemporaryDirectory() as directory:
        rows = trio.run(run, Path(directory) / "floor.db")
    return [_w6_result("sqlite", SQLITE, size, w, fill) for size, w, fill in rows]


def _w6_result(backend: str, impl: str, size: int, windows: list[float], fill: float) -> Result:
    metrics = {"us_per_append": summary(windows), "fill_s": summary([fill])}
    params = {"backend": backend, "n": size}
    return result("W6", f"{backend} n={size}", impl, "us_per_append", params, metrics)


# -- the plan ---------------------------------------------------------------------------------


def _floor_case(
    workload: str,
    case: str,
    impl: str,
    primary: str,
    params: dict[str, Any],
    run_once: Callable[[], Awaitable[float]],
    units: int,
    *,
    first: bool,
    min_seconds: float,
) -> Result:
    loop = asyncio_loop if impl.startswith("asyncio") else trio_loop
    sample = repeated(run_once, min_seconds, primary, units)
    return measure(workload, case, impl, primary, params, sample, loop=loop, warm_up=first)


def plan(quick: bool) -> Iterator[tuple[str, Callable[[], list[Result]]]]:
    """(workload, thunk) pairs for the floors; ``quick`` uses tiny sizes."""
    min_s = 0.02 if quick else 0.2

    def w1() -> list[Result]:
        out = []
        for index, n in enumerate((100,) if quick else (100, 1000, 5000)):
            runs: dict[str, Callable[[], Awaitable[float]]] = {
                CHAN: lambda n=n: chan([("i", n)], concurrent=False),
                CHAN0: lambda n=n: chan([("i", n)], concurrent=False, ack_buffer=0),
                LOWLEVEL: lambda n=n: lowlevel(n),
                GEN: lambda n=n: gen([("i", n)]),
                AQUEUE: lambda n=n: asyncio_queue(n),
                AGEN: lambda n=n: asyncio_gen(n),
            }
            for impl, run in runs.items():
                out.append(
                    _floor_case(
                        "W1",
                        f"n={n}",
                        impl,
                        "us_per_event",
                        {"n": n},
                        run,
                        n,
                        first=index == 0,
                        min_seconds=min_s,
                    )
                )
        return out

    def w2() -> list[Result]:
        out = []
        for index, (d, e) in enumerate([(10, 10)] if quick else [(10, 100), (100, 10)]):
            producers = [(f"a{i}", e) for i in range(d)]
            runs = {
                CHAN: lambda p=producers: chan(p, concurrent=False),
                GEN: lambda p=producers: gen(p),
            }
            for impl, run in runs.items():
                out.append(
                    _floor_case(
                        "W2",
                        f"d={d} e={e}",
                        impl,
                        "us_per_event",
                        {"d": d, "e": e},
                        run,
                        d * e,
                        first=index == 0,
                        min_seconds=min_s,
                    )
                )
        return out

    def w3() -> list[Result]:
        out = []
        for index, k in enumerate((10,) if quick else (10, 100, 1000)):
            producers = [(f"b{i}", 5) for i in range(k)]
            out.append(
                _floor_case(
                    "W3",
                    f"k={k} e=5",
                    CHAN,
                    "us_per_event",
                    {"k": k, "e": 5},
                    lambda p=producers: chan(p, concurrent=True),
                    k * 5,
                    first=index == 0,
                    min_seconds=min_s,
                )
            )
            out[-1]["metrics"]["peak_mib"] = summary(
                [_peak_of(lambda p=producers: chan(p, concurrent=True)) / 2**20]
            )
        return out

    def w4() -> list[Result]:
        out = []
        for index, m in enumerate((100,) if quick else (100, 1000)):
            runs = {CHAN: lambda m=m: loop_chan(m), GEN: lambda m=m: loop_gen(m)}
            for impl, run in runs.items():
                out.append(
                    _floor_case(
                        "W4",
                        f"m={m}",
                        impl,
                        "us_per_iteration",
                        {"m": m},
                        run,
                        m,
                        first=index == 0,
                        min_seconds=min_s,
                    )
                )
        return out

    def w5() -> list[Result]:
        out = []
        for index, t in enumerate((10,) if quick else (10, 50, 200)):
            runs = {CHAN: lambda t=t: tool_loop_chan(t), GEN: lambda t=t: tool_loop_gen(t)}
            for impl, run in runs.items():
                out.append(
                    _floor_case(
                        "W5",
                        f"t={t}",
                        impl,
                        "us_per_step",
                        {"t": t},
                        run,
                        t,
                        first=index == 0,
                        min_seconds=min_s,
                    )
                )
        return out

    def w6() -> list[Result]:
        if quick:
            return commit_appends([300]) + sqlite_appends([100])
        sizes = [500, 1000, 2000, 5000, 10000, 20000]
        return commit_appends(sizes) + sqlite_appends(sizes)

    def w7() -> list[Result]:
        out = []
        for index, s in enumerate((50,) if quick else (100, 1000)):
            runs = {CHAN: lambda s=s: sessions_chan(s, 5), GEN: lambda s=s: sessions_gen(s, 5)}
            for impl, run in runs.items():
                case = _floor_case(
                    "W7",
                    f"s={s} e=5",
                    impl,
                    "us_per_event",
                    {"s": s, "e": 5},
                    run,
                    s * 5,
                    first=index == 0,
                    min_seconds=min_s,
                )
                per_event = case["metrics"]["us_per_event"]
                case["metrics"]["invocations_per_s"] = summary(
                    [1e6 / (v * 5) for v in per_event["samples"]]
                )
                case["metrics"]["peak_mib"] = summary([_peak_of(run) / 2**20])
                out.append(case)
        return out

    def w8() -> list[Result]:
        out = []
        for index, k in enumerate((10,) if quick else (10, 100, 1000)):

            async def sample(k: int = k) -> dict[str, float]:
                return await cancellation(k)

            out.append(
                measure(
                    "W8",
                    f"k={k}",
                    CHAN,
                    "latency_ms",
                    {"k": k},
                    sample,
                    loop=trio_loop,
                    warm_up=index == 0,
                )
            )
        return out

    yield from [("W1", w1), ("W2", w2), ("W3", w3), ("W4", w4)]
    yield from [("W5", w5), ("W6", w6), ("W7", w7), ("W8", w8)]


def _peak_of(run_once: Callable[[], Awaitable[float]]) -> int:
    async def sample() -> dict[str, float]:
        return {"s": await run_once()}

    return traced_peak(sample, trio_loop)
