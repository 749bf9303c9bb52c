"""Pausing an invocation and resuming it: checkpoints, workflow agents, answers, bad input.

A resumable app's invocation pauses where a long-running call or a confirmation request makes
it wait for the client; answering resumes the same invocation where it stands, through every
workflow agent. ``run(invocation_id=...)`` continues an invocation that paused, failed or was
cancelled; nothing that committed runs twice.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.agents.llm_helpers import fc, kinds
from trio_agents import (
    App,
    ConfigurationError,
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    Part,
    ResumabilityConfig,
    ResumeError,
    Runner,
    RunStream,
    SequentialAgent,
)
from trio_agents.agents import BaseAgent
from trio_agents.models import LlmResponse
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool


class Approvals:
    """A long-running ``approve`` tool that records its runs (it answers nothing at once)."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.tool = LongRunningFunctionTool(self.approve)

    def approve(self, amount: int) -> None:
        """Ask a human to approve a payment."""
        self.runs.append(amount)


def llm(name: str, script: list[Any], *tools: Any) -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedModel(script), tools=list(tools))


def answer(call_id: str | None, response: dict[str, Any], name: str = "approve") -> Content:
    return Content(role="user", parts=[Part.from_function_response(name, response, id=call_id)])


class Session:
    """One session of a resumable app, driven run by run."""

    def __init__(self, runner: Runner, session_id: str) -> None:
        self.runner = runner
        self.session_id = session_id
        self.last: RunStream | None = None

    @classmethod
    async def start(cls, root: BaseAgent, *, resumable: bool = True) -> Session:
        app = App("shop", root, resumability_config=ResumabilityConfig(is_resumable=resumable))
        runner = InMemoryRunner(app=app)
        session = await runner.session_service.create_session(app_name="shop", user_id="u")
        return cls(runner, session.id)

    async def send(
        self, message: Content | str | None = "go", *, invocation_id: str | None = None
    ) -> list[Event]:
        got: list[Event] = []
        async with self.runner.run(
            user_id="u",
            session_id=self.session_id,
            new_message=message,
            invocation_id=invocation_id,
        ) as stream:
            got.extend([e async for e in stream])
        self.last = stream
        return got

    def paused(self) -> bool:
        assert self.last is not None
        return self.last.paused

    @property
    def waiting(self) -> list[str]:
        assert self.last is not None
        return [c.id or "" for c in self.last.waiting_for]

    async def events(self) -> list[Event]:
        session = await self.runner.session_service.get_session(
            app_name="shop", user_id="u", session_id=self.session_id
        )
        assert session is not None
        return list(session.events)


def marks(events: list[Event]) -> list[str]:
    """Each event as ``author:kind``, checkpoints as ``author@sub`` / ``author!end``."""
    out = []
    for event, kind in zip(events, kinds(events), strict=True):
        state, end = event.actions.agent_state, event.actions.end_of_agent
        if state is not None:
            out.append(f"{event.author}@{state.get('current_sub_agent', '')}")
        elif end:
            out.append(f"{event.author}!end")
        else:
            out.append(f"{event.author}:{kind}")
    return out


# -- pause and resume through the workflow agents --------------------------------------------------


async def test_a_sequence_pauses_at_the_call_and_the_answer_runs_the_rest() -> None:
    approvals = Approvals()
    a = llm("a", [fc("approve", {"amount": 5}), "a done"], approvals.tool)
    b = llm("b", ["b done"])
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, b]))
    first = await chat.send()
    assert marks(first) == ["seq@a", "a:FC:approve"]
    assert chat.paused()
    (call_id,) = chat.waiting
    second = await chat.send(answer(call_id, {"ok": True}))
    assert marks(second) == ["a:T:a done", "a!end", "seq@b", "b:T:b done", "b!end", "seq!end"]
    assert {e.invocation_id for e in first + second} == {first[0].invocation_id}
    assert not chat.paused() and chat.waiting == []
    assert approvals.runs == [5]
    stored = [e for e in await chat.events() if e.author != "user"]
    assert stored == first + second


async def test_resuming_with_the_invocation_id_is_the_same() -> None:
    approvals = Approvals()
    a = llm("a", [fc("approve", {"amount": 5}), "a done"], approvals.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, llm("b", ["b"])]))
    first = await chat.send()
    (call_id,) = chat.waiting
    second = await chat.send(answer(call_id, {"ok": 1}), invocation_id=first[0].invocation_id)
    assert marks(second)[-1] == "seq!end"
    users = [e for e in await chat.events() if e.author == "user"]
    assert len(users) == 2  # the opening message and the answer, nothing twice


async def test_a_loop_continues_its_pass_and_pauses_twice_in_one_invocation() -> None:
    approvals = Approvals()
    script = [fc("approve", {"amount": 1}), "a1", fc("approve", {"amount": 2}), "a2"]
    a = llm("a", script, approvals.tool)
    b = llm("b", ["b1", "b2"])
    chat = await Session.start(LoopAgent(name="loop", sub_agents=[a, b], max_iterations=2))
    first = await chat.send()
    assert marks(first) == ["loop@a", "a:FC:approve"]
    (one,) = chat.waiting
    second = await chat.send(answer(one, {"ok": True}))
    assert marks(second) == [
        "a:T:a1",
        "a!end",
        "loop@b",
        "b:T:b1",
        "b!end",
        "loop@a",
        "a:FC:approve",
    ]
    assert [dict(e.actions.agent_state or {}) for e in second if e.author == "loop"] == [
        {"current_sub_agent": "b", "times_looped": 0},
        {"current_sub_agent": "a", "times_looped": 1},
    ]
    (two,) = chat.waiting
    third = await chat.send(answer(two, {"ok": True}))
    assert marks(third) == ["a:T:a2", "a!end", "loop@b", "b:T:b2", "b!end", "loop!end"]
    assert approvals.runs == [1, 2]


async def test_a_parallel_agent_finishes_when_every_paused_branch_is_answered() -> None:
    approvals = Approvals()
    a = llm("a", [fc("approve", {"amount": 1}), "a done"], approvals.tool)
    b = llm("b", [fc("approve", {"amount": 2}), "b done"], approvals.tool)
    c = llm("c", ["c done"])
    par = ParallelAgent(name="par", sub_agents=[a, b, c])
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[par, llm("z", ["z", "z"])]))
    first = await chat.send()
    assert sorted(marks(first)) == sorted(
        ["seq@par", "par@", "a:FC:approve", "b:FC:approve", "c:T:c done", "c!end"]
    )
    calls = {e.author: e.get_function_calls()[0].id or "" for e in first if e.get_function_calls()}
    assert sorted(chat.waiting) == sorted(calls.values())
    only_b = await chat.send(answer(calls["b"], {"ok": True}))
    assert marks(only_b) == ["b:T:b done", "b!end"]  # a still waits: par and seq stay paused
    assert chat.waiting == [calls["a"]]
    assert [e.branch for e in only_b] == ["par.b", "par.b"]
    rest = await chat.send(answer(calls["a"], {"ok": True}))
    assert marks(rest) == ["a:T:a done", "a!end", "par!end", "seq@z", "z:T:z", "z!end", "seq!end"]
    assert approvals.runs in ([1, 2], [2, 1])


async def test_a_pause_deep_inside_nesting_resumes_at_the_right_place() -> None:
    """A pause inside a loop inside a sequence inside a parallel branch."""
    approvals = Approvals()
    deep = llm("deep", [fc("approve", {"amount": 3}), "deep done", "deep again"], approvals.tool)
    loop = LoopAgent(name="loop", sub_agents=[deep, llm("tail", ["t1", "t2"])], max_iterations=2)
    inner = SequentialAgent(name="inner", sub_agents=[llm("head", ["h"]), loop])
    par = ParallelAgent(name="par", sub_agents=[inner, llm("side", ["s"])])
    chat = await Session.start(SequentialAgent(name="top", sub_agents=[par, llm("last", ["L"])]))
    first = await chat.send()
    assert "deep:FC:approve" in marks(first) and "last:T:L" not in marks(first)
    (call_id,) = chat.waiting
    second = await chat.send(answer(call_id, {"ok": True}))
    assert marks(second) == [
        "deep:T:deep done",
        "deep!end",
        "loop@tail",
        "tail:T:t1",
        "tail!end",
        "loop@deep",
        "deep:T:deep again",
        "deep!end",
        "loop@tail",
        "tail:T:t2",
        "tail!end",
        "loop!end",
        "inner!end",
        "par!end",
        "top@last",
        "last:T:L",
        "last!end",
        "top!end",
    ]
    assert {e.branch for e in second if e.author in ("deep", "tail", "loop", "inner")} == {
        "par.inner"
    }


async def test_without_resumability_no_checkpoints_and_the_sequence_stops() -> None:
    approvals = Approvals()
    a = llm("a", [fc("approve", {"amount": 5}), "a done"], approvals.tool)
    b = llm("b", ["b done"])
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, b]), resumable=False)
    first = await chat.send()
    assert marks(first) == ["a:FC:approve"]
    assert chat.paused()
    second = await chat.send(answer(chat.waiting[0], {"ok": True}))
    assert marks(second) == ["a:T:a done"]  # only the caller: the sequence does not go on
    with pytest.raises(ResumeError, match="not resumable"):
        await chat.send(None, invocation_id=first[0].invocation_id)


# -- resume after a failure or a cancellation -----------------------------------------------------


class Flaky:
    """A tool that fails the first ``failures`` times, then answers."""

    def __init__(self, failures: int = 1) -> None:
        self.failures = failures
        self.runs = 0
        self.tool = FunctionTool(self.lookup)

    def lookup(self, q: str) -> dict[str, str]:
        """Look something up."""
        self.runs += 1
        if self.runs <= self.failures:
            raise RuntimeError("backend down")
        return {"found": q}


async def test_a_failed_invocation_resumes_without_redoing_what_committed() -> None:
    flaky = Flaky()
    first_agent = llm("first", ["first done"])
    second_agent = llm("second", [fc("lookup", {"q": "x"}), "second done"], flaky.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[first_agent, second_agent]))
    with pytest.raises(RuntimeError, match="backend down"):
        await chat.send()
    stored = await chat.events()
    invocation = stored[0].invocation_id
    resumed = await chat.send(None, invocation_id=invocation)
    assert marks(resumed) == [
        "second:FR:lookup",
        "second:T:second done",
        "second!end",
        "seq!end",
    ]
    assert flaky.runs == 2  # the failed run, then once more: the closing response is no result
    assert len(first_agent.model.requests) == 1  # type: ignore[union-attr]
    events = await chat.events()
    assert [e.author for e in events].count("user") == 1
    # The model saw the call followed by its real result, not the runtime's closing response.
    last_request = second_agent.model.requests[-1]  # type: ignore[union-attr]
    responses = [
        dict(p.function_response.response)
        for c in last_request.contents
        for p in c.parts
        if p.function_response is not None
    ]
    assert responses == [{"found": "x"}]
    with pytest.raises(ResumeError, match="already finished"):
        await chat.send(None, invocation_id=invocation)


async def test_an_agent_whose_final_answer_committed_is_not_called_again() -> None:
    calls = {"n": 0}

    def boom(callback_context: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("after-callback failed")

    answered = llm("answered", ["the answer"])
    answered.after_agent_callback = boom
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[answered, llm("b", ["b"])]))
    with pytest.raises(RuntimeError):
        await chat.send()
    invocation = (await chat.events())[0].invocation_id
    resumed = await chat.send(None, invocation_id=invocation)
    assert marks(resumed) == ["seq@b", "b:T:b", "b!end", "seq!end"]
    assert len(answered.model.requests) == 1  # type: ignore[union-attr]


# -- bad input: typed errors, nothing stored ------------------------------------------------------


async def test_bad_resume_requests_are_refused_before_anything_is_stored() -> None:
    approvals = Approvals()
    a = llm("a", [fc("approve", {"amount": 5}), "a done"], approvals.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, llm("b", ["b"])]))
    first = await chat.send()
    invocation = first[0].invocation_id
    before = await chat.events()
    with pytest.raises(ResumeError, match="'nope' is not in this session") as info:
        await chat.send(None, invocation_id="nope")
    assert info.value.invocation_id == "nope" and isinstance(info.value, ValueError)
    with pytest.raises(ConfigurationError, match="zzz"):
        await chat.send(answer("zzz", {"ok": True}), invocation_id=invocation)
    user_call = next(e for e in before if e.author == "a").get_function_calls()[0].id
    with pytest.raises(ResumeError, match="another message"):
        await chat.send("something else", invocation_id=invocation)
    with pytest.raises(ConfigurationError, match="invocation_id must be a str"):
        await chat.send(None, invocation_id=123)  # type: ignore[arg-type]
    assert await chat.events() == before
    await chat.send(answer(user_call, {"ok": True}), invocation_id=invocation)
    with pytest.raises(ResumeError, match="already finished") as finished:
        await chat.send(None, invocation_id=invocation)
    assert finished.value.invocation_id == invocation


async def test_an_answer_to_a_call_that_is_not_waiting_is_refused() -> None:
    lookups: list[str] = []

    def lookup(q: str) -> str:
        """Look up."""
        lookups.append(q)
        return q

    approvals = Approvals()
    script = [fc("lookup", {"q": "x"}), fc("approve", {"amount": 1}), "done"]
    a = llm("a", script, lookup, approvals.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a]))
    first = await chat.send()
    lookup_id = first[1].get_function_calls()[0].id
    before = await chat.events()
    with pytest.raises(ResumeError, match="answers no open call") as info:
        await chat.send(answer(lookup_id, {"x": 1}, "lookup"), invocation_id=first[0].invocation_id)
    assert info.value.call_id == lookup_id
    assert await chat.events() == before


async def test_resending_the_opening_message_does_not_store_it_twice() -> None:
    flaky = Flaky()
    a = llm("a", [fc("lookup", {"q": "x"}), "a done"], flaky.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a]))
    with pytest.raises(RuntimeError):
        await chat.send("look x up")
    invocation = (await chat.events())[0].invocation_id
    await chat.send("look x up", invocation_id=invocation)
    users = [e for e in await chat.events() if e.author == "user"]
    assert [e.text for e in users] == ["look x up"]


# -- an agent tool whose agent pauses ----------------------------------------------------------


@pytest.mark.parametrize("resumable", [True, False])
async def test_an_agent_tool_pauses_the_parent_and_the_answer_resumes_the_child(
    resumable: bool,
) -> None:
    from trio_agents.tools import AgentTool

    approvals = Approvals()
    clerk = llm("clerk", [fc("approve", {"amount": 9}), "clerk paid 9"], approvals.tool)
    boss = llm("boss", [fc("clerk", {"request": "pay 9"}), "boss: done"], AgentTool(clerk))
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[boss]), resumable=resumable)
    first = await chat.send("pay 9")
    assert chat.paused()
    (waiting,) = chat.last.waiting_for if chat.last else ()
    assert waiting.name == "approve" and dict(waiting.args) == {"amount": 9}
    assert approvals.runs == [9]
    assert [e.author for e in first if e.get_function_calls()] == ["boss", "boss"]
    second = await chat.send(answer(waiting.id, {"approved": True}))
    assert approvals.runs == [9]  # the child resumed: its tool did not run again
    texts = [e.text for e in second if e.text]
    assert texts[-1] == "boss: done"
    (reply,) = [e for e in second if e.get_function_responses()]
    assert [dict(r.response) for r in reply.get_function_responses()] == [
        {"result": "clerk paid 9"}
    ]
    # The boss's model saw its call and the clerk's answer, none of the clerk's own calls.
    seen = [
        (p.function_call.name if p.function_call else None)
        or (p.function_response and dict(p.function_response.response))
        or p.text
        for c in boss.model.requests[-1].contents  # type: ignore[union-attr]
        for p in c.parts
    ]
    assert seen == ["pay 9", "clerk", {"result": "clerk paid 9"}]
    assert not chat.paused()


# -- confirmations and several calls in one turn ----------------------------------------------


async def test_a_confirmation_inside_a_resumable_pipeline_resumes_it() -> None:
    refunds: list[int] = []

    def refund(amount: int) -> dict[str, int]:
        """Refund."""
        refunds.append(amount)
        return {"refunded": amount}

    tool = FunctionTool(refund, require_confirmation=True)
    clerk = llm("clerk", [fc("refund", {"amount": 4}), "refunded 4", "not refunded"], tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[clerk, llm("z", ["z"])]))
    first = await chat.send()
    assert chat.paused() and refunds == []
    (request,) = chat.last.waiting_for if chat.last else ()
    assert request.name == "adk_request_confirmation"
    before = await chat.events()
    with pytest.raises(ConfigurationError, match=str(request.id)):
        await chat.send(
            answer(request.id, {"confirmed": "yes"}, request.name),
            invocation_id=first[0].invocation_id,
        )
    assert await chat.events() == before
    second = await chat.send(answer(request.id, {"confirmed": True}, request.name))
    assert refunds == [4]
    assert marks(second) == [
        "clerk:FR:refund",
        "clerk:T:refunded 4",
        "clerk!end",
        "seq@z",
        "z:T:z",
        "z!end",
        "seq!end",
    ]


async def test_two_long_running_calls_in_one_turn_are_answered_together() -> None:
    approvals = Approvals()
    two = LlmResponse(
        content=Content(
            role="model",
            parts=[
                Part.from_function_call("approve", {"amount": 1}),
                Part.from_function_call("approve", {"amount": 2}),
            ],
        )
    )
    a = llm("a", [two, "both approved"], approvals.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, llm("b", ["b"])]))
    await chat.send()
    one, other = chat.waiting
    both = Content(
        role="user",
        parts=[
            Part.from_function_response("approve", {"ok": True}, id=one),
            Part.from_function_response("approve", {"ok": True}, id=other),
        ],
    )
    resumed = await chat.send(both)
    assert marks(resumed)[-1] == "seq!end" and not chat.paused()
    assert sorted(approvals.runs) == [1, 2]


async def test_a_cancelled_invocation_resumes_and_runs_the_cancelled_call_again() -> None:
    started: list[str] = []
    release = trio.Event()

    async def slow_lookup(q: str) -> dict[str, str]:
        """Look something up, slowly."""
        started.append(q)
        await release.wait()
        return {"found": q}

    a = llm("a", [fc("slow_lookup", {"q": "x"}), "a done"], slow_lookup)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, llm("b", ["b"])]))
    async with chat.runner.run(user_id="u", session_id=chat.session_id, new_message="go") as run:
        async for event in run:
            if event.get_function_calls():
                await trio.testing.wait_all_tasks_blocked()
                run.cancel("operator stop")
    closing = (await chat.events())[-1]
    assert closing.get_function_responses()[0].response["reason"] == "run cancelled"
    release.set()
    resumed = await chat.send(None, invocation_id=run.invocation_id)
    assert marks(resumed) == [
        "a:FR:slow_lookup",
        "a:T:a done",
        "a!end",
        "seq@b",
        "b:T:b",
        "b!end",
        "seq!end",
    ]
    assert started == ["x", "x"]  # cancelled before its result was committed: it runs again


async def test_an_answer_sent_again_is_stored_once() -> None:
    """A client that retries its answer (it did not hear back) resumes without storing it twice."""
    approvals = Approvals()
    a = llm("a", [fc("approve", {"amount": 5}), "a done"], approvals.tool)
    b = llm("b", [RuntimeError("b failed"), "b done"])
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a, b]))
    first = await chat.send()
    (call_id,) = chat.waiting
    with pytest.raises(RuntimeError, match="b failed"):
        await chat.send(answer(call_id, {"ok": True}))
    again = await chat.send(answer(call_id, {"ok": True}))  # the same answer, no invocation id
    assert marks(again)[-3:] == ["b:T:b done", "b!end", "seq!end"]
    users = [e for e in await chat.events() if e.author == "user"]
    assert len(users) == 2  # the opening message and one answer
    assert {e.invocation_id for e in first + again} == {first[0].invocation_id}


async def test_a_resume_without_a_message_stores_its_state_delta_alone() -> None:
    flaky = Flaky()
    a = llm("a", [fc("lookup", {"q": "x"}), "a done"], flaky.tool)
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[a]))
    with pytest.raises(RuntimeError):
        await chat.send()
    invocation = (await chat.events())[0].invocation_id
    async with chat.runner.run(
        user_id="u", session_id=chat.session_id, invocation_id=invocation, state_delta={"k": 1}
    ) as stream:
        resumed = [e async for e in stream]
    assert marks(resumed)[-1] == "seq!end"
    events = await chat.events()
    users = [e for e in events if e.author == "user"]
    assert [(e.content is None, dict(e.actions.state_delta)) for e in users] == [
        (False, {}),
        (True, {"k": 1}),
    ]
    session = await chat.runner.session_service.get_session(
        app_name="shop", user_id="u", session_id=chat.session_id
    )
    assert session is not None and session.state["k"] == 1
    with pytest.raises(ResumeError, match="already finished"):  # the opening message is found
        await chat.send(None, invocation_id=invocation)


class Escalator(BaseAgent):
    """Escalates at once (a direct child of a parallel agent ends it)."""

    async def _run_async_impl(self, ctx: Any) -> None:
        await ctx.emit(Event(actions=EventActions(escalate=True)))


class Sleeper(BaseAgent):
    """Counts its runs and waits forever (the escalation cancels it)."""

    runs: int = 0

    async def _run_async_impl(self, ctx: Any) -> None:
        self.runs += 1
        await trio.sleep_forever()


async def test_a_parallel_agent_a_child_escalated_in_does_not_run_again_on_resume() -> None:
    sleeper = Sleeper(name="sleeper")
    par = ParallelAgent(name="par", sub_agents=[Escalator(name="esc"), sleeper])
    chat = await Session.start(SequentialAgent(name="seq", sub_agents=[par, llm("z", ["z", "z"])]))
    await chat.send()
    full = await chat.events()
    assert sleeper.runs == 1
    cut = next(i for i, e in enumerate(full) if e.actions.escalate) + 1  # died right after it
    copy = await chat.runner.session_service.create_session(app_name="shop", user_id="u")
    for event in full[:cut]:
        await chat.runner.session_service.append_event(copy, event)
    chat.session_id = copy.id
    resumed = await chat.send(None, invocation_id=full[0].invocation_id)
    assert marks(resumed) == ["par!end", "seq@z", "z:T:z", "z!end", "seq!end"]
    assert sleeper.runs == 1
