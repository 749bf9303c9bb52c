"""Resume latency on google-adk 2.13: ``python -m benchmarks._resume_adk STORE N REPS``.

The same measurement as :mod:`benchmarks._resume_trio`, with google-adk's own API: a resumable
``App`` (a sequence of an ``LlmAgent`` that calls a long-running ``approve`` tool and a second
``LlmAgent``), ``N`` events of earlier invocations, then ``REPS`` times a new invocation that
pauses (untimed) and ``run_async(invocation_id=..., new_message=<answer>)``, timed to the end.
``STORE`` is ``memory`` (``InMemorySessionService``) or ``sqlite:<path>`` (google-adk's
``SqliteSessionService``; cold: a fresh service instance resumes). Imports only the standard
library, google-adk and :mod:`benchmarks._harness`. Prints one JSON object per row.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import time
import warnings
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

from benchmarks._harness import check, summary

warnings.filterwarnings("ignore")  # experimental-feature warnings of resumability
logging.disable(logging.WARNING)

from google.adk.agents import LlmAgent, SequentialAgent  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.apps import App, ResumabilityConfig  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.events import Event  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.models.base_llm import BaseLlm  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.models.llm_request import LlmRequest  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.models.llm_response import LlmResponse  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.runners import Runner  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.sessions import InMemorySessionService  # ruff: ignore[module-import-not-at-top-of-file]
from google.adk.tools import LongRunningFunctionTool  # ruff: ignore[module-import-not-at-top-of-file]
from google.genai import types  # ruff: ignore[module-import-not-at-top-of-file]

RESUMED_EVENTS = 6
"""The clerk's text and end, the checkpoint for ``after``, its text and end, the sequence's end
(google-adk yields no event for the stored answer)."""


def _text(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


class Clerk(BaseLlm):
    """Asks for approval, then reports the answer."""

    model: str = "clerk"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        if any(p.function_response is not None for p in last.parts or ()):
            yield _text("approved")
            return
        call = types.FunctionCall(name="approve", args={"amount": 5})
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


class Done(BaseLlm):
    model: str = "done"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield _text("done")


def approve(amount: int) -> None:
    """Ask a human to approve a payment."""


def app() -> App:
    clerk = LlmAgent(name="clerk", model=Clerk(), tools=[LongRunningFunctionTool(approve)])
    root = SequentialAgent(name="flow", sub_agents=[clerk, LlmAgent(name="after", model=Done())])
    return App(
        name="bench", root_agent=root, resumability_config=ResumabilityConfig(is_resumable=True)
    )


def history(count: int) -> Iterator[Event]:
    """``count`` events of earlier invocations: a question and its answer each."""
    for i in range(count):
        invocation = f"e-old-{i // 2}"
        if i % 2 == 0:
            text = f"question {i // 2}: what is the status of order {i}?"
            content = types.Content(role="user", parts=[types.Part(text=text)])
            yield Event(invocation_id=invocation, author="user", content=content)
        else:
            text = f"Order {i - 1} shipped on day {i % 30}; it arrives within three days."
            content = types.Content(role="model", parts=[types.Part(text=text)])
            yield Event(invocation_id=invocation, author="clerk", content=content)


GO = types.Content(role="user", parts=[types.Part(text="go")])


async def pause(runner: Runner, session_id: str) -> tuple[str, types.Content]:
    """A new invocation that pauses; its id and the answer to its call."""
    events = [e async for e in runner.run_async(user_id="u", session_id=session_id, new_message=GO)]
    calls = [c for e in events for c in e.get_function_calls()]
    check(len(calls) == 1 and bool(events[-1].long_running_tool_ids), "the invocation paused")
    response = types.FunctionResponse(name="approve", id=calls[0].id, response={"approved": True})
    answer = types.Content(role="user", parts=[types.Part(function_response=response)])
    return events[0].invocation_id, answer


async def resume(
    runner: Runner, session_id: str, invocation_id: str, answer: types.Content
) -> float:
    """The timed resume, checked: seconds from the call to the end of the run."""
    started = time.perf_counter()
    events = [
        e
        async for e in runner.run_async(
            user_id="u", session_id=session_id, invocation_id=invocation_id, new_message=answer
        )
    ]
    seconds = time.perf_counter() - started
    check(len(events) == RESUMED_EVENTS, f"resumed events: {len(events)}")
    check({e.invocation_id for e in events} == {invocation_id}, "one invocation")
    check(events[-1].author == "flow" and bool(events[-1].actions.end_of_agent), "flow ended")
    return seconds


def _row(store: str, mode: str, n: int, times: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "impl": "google-adk",
        "store": store.partition(":")[0],
        "mode": mode,
        "history": n,
        "resume_ms": summary([t * 1000 for t in times]),
        **extra,
    }


def _service(store: str) -> Any:
    if store == "memory":
        return InMemorySessionService()
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    return SqliteSessionService(store.partition(":")[2])


async def _close(service: Any) -> None:
    close = getattr(service, "close", None)
    if close is not None:
        await close()


async def _fill(store: str, n: int) -> Any:
    """The service to measure, its session holding ``n`` events of history. On SQLite the history
    is written to a file in ``/dev/shm`` (google-adk fsyncs every append) and copied to the
    store's path before the service opens it."""
    path = store.partition(":")[2]
    scratch = Path("/dev/shm") / f"adk-resume-{os.getpid()}.db"
    writing = store if store == "memory" or not scratch.parent.is_dir() else f"sqlite:{scratch}"
    service = _service(writing)
    session = await service.create_session(app_name="bench", user_id="u", session_id="s")
    for event in history(n):
        await service.append_event(session, event)
    if writing == store:
        return service
    await _close(service)
    shutil.copyfile(scratch, path)
    scratch.unlink()
    return _service(store)


async def measure(store: str, n: int, reps: int) -> list[dict[str, Any]]:
    service = await _fill(store, n)
    runner = Runner(app=app(), session_service=service)
    await resume(runner, "s", *await pause(runner, "s"))  # warm-up
    warm = [await resume(runner, "s", *await pause(runner, "s")) for _ in range(reps)]
    rows = [_row(store, "warm", n, warm)]
    if store != "memory":
        cold = []
        for _ in range(reps + 1):
            paused = await pause(runner, "s")
            fresh = _service(store)
            try:
                cold.append(await resume(Runner(app=app(), session_service=fresh), "s", *paused))
            finally:
                await _close(fresh)
        rows.append(_row(store, "cold", n, cold[1:]))
    await _close(service)
    return rows


def main(argv: list[str]) -> None:
    for row in asyncio.run(measure(argv[0], int(argv[1]), int(argv[2]))):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
