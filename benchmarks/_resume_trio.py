"""Resume latency on trio_agents: ``python -m benchmarks._resume_trio STORE N REPS``.

``STORE`` is ``memory``, ``sqlite:<path>`` or ``pg:<dsn>``. One session gets ``N`` events of
earlier invocations (a user question and the agent's answer each), then ``REPS`` times: a new
invocation pauses on a long-running call (untimed), and the answer resumes it with
``run(invocation_id=..., new_message=<answer>)``, timed from the call to the end of the run.
Warm: the service that wrote the session resumes. Cold (persistent stores): a fresh service and
runner resume an invocation another service paused. One more cold resume, untimed, counts the
events parsed from the store (every ``Event.from_json``), and a fresh service times a read of
the whole session against a read of its last 50 events. Prints one JSON object per row.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import trio

from benchmarks._harness import check, summary
from trio_agents import (
    App,
    Content,
    Event,
    LlmAgent,
    Part,
    ResumabilityConfig,
    Runner,
    SequentialAgent,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.sessions import (
    GetSessionConfig,
    InMemorySessionService,
    PostgresSessionService,
    SessionService,
    SqliteSessionService,
)
from trio_agents.testing import ScriptedModel
from trio_agents.tools import LongRunningFunctionTool

KEY: dict[str, Any] = {"app_name": "bench", "user_id": "u", "session_id": "s"}
RESUMED_EVENTS = 7
"""The answer, the clerk's text and end, the checkpoint for ``after``, its text and end, and the
sequence's end."""


def clerk(request: LlmRequest) -> LlmResponse | str:
    """Asks for approval, then reports the answer."""
    last = request.contents[-1]
    if any(p.function_response is not None for p in last.parts):
        return "approved"
    call = Part.from_function_call("approve", {"amount": 5})
    return LlmResponse(content=Content(role="model", parts=[call]))


def approve(amount: int) -> None:
    """Ask a human to approve a payment."""


def app() -> App:
    root = SequentialAgent(
        name="flow",
        sub_agents=[
            LlmAgent(
                name="clerk", model=ScriptedModel(clerk), tools=[LongRunningFunctionTool(approve)]
            ),
            LlmAgent(name="after", model=ScriptedModel(lambda request: "done")),
        ],
    )
    return App("bench", root, resumability_config=ResumabilityConfig(is_resumable=True))


def history(count: int) -> Iterator[Event]:
    """``count`` events of earlier invocations: a question and its answer each."""
    for i in range(count):
        invocation = f"e-old-{i // 2}"
        if i % 2 == 0:
            content = Content.from_text(f"question {i // 2}: what is the status of order {i}?")
            yield Event(invocation_id=invocation, author="user", content=content)
        else:
            text = f"Order {i - 1} shipped on day {i % 30}; it arrives within three days."
            content = Content(role="model", parts=[Part.from_text(text)])
            yield Event(invocation_id=invocation, author="clerk", content=content)


@contextlib.asynccontextmanager
async def open_store(store: str, *, durable: bool = True) -> AsyncIterator[SessionService]:
    """A service on ``store`` (``durable=False``: SQLite commits without fsync, to fill)."""
    kind, _, where = store.partition(":")
    service: SqliteSessionService | PostgresSessionService
    if kind == "sqlite":
        service = SqliteSessionService(where, durable=durable)
    else:
        service = PostgresSessionService(where)
    async with service:
        yield service


async def pause(runner: Runner) -> tuple[str, Content]:
    """A new invocation that pauses; its id and the answer to its call."""
    async with runner.run(user_id="u", session_id="s", new_message="go") as stream:
        async for _ in stream:
            pass
    check(stream.paused, "the invocation paused")
    (call,) = stream.waiting_for
    answer = Part.from_function_response("approve", {"approved": True}, id=call.id)
    return stream.invocation_id, Content(role="user", parts=[answer])


async def resume(runner: Runner, invocation_id: str, answer: Content) -> float:
    """The timed resume, checked: seconds from the call to the end of the run."""
    started = time.perf_counter()
    async with runner.run(
        user_id="u", session_id="s", invocation_id=invocation_id, new_message=answer
    ) as stream:
        events = [e async for e in stream]
    seconds = time.perf_counter() - started
    check(not stream.paused, "the resumed invocation finished")
    check(len(events) == RESUMED_EVENTS - 1, f"resumed events: {len(events)}")
    check({e.invocation_id for e in events} == {invocation_id}, "one invocation")
    check(events[-1].author == "flow" and bool(events[-1].actions.end_of_agent), "flow ended")
    return seconds


@contextlib.contextmanager
def counting_parses() -> Iterator[list[int]]:
    """Counts ``Event.from_json`` calls (events parsed from a store) inside the block."""
    count = [0]
    original = Event.__dict__["from_json"]

    def from_json(cls: type[Event], text: str | bytes) -> Event:
        count[0] += 1
        parsed: Event = original.__func__(cls, text)
        return parsed

    Event.from_json = classmethod(from_json)  # type: ignore[method-assign,assignment]
    try:
        yield count
    finally:
        Event.from_json = original  # type: ignore[method-assign]


async def _timed_read(service: SessionService, config: GetSessionConfig | None) -> float:
    started = time.perf_counter()
    session = await service.get_session(**KEY, config=config)
    seconds = time.perf_counter() - started
    check(session is not None and len(session.events) > 0, "the session was read")
    return seconds


def _row(store: str, mode: str, n: int, times: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "impl": "trio_agents",
        "store": {"pg": "postgresql"}.get(kind := store.partition(":")[0], kind),
        "mode": mode,
        "history": n,
        "resume_ms": summary([t * 1000 for t in times]),
        **extra,
    }


async def _fill(service: SessionService, n: int) -> None:
    session = await service.create_session(**KEY)
    for event in history(n):
        await service.append_event(session, event)


async def measure(store: str, n: int, reps: int, emit: Callable[[dict[str, Any]], None]) -> None:
    if store == "memory":
        memory = InMemorySessionService()
        await _fill(memory, n)
        runner = Runner(app=app(), session_service=memory)
        await resume(runner, *await pause(runner))  # warm-up
        emit(
            _row(
                store, "warm", n, [await resume(runner, *await pause(runner)) for _ in range(reps)]
            )
        )
        return
    async with open_store(store, durable=False) as writer:
        await _fill(writer, n)
    async with open_store(store) as service:
        runner = Runner(app=app(), session_service=service)
        await resume(runner, *await pause(runner))  # warm-up: code paths and the event cache
        warm = [await resume(runner, *await pause(runner)) for _ in range(reps)]
        emit(_row(store, "warm", n, warm))
        cold = []
        for _ in range(reps + 1):
            paused = await pause(runner)
            async with open_store(store) as fresh:
                cold.append(await resume(Runner(app=app(), session_service=fresh), *paused))
        paused = await pause(runner)
        async with open_store(store) as fresh:
            with counting_parses() as parsed:
                await resume(Runner(app=app(), session_service=fresh), *paused)
        reads: dict[str, list[float]] = {"full": [], "last50": []}
        for _ in range(reps):
            for name, config in (
                ("full", None),
                ("last50", GetSessionConfig(num_recent_events=50)),
            ):
                async with open_store(store) as fresh:
                    reads[name].append(await _timed_read(fresh, config) * 1000)
        session = await service.get_session(**KEY)
        assert session is not None
        emit(
            _row(
                store,
                "cold",
                n,
                cold[1:],  # the first cold resume also warms the fresh service's code paths
                parsed_events=parsed[0],
                stored_events=len(session.events),
                read_full_ms=summary(reads["full"]),
                read_last50_ms=summary(reads["last50"]),
            )
        )


def main(argv: list[str]) -> None:
    store, n, reps = argv[0], int(argv[1]), int(argv[2])

    def emit(row: dict[str, Any]) -> None:
        print(json.dumps(row), flush=True)

    trio.run(measure, store, n, reps, emit)


if __name__ == "__main__":
    main(sys.argv[1:])
