"""Long-running tools: the call, the pause, the late answer (R-LRO-1..4, S-LRO-*, R-RUN-2).

A long-running tool runs at once, exactly once. A falsy result leaves its call open: the model
event calling it is final and the agent's turn ends there. The client answers later with a user
message holding a ``FunctionResponse`` with the call's id; the Runner routes it to the agent that
made the call (R-XFER-8) and that agent's model sees the call directly followed by the latest
answer. The invocation waits for the client there: enclosing workflow agents stop (R-LRO-4).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.agents.llm_helpers import Chat, call, calls, chat, fc, kinds, responses
from trio_agents import (
    ConfigurationError,
    Content,
    Event,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    Part,
    SequentialAgent,
)
from trio_agents.testing import ScriptedModel
from trio_agents.tools import LongRunningFunctionTool


class Approvals:
    """A long-running ``approve`` tool that records its runs and returns ``result``."""

    def __init__(self, result: Any = None) -> None:
        self.runs: list[int] = []
        self.result = result
        self.tool = LongRunningFunctionTool(self.approve)

    def approve(self, amount: int) -> Any:
        """Ask a human to approve a payment."""
        self.runs.append(amount)
        return self.result


def agent(name: str, script: list[Any], *tools: Any, **kwargs: Any) -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedModel(script), tools=list(tools), **kwargs)


def model_of(agent: LlmAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def answer(call_id: str | None, response: dict[str, Any], name: str = "approve") -> Content:
    return Content(role="user", parts=[Part.from_function_response(name, response, id=call_id)])


def call_id_of(event: Event, name: str = "approve") -> str:
    (found,) = [c.id for c in event.get_function_calls() if c.name == name]
    assert found is not None
    return found


def picture(content: Content) -> list[str]:
    """``text:...``, ``call:name``, ``response:name=...`` for each part of a model content."""
    out = []
    for part in content.parts:
        if part.function_call is not None:
            out.append(f"call:{part.function_call.name}")
        elif part.function_response is not None:
            out.append(
                f"response:{part.function_response.name}={dict(part.function_response.response)}"
            )
        else:
            out.append(f"text:{part.text}")
    return out


# -- the call (R-LRO-1, R-LRO-2) -------------------------------------------------------------------


async def test_long_running_call_ends_the_turn_with_a_final_event_s_lro_4() -> None:
    approvals = Approvals(result=None)
    a = agent("a", [fc("approve", {"amount": 5})], approvals.tool)
    session = await Chat.start(a)
    events = await session.send("pay 5")
    assert kinds(events) == ["FC:approve"]
    (event,) = events
    assert event.long_running_tool_ids == {call_id_of(event)}
    assert event.is_final_response()
    assert approvals.runs == [5]
    assert len(model_of(a).requests) == 1
    # The call stays open: no response is stored for it when the run ends.
    assert kinds(await session.stored()) == ["FC:approve"]


@pytest.mark.parametrize("falsy", [None, {}, ""])
async def test_any_falsy_result_leaves_the_call_open_r_lro_2(falsy: Any) -> None:
    approvals = Approvals(result=falsy)
    events = await chat(agent("a", [fc("approve", {"amount": 1})], approvals.tool))
    assert kinds(events) == ["FC:approve"]


async def test_a_pending_status_is_an_ordinary_response_and_the_model_goes_on_s_lro_1() -> None:
    approvals = Approvals(result={"status": "pending"})
    a = agent("a", [fc("approve", {"amount": 5}), "waiting for approval"], approvals.tool)
    events = await chat(a)
    assert kinds(events) == ["FC:approve", "FR:approve", "T:waiting for approval"]
    assert [e.is_final_response() for e in events] == [True, False, True]
    assert responses(events[1]) == [("approve", {"status": "pending"})]
    assert len(model_of(a).requests) == 2


async def test_only_the_long_running_calls_are_marked_r_lro_1() -> None:
    approvals = Approvals(result=None)

    def lookup(q: str) -> str:
        return f"found {q}"

    a = agent(
        "a",
        [calls(call("approve", {"amount": 5}), call("lookup", {"q": "x"})), "looked it up"],
        approvals.tool,
        lookup,
    )
    events = await chat(a)
    # The lookup's response comes back (not final), so the model is called again.
    assert kinds(events) == ["FC:approve,lookup", "FR:lookup", "T:looked it up"]
    assert events[0].long_running_tool_ids == {call_id_of(events[0])}
    assert call_id_of(events[0], "lookup") not in (events[0].long_running_tool_ids or ())
    assert responses(events[1]) == [("lookup", {"result": "found x"})]


async def test_declaration_tells_the_model_not_to_call_again_r_lro_1() -> None:
    approvals = Approvals()
    a = agent("a", ["no call"], approvals.tool)
    await chat(a)
    (declaration,) = model_of(a).requests[0].tools
    assert declaration.description.startswith("Ask a human to approve a payment.")
    assert "long-running" in declaration.description
    assert "Do not call this tool again" in declaration.description


# -- the late answer (R-LRO-3, R-RUN-2) ------------------------------------------------------------


async def test_answer_with_the_call_id_resumes_the_agent_s_lro_4() -> None:
    approvals = Approvals(result=None)
    a = agent("a", [fc("approve", {"amount": 5}), "paid"], approvals.tool)
    session = await Chat.start(a)
    first = await session.send("pay 5")
    call_id = call_id_of(first[0])
    second = await session.send(answer(call_id, {"approved": True}))
    assert [(e.author, e.text) for e in second] == [("a", "paid")]
    assert approvals.runs == [5]  # not run again
    contents = model_of(a).requests[1].contents
    assert [picture(c) for c in contents] == [
        ["text:pay 5"],
        ["call:approve"],
        ["response:approve={'approved': True}"],
    ]
    assert contents[2].parts[0].function_response is not None
    assert contents[2].parts[0].function_response.id == call_id
    stored = (await session.session()).events
    assert [e.author for e in stored] == ["user", "a", "user", "a"]
    assert stored[2].get_function_responses()[0].id == call_id


async def test_every_update_triggers_one_model_call_on_the_rearranged_history_s_lro_2() -> None:
    """The pending response and the text after it are left out: the model sees the call, then
    the latest answer."""
    approvals = Approvals(result={"status": "pending"})
    a = agent("a", [fc("approve", {"amount": 5}), "started", "still", "done"], approvals.tool)
    session = await Chat.start(a)
    first = await session.send("pay 5")
    call_id = call_id_of(first[0])
    for update, reply in (({"status": "still waiting"}, "still"), ({"result": 2}, "done")):
        turn = await session.send(answer(call_id, update))
        assert [e.text for e in turn] == [reply]
        assert [picture(c) for c in model_of(a).requests[-1].contents] == [
            ["text:pay 5"],
            ["call:approve"],
            [f"response:approve={update}"],
        ]
    assert len(model_of(a).requests) == 4
    assert approvals.runs == [5]


async def test_the_answer_goes_to_the_sub_agent_that_made_the_call_r_lro_3() -> None:
    approvals = Approvals(result=None)
    payer = agent(
        "payer",
        [fc("approve", {"amount": 9}), "payer finishes"],
        approvals.tool,
        description="Pays.",
    )
    root = agent("root", [fc("transfer_to_agent", {"agent_name": "payer"})], sub_agents=[payer])
    session = await Chat.start(root)
    first = await session.send("pay 9")
    assert [e.author for e in first] == ["root", "root", "payer"]
    turn = await session.send(answer(call_id_of(first[-1]), {"ok": True}))
    assert [(e.author, e.text) for e in turn] == [("payer", "payer finishes")]
    assert len(model_of(root).requests) == 1
    last_content = model_of(payer).requests[-1].contents[-1]
    assert picture(last_content) == ["response:approve={'ok': True}"]


async def test_the_answer_resumes_only_the_caller_inside_a_sequence_s_lro_5() -> None:
    """Not resumable, as in ADK: the sequence stops after the call (the invocation waits for the
    client), the answer goes to the caller alone, and the next plain message starts over."""
    approvals = Approvals(result=None)
    a1 = agent("a1", [fc("approve", {"amount": 1}), "a1 got it", "a1 again"], approvals.tool)
    a2 = agent("a2", ["a2 first", "a2 again"])
    session = await Chat.start(SequentialAgent(name="seq", sub_agents=[a1, a2]))
    first = await session.send("one")
    assert [(e.author, k) for e, k in zip(first, kinds(first), strict=True)] == [
        ("a1", "FC:approve"),
    ]
    second = await session.send(answer(call_id_of(first[0]), {"ok": True}))
    assert [(e.author, e.text) for e in second] == [("a1", "a1 got it")]
    third = await session.send("three")
    assert [(e.author, e.text) for e in third] == [("a1", "a1 again"), ("a2", "a2 first")]
    assert approvals.runs == [1]


async def test_the_answer_is_stored_on_the_branch_of_its_call() -> None:
    # ADK 2.13 stamps the user's answer with the branch of the call it answers, so the agents
    # of the other parallel branches do not see it in their history.
    approvals = Approvals(result=None)
    a = agent("a", [fc("approve", {"amount": 5}), "a done"], approvals.tool)
    b = agent("b", ["b1"])
    fan = ParallelAgent(name="p", sub_agents=[a, b])
    session = await Chat.start(SequentialAgent(name="s", sub_agents=[fan, agent("c", ["c1"])]))
    first = await session.send("pay")
    call = next(e for e in first if e.get_function_calls())
    second = await session.send(answer(call_id_of(call), {"ok": True}))
    assert [(e.author, e.branch, e.text) for e in second] == [("a", "p.a", "a done")]
    stored = (await session.session()).events
    (user_answer,) = [e for e in stored if e.author == "user" and e.get_function_responses()]
    assert user_answer.branch == "p.a"
    plain = [e for e in stored if e.author == "user" and not e.get_function_responses()]
    assert [e.branch for e in plain] == [None]


async def test_a_loop_stops_at_a_long_running_call_too() -> None:
    """Not resumable, as in ADK: the loop ends where the invocation waits for the client."""
    approvals = Approvals(result={"status": "pending"})
    a1 = agent("a1", [fc("approve", {"amount": 1}), "waiting", "a1 again"], approvals.tool)
    a2 = agent("a2", ["a2 first", "a2 second"])
    events = await chat(LoopAgent(name="loop", sub_agents=[a1, a2], max_iterations=2))
    # A pending result is answered at once and the model speaks again; the loop still stops.
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("a1", "FC:approve"),
        ("a1", "FR:approve"),
        ("a1", "T:waiting"),
    ]
    assert approvals.runs == [1]
    assert model_of(a2).requests == []


async def test_answering_an_unknown_call_id_is_rejected_r_run_2() -> None:
    approvals = Approvals(result=None)
    a = agent("a", [fc("approve", {"amount": 5}), "never"], approvals.tool)
    session = await Chat.start(a)
    first = await session.send("pay 5")
    before = (await session.session()).events
    with pytest.raises(ConfigurationError, match="nope") as info:
        await session.send(answer("nope", {"ok": True}))
    assert isinstance(info.value, ValueError)
    # Known and unknown together are rejected too.
    both = Content(
        role="user",
        parts=[
            Part.from_function_response("approve", {"ok": True}, id=call_id_of(first[0])),
            Part.from_function_response("approve", {"ok": True}, id="nope"),
        ],
    )
    with pytest.raises(ConfigurationError, match="nope"):
        await session.send(both)
    assert (await session.session()).events == before  # nothing stored
    assert len(model_of(a).requests) == 1


async def test_an_answer_without_a_call_id_is_rejected_r_lro_3() -> None:
    approvals = Approvals(result=None)
    a = agent("a", [fc("approve", {"amount": 5}), "never"], approvals.tool)
    session = await Chat.start(a)
    await session.send("pay 5")
    with pytest.raises(ConfigurationError, match="no call id"):
        await session.send(answer(None, {"ok": True}))
    assert len((await session.session()).events) == 2


async def test_the_answer_continues_the_calls_invocation_r_lro_3() -> None:
    approvals = Approvals(result=None)
    a = agent("a", [fc("approve", {"amount": 5}), "paid"], approvals.tool)
    session = await Chat.start(a)
    first = await session.send("pay 5")
    second = await session.send(answer(call_id_of(first[0]), {"ok": True}))
    assert second[0].invocation_id == first[0].invocation_id


# -- cancellation: open calls (ARCHITECTURE §2 rule 7) ---------------------------------------------


async def cancel_when_stuck(session: Chat, message: str) -> list[Event]:
    delivered: list[Event] = []
    async with session.runner.run(
        user_id="u", session_id=session.session_id, new_message=message
    ) as events:
        async with trio.open_nursery() as nursery:

            async def stop() -> None:
                await trio.testing.wait_all_tasks_blocked()
                events.cancel("operator pressed stop")

            nursery.start_soon(stop)
            delivered.extend([e async for e in events])
        assert events.cancelled
    return delivered


def stuck_agent(approvals: Approvals, finished: list[str]) -> LlmAgent:
    async def slow_lookup(q: str) -> str:
        try:
            await trio.sleep_forever()
        finally:
            finished.append(q)
        raise AssertionError("unreachable")

    return agent(
        "a",
        [calls(call("approve", {"amount": 5}), call("slow_lookup", {"q": "x"})), "approved"],
        approvals.tool,
        slow_lookup,
    )


async def test_cancel_closes_ordinary_calls_but_leaves_long_running_ones_open() -> None:
    approvals = Approvals(result=None)
    finished: list[str] = []
    session = await Chat.start(stuck_agent(approvals, finished))
    delivered = await cancel_when_stuck(session, "pay 5")
    assert kinds(delivered) == ["FC:approve,slow_lookup", "FR:slow_lookup"]
    assert finished == ["x"]
    stored = await session.stored()
    assert stored == delivered
    assert kinds(stored) == ["FC:approve,slow_lookup", "FR:slow_lookup"]
    ((name, response),) = responses(stored[1])
    assert name == "slow_lookup"
    assert response["error"] == "cancelled"
    assert stored[1].get_function_responses()[0].id == call_id_of(stored[0], "slow_lookup")
    assert stored[1].author == "a"

    # The long-running call can still be answered.
    turn = await session.send(answer(call_id_of(stored[0]), {"approved": True}))
    assert [(e.author, e.text) for e in turn] == [("a", "approved")]
    assert approvals.runs == [5]


async def test_answer_after_cancel_keeps_the_sibling_calls_closing_response() -> None:
    approvals = Approvals(result=None)
    a = stuck_agent(approvals, [])
    session = await Chat.start(a)
    delivered = await cancel_when_stuck(session, "pay 5")
    await session.send(answer(call_id_of(delivered[0]), {"approved": True}))
    contents = model_of(a).requests[-1].contents
    assert picture(contents[1]) == ["call:approve", "call:slow_lookup"]
    answered = {
        p.function_response.name for c in contents[2:] for p in c.parts if p.function_response
    }
    assert answered == {"approve", "slow_lookup"}
