"""Resume at any point: a resumed invocation commits what an uninterrupted one would.

An application (an LLM agent calling a tool, a parallel agent whose branches call a tool and a
long-running approval, a loop that a judge ends by escalating) runs once without interruption,
answered when it pauses. Then its stored history is cut at a random point, as a process that
died there would leave it, and copied into a fresh session; ``run(invocation_id=...)`` resumes
it (answering the pause when it comes) until the invocation finishes. The two histories are
equal, per branch, modulo event ids and timestamps and the runtime's closing responses; the
user's messages are stored once; no tool whose result was committed runs again. Hypothesis
draws the cut and Trio's scheduling.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from trio_agents import (
    App,
    Content,
    Event,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    Part,
    ResumabilityConfig,
    Runner,
    SequentialAgent,
)
from trio_agents._aftermath import is_closing_response
from trio_agents._serde import unstructure
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.sessions import InMemorySessionService, SessionService, SqliteSessionService
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool, ToolContext, exit_loop

APP = "props"


class Tools:
    """The app's tools, recording every execution by call id."""

    def __init__(self) -> None:
        self.executed: list[str] = []

    def lookup(self, q: str, tool_context: ToolContext) -> dict[str, str]:
        """Look something up."""
        self.executed.append(str(tool_context.function_call_id))
        return {"found": q}

    def approve(self, amount: int, tool_context: ToolContext) -> None:
        """Ask a human to approve."""
        self.executed.append(str(tool_context.function_call_id))


def scripted(name: str, turns: list[Any]) -> ScriptedModel:
    """A model whose answer depends only on how many turns its agent has had (the request)."""

    def handler(request: LlmRequest) -> Any:
        n = sum(1 for c in request.contents if c.role == "model")
        turn = turns[min(n, len(turns) - 1)]
        if isinstance(turn, tuple):
            tool, args = turn
            part = Part.from_function_call(tool, args, id=f"{name}-{n}")
            return LlmResponse(content=Content(role="model", parts=[part]))
        return f"{name}: {turn}"

    return ScriptedModel(handler)


def build(tools: Tools) -> App:
    lookup, approve = FunctionTool(tools.lookup), LongRunningFunctionTool(tools.approve)
    a = LlmAgent(name="a", model=scripted("a", [("lookup", {"q": "x"}), "found x"]), tools=[lookup])
    b = LlmAgent(
        name="b",
        model=scripted("b", [("lookup", {"q": "y"}), ("approve", {"amount": 3}), "approved"]),
        tools=[lookup, approve],
    )
    c = LlmAgent(name="c", model=scripted("c", ["c speaks", "c again"]))
    d = LlmAgent(name="d", model=scripted("d", ["d one", "d two", "d three"]))
    judge = LlmAgent(
        name="judge", model=scripted("judge", ["again", ("exit_loop", {})]), tools=[exit_loop]
    )
    root = SequentialAgent(
        name="root",
        sub_agents=[
            a,
            ParallelAgent(name="par", sub_agents=[b, c]),
            LoopAgent(name="loop", sub_agents=[d, judge]),  # until the judge escalates
        ],
    )
    return App(APP, root, resumability_config=ResumabilityConfig(is_resumable=True))


def approval(call_id: str) -> Content:
    return Content(
        role="user", parts=[Part.from_function_response("approve", {"ok": True}, id=call_id)]
    )


async def drive(runner: Runner, session_id: str, **first: Any) -> None:
    """Run (or resume) until the invocation finishes, approving each pause."""
    kwargs = {"new_message": "go", **first}
    while True:
        async with runner.run(user_id="u", session_id=session_id, **kwargs) as stream:
            async for _ in stream:
                pass
        if not stream.paused:
            return
        (call,) = stream.waiting_for
        assert call.id is not None
        kwargs = {"new_message": approval(call.id), "invocation_id": stream.invocation_id}


async def history(service: SessionService, session_id: str) -> list[Event]:
    session = await service.get_session(app_name=APP, user_id="u", session_id=session_id)
    assert session is not None
    return list(session.events)


def canonical(events: list[Event]) -> dict[str | None, list[dict[str, Any]]]:
    """Per branch, each event without its id, timestamp and invocation id; the runtime's
    closing responses dropped."""
    out: dict[str | None, list[dict[str, Any]]] = {}
    for event in events:
        responses = event.get_function_responses()
        if responses and all(is_closing_response(r) for r in responses):
            continue
        data = unstructure(event)
        for key in ("id", "timestamp", "invocationId"):
            data.pop(key, None)
        out.setdefault(event.branch, []).append(data)
    return out


def executed_after(events: list[Event], cut: int) -> list[str]:
    """The calls that run in a run resumed at ``cut``: those whose result was committed after
    it, and the long-running ones (which answer nothing at once) whose call was committed after
    it."""
    ran = []
    for event in events[cut:]:
        if event.author == "user":
            continue
        ran += [
            r.id or ""
            for r in event.get_function_responses()
            if r.name in ("lookup", "approve") and not is_closing_response(r)
        ]
        ran += sorted(event.long_running_tool_ids or ())
    return sorted(ran)


async def check_resume_at(service: SessionService, cut_at: float) -> None:
    tools = Tools()
    runner = Runner(app=build(tools), session_service=service)
    whole = await service.create_session(app_name=APP, user_id="u")
    await drive(runner, whole.id)
    full = await history(service, whole.id)
    assert sorted(tools.executed) == executed_after(full, 0)
    cut = 1 + int(cut_at * (len(full) - 2))  # at least the opening message, never all of it
    copy = await service.create_session(app_name=APP, user_id="u")
    for event in full[:cut]:
        await service.append_event(copy, event)
    tools.executed.clear()
    resumed_runner = Runner(app=build(tools), session_service=service)
    await drive(resumed_runner, copy.id, new_message=None, invocation_id=full[0].invocation_id)
    resumed = await history(service, copy.id)
    assert canonical(resumed) == canonical(full)
    assert [e.text for e in resumed if e.author == "user" and e.text] == ["go"]
    assert sorted(tools.executed) == executed_after(full, cut)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut_at=st.floats(0, 1), _seed=st.random_module())
async def test_in_memory_resume_at_any_point_equals_the_uninterrupted_run(
    cut_at: float, _seed: Any
) -> None:
    await check_resume_at(InMemorySessionService(), cut_at)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut_at=st.floats(0, 1), _seed=st.random_module())
async def test_sqlite_resume_at_any_point_equals_the_uninterrupted_run(
    cut_at: float, _seed: Any
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with SqliteSessionService(str(Path(tmp) / "s.db")) as service:
            await check_resume_at(service, cut_at)
