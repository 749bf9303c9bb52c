"""Tool confirmation (R-LRO-5): asking, answering, re-running, and what the model never sees.

A tool made with ``require_confirmation`` (or calling ``tool_context.request_confirmation``)
answers its first call provisionally; the agent then emits a long-running
``adk_request_confirmation`` call carrying the original call and ends its turn. The client's
function response to that call (``{"confirmed": bool, "payload": ...}``) continues the same
invocation: the original call runs again with ``tool_context.tool_confirmation`` set, and the
model is called with the call followed by its real answer. The event shapes and their order are
google-adk 2.13's (checked against ADK's own events in ``test_adk_events_parse_...``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.agents.llm_helpers import Chat, call, calls, fc, kinds
from tests.tools.adk_confirmation_events import ADK_CONFIRMATION_FLOW
from trio_agents import (
    ConfigurationError,
    Content,
    Event,
    LlmAgent,
    Part,
    ToolConfirmation,
    ToolContext,
)
from trio_agents.models import LlmRequest
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool

REQUEST = "adk_request_confirmation"


class Shop:
    """A ``refund`` tool that records the amounts it refunded."""

    def __init__(self, require: Any = True) -> None:
        self.refunded: list[int] = []
        self.tool = FunctionTool(self.refund, require_confirmation=require)

    def refund(self, amount: int) -> dict[str, Any]:
        """Refund an amount to the customer."""
        self.refunded.append(amount)
        return {"refunded": amount}


def make_agent(script: list[Any], *tools: Any) -> LlmAgent:
    return LlmAgent(name="assistant", model=ScriptedModel(script), tools=list(tools))


def model_of(agent: LlmAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def request_of(events: list[Event]) -> tuple[str, dict[str, Any]]:
    """The id and arguments of the one confirmation request among ``events``."""
    (found,) = [c for e in events for c in e.get_function_calls() if c.name == REQUEST]
    assert found.id is not None
    return found.id, dict(found.args)


def answer(call_id: str, response: dict[str, Any], name: str = REQUEST) -> Content:
    return Content(role="user", parts=[Part.from_function_response(name, response, id=call_id)])


def seen_by_model(request: LlmRequest) -> list[str]:
    """``call:name``, ``response:name=...``, ``text:...`` for each part the model was sent."""
    out = []
    for content in request.contents:
        for part in content.parts:
            if part.function_call is not None:
                out.append(f"call:{part.function_call.name}")
            elif part.function_response is not None:
                answer = part.function_response
                out.append(f"response:{answer.name}={json.dumps(dict(answer.response))}")
            else:
                out.append(f"text:{part.text}")
    return out


async def first_turn(shop: Shop, script: list[Any]) -> tuple[Chat, LlmAgent, list[Event]]:
    agent = make_agent(script, shop.tool)
    chat = await Chat.start(agent)
    return chat, agent, await chat.send("refund 250")


# -- asking -------------------------------------------------------------------------------------


async def test_required_confirmation_asks_instead_of_running_the_tool() -> None:
    shop = Shop()
    chat, agent, events = await first_turn(shop, [fc("refund", {"amount": 250})])
    assert shop.refunded == []
    assert kinds(events) == ["FC:refund", f"FC:{REQUEST}", "FR:refund"]
    call_event, request, response = events
    (original,) = call_event.get_function_calls()
    request_id, args = request_of(events)
    assert request_id.startswith("adk-")
    assert request.long_running_tool_ids == {request_id}
    assert request.author == "assistant" and request.content is not None
    assert request.content.role == "model"
    assert args["originalFunctionCall"] == {
        "id": original.id,
        "args": {"amount": 250},
        "name": "refund",
    }
    assert args["toolConfirmation"]["confirmed"] is False
    assert "refund()" in args["toolConfirmation"]["hint"]
    assert response.actions.skip_summarization is True
    assert original.id is not None
    asked = response.actions.requested_tool_confirmations[original.id]
    assert asked == ToolConfirmation(hint=args["toolConfirmation"]["hint"])
    assert "refund" in response.get_function_responses()[0].response["error"]
    assert len(model_of(agent).requests) == 1  # the turn ends on the request
    assert await chat.stored() == events  # all committed, in the order delivered


async def test_approval_reruns_the_call_in_the_same_invocation_and_the_model_sees_its_answer() -> (
    None
):
    shop = Shop()
    chat, agent, events = await first_turn(shop, [fc("refund", {"amount": 250}), "Refunded."])
    request_id, _ = request_of(events)
    resumed = await chat.send(answer(request_id, {"confirmed": True}))
    assert shop.refunded == [250]
    assert kinds(resumed) == ["FR:refund", "T:Refunded."]
    assert resumed[0].get_function_responses()[0].response == {"refunded": 250}
    assert {e.invocation_id for e in resumed} == {events[0].invocation_id}
    (_, second) = model_of(agent).requests
    assert seen_by_model(second) == [
        "text:refund 250",
        "call:refund",
        'response:refund={"refunded": 250}',
    ]


async def test_rejection_tells_the_model_and_never_runs_the_tool() -> None:
    shop = Shop()
    chat, agent, events = await first_turn(shop, [fc("refund", {"amount": 250}), "Not refunded."])
    request_id, _ = request_of(events)
    resumed = await chat.send(answer(request_id, {"confirmed": False}))
    assert shop.refunded == []
    assert kinds(resumed) == ["FR:refund", "T:Not refunded."]
    error = resumed[0].get_function_responses()[0].response["error"]
    assert "`refund()`" in error and "rejected" in error
    (_, second) = model_of(agent).requests
    assert not any(REQUEST in item for item in seen_by_model(second))


async def test_the_wrapped_answer_adk_web_clients_send_is_understood() -> None:
    shop = Shop()
    chat, _, events = await first_turn(shop, [fc("refund", {"amount": 250}), "ok"])
    request_id, _ = request_of(events)
    await chat.send(answer(request_id, {"response": json.dumps({"confirmed": True})}))
    assert shop.refunded == [250]


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_predicate_decides_per_call(is_async: bool) -> None:
    def large(amount: int) -> bool:
        return amount > 100

    async def large_async(amount: int) -> bool:
        return amount > 100

    shop = Shop(require=large_async if is_async else large)
    script = [calls(call("refund", {"amount": 20}), call("refund", {"amount": 500})), "ok"]
    chat, agent, events = await first_turn(shop, script)
    assert shop.refunded == [20]  # the small one ran, the large one waits
    assert kinds(events) == ["FC:refund,refund", "FR:refund,refund", f"FC:{REQUEST}"]
    settled = events[1]
    assert settled.actions.skip_summarization is None  # some answers are real (ADK 2.13)
    request_id, args = request_of(events)
    assert args["originalFunctionCall"]["args"] == {"amount": 500}
    resumed = await chat.send(answer(request_id, {"confirmed": True}))
    assert shop.refunded == [20, 500]
    assert kinds(resumed) == ["FR:refund", "T:ok"]
    (_, second) = model_of(agent).requests
    assert seen_by_model(second) == [
        "text:refund 250",
        "call:refund",
        "call:refund",
        'response:refund={"refunded": 20}',
        'response:refund={"refunded": 500}',
    ]


async def test_a_tool_asks_itself_and_gets_the_users_payload() -> None:
    seen: list[ToolConfirmation | None] = []

    def transfer(amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Transfer money."""
        seen.append(tool_context.tool_confirmation)
        if tool_context.tool_confirmation is None:
            tool_context.request_confirmation(hint="Which account?", payload={"account": ""})
            return {"status": "waiting for the account"}
        return {"sent": amount, "to": tool_context.tool_confirmation.payload["account"]}

    script = [fc("transfer", {"amount": 9}), "Which account?", "Sent."]
    agent = make_agent(script, FunctionTool(transfer))
    chat = await Chat.start(agent)
    events = await chat.send("send 9")
    # As in ADK, a tool that asks without skipping summarization lets the model speak first.
    assert kinds(events) == ["FC:transfer", f"FC:{REQUEST}", "FR:transfer", "T:Which account?"]
    request_id, args = request_of(events)
    assert args["toolConfirmation"] == {
        "hint": "Which account?",
        "confirmed": False,
        "payload": {"account": ""},
    }
    await chat.send(answer(request_id, {"confirmed": True, "payload": {"account": "ACME"}}))
    assert seen == [None, ToolConfirmation(confirmed=True, payload={"account": "ACME"})]
    stored = await chat.stored()
    assert kinds(stored[-2:]) == ["FR:transfer", "T:Sent."]
    assert stored[-2].get_function_responses()[0].response == {"sent": 9, "to": "ACME"}


async def test_request_confirmation_outside_a_call_is_refused() -> None:
    captured: list[ToolContext] = []

    def probe(tool_context: ToolContext) -> str:
        """Probe."""
        captured.append(tool_context)
        return "ok"

    agent = make_agent([fc("probe"), "done"], FunctionTool(probe))
    await (await Chat.start(agent)).send("go")
    context = ToolContext(captured[0].invocation_context)  # no function call
    with pytest.raises(ConfigurationError, match="request_confirmation"):
        context.request_confirmation(hint="?")


def test_require_confirmation_must_be_a_bool_or_callable() -> None:
    def tool(x: int) -> int:
        return x

    with pytest.raises(ConfigurationError, match=r"'tool'.*require_confirmation"):
        FunctionTool(tool, require_confirmation="yes")  # type: ignore[arg-type]


# -- bad answers: refused before anything is committed ------------------------------------------


@pytest.mark.parametrize(
    "response",
    [{"confirmed": "yes"}, {"confirmed": 1}, {}, {"payload": 3}, {"response": "[1]"}],
)
async def test_an_answer_without_a_bool_confirmed_is_refused_naming_the_call(
    response: dict[str, Any],
) -> None:
    shop = Shop()
    chat, _, events = await first_turn(shop, [fc("refund", {"amount": 250})])
    request_id, _ = request_of(events)
    before = (await chat.session()).events
    with pytest.raises(ConfigurationError, match=request_id):
        await chat.send(answer(request_id, response))
    assert (await chat.session()).events == before
    assert shop.refunded == []


async def test_an_answer_to_no_call_is_refused_naming_the_id() -> None:
    shop = Shop()
    chat, _, _ = await first_turn(shop, [fc("refund", {"amount": 250})])
    before = (await chat.session()).events
    with pytest.raises(ConfigurationError, match="adk-nowhere"):
        await chat.send(answer("adk-nowhere", {"confirmed": True}))
    assert (await chat.session()).events == before


async def test_a_second_answer_to_the_same_request_is_refused() -> None:
    shop = Shop()
    chat, _, events = await first_turn(shop, [fc("refund", {"amount": 250}), "ok"])
    request_id, _ = request_of(events)
    await chat.send(answer(request_id, {"confirmed": True}))
    before = (await chat.session()).events
    with pytest.raises(ConfigurationError, match=f"{request_id}.*already answered"):
        await chat.send(answer(request_id, {"confirmed": True}))
    assert (await chat.session()).events == before
    assert shop.refunded == [250]


# -- ADK's events ---------------------------------------------------------------------------------


def test_adk_events_parse_and_keep_every_confirmation_field() -> None:
    events = [Event.from_json(line) for line in ADK_CONFIRMATION_FLOW]
    _, call_event, request, placeholder, user_answer, rerun, final = events
    (original,) = call_event.get_function_calls()
    (asked,) = request.get_function_calls()
    assert asked.name == REQUEST and request.long_running_tool_ids == {asked.id}
    assert asked.args["originalFunctionCall"]["id"] == original.id
    assert original.id is not None
    confirmation = placeholder.actions.requested_tool_confirmations[original.id]
    assert confirmation.confirmed is False and "refund()" in confirmation.hint
    assert placeholder.actions.skip_summarization is True
    assert user_answer.get_function_responses()[0].response == {"confirmed": True}
    assert rerun.get_function_responses()[0].response == {"refunded": 250}
    assert final.text == "done"
    for line, event in zip(ADK_CONFIRMATION_FLOW, events, strict=True):
        adk = json.loads(line)
        ours = json.loads(event.to_json())
        assert (
            ours["actions"].get("requestedToolConfirmations", {})
            == (adk["actions"]["requestedToolConfirmations"])
        )
        assert ours["content"] == adk["content"]


async def test_our_flow_has_adks_shape() -> None:
    """Our events, reduced to (author, role, kinds, long-running, actions keys), equal ADK's."""
    shop = Shop()
    chat, _, _ = await first_turn(shop, [fc("refund", {"amount": 250}), "done"])
    request_id, _ = request_of(await chat.stored())
    await chat.send(answer(request_id, {"confirmed": True}))
    ours = [json.loads(e.to_json()) for e in (await chat.session()).events]
    adk = [json.loads(line) for line in ADK_CONFIRMATION_FLOW]
    assert [shape(e) for e in ours] == [shape(e) for e in adk]


def shape(data: dict[str, Any]) -> tuple[Any, ...]:
    parts = data.get("content", {}).get("parts", [])
    names = [
        (p.get("functionCall") or p.get("functionResponse") or {}).get("name", "text")
        for p in parts
    ]
    confirmations = data["actions"].get("requestedToolConfirmations", {})
    return (
        data["author"],
        data.get("content", {}).get("role"),
        names,
        len(data.get("longRunningToolIds", [])),
        data["actions"].get("skipSummarization"),
        [sorted(c) for c in confirmations.values()],
    )


# -- several calls, several agents, any answers ---------------------------------------------------


async def test_two_calls_asking_in_one_turn_make_one_request_event_and_one_answer_runs_both() -> (
    None
):
    shop = Shop()
    script = [calls(call("refund", {"amount": 1}), call("refund", {"amount": 2})), "ok"]
    chat, agent, events = await first_turn(shop, script)
    assert kinds(events) == ["FC:refund,refund", f"FC:{REQUEST},{REQUEST}", "FR:refund,refund"]
    assert len(events[2].actions.requested_tool_confirmations) == 2
    requests = events[1].get_function_calls()
    assert events[1].long_running_tool_ids == {c.id for c in requests}
    answers = Content(
        role="user",
        parts=[
            Part.from_function_response(REQUEST, {"confirmed": ok}, id=c.id)
            for c, ok in zip(requests, [False, True], strict=True)
        ],
    )
    resumed = await chat.send(answers)
    assert shop.refunded == [2]
    assert kinds(resumed) == ["FR:refund,refund", "T:ok"]
    (_, second) = model_of(agent).requests
    assert seen_by_model(second)[-2:] == [
        'response:refund={"error": "The user rejected the call to `refund()`; it did not run."}',
        'response:refund={"refunded": 2}',
    ]


async def test_in_a_pipeline_the_answer_goes_to_the_agent_that_asked() -> None:
    from trio_agents import SequentialAgent

    shop = Shop()
    asker = make_agent([fc("refund", {"amount": 7}), "refunded", "hello again"], shop.tool)
    after = LlmAgent(name="after", model=ScriptedModel(["noted", "noted again"]))
    chat = await Chat.start(SequentialAgent(name="pipeline", sub_agents=[asker, after]))
    events = await chat.send("refund 7")
    request_id, _ = request_of(events)
    # Not resumable, as in ADK: the pipeline stops at the request (the invocation waits for the
    # client), and the answer goes to the agent that asked alone.
    assert [e.author for e in events][-1] == "assistant"
    assert model_of(after).requests == []
    resumed = await chat.send(answer(request_id, {"confirmed": True}))
    assert shop.refunded == [7]
    assert [e.author for e in resumed] == ["assistant", "assistant"]
    assert model_of(after).requests == []
    later = await chat.send("next")
    assert [e.author for e in later] == ["assistant", "after"]  # a new message starts over
    (seen,) = model_of(after).requests
    assert not any(REQUEST in item for item in seen_by_model(seen))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=4),
    _seed=st.random_module(),
)
async def test_each_call_runs_once_exactly_when_it_needs_no_approval_or_is_approved(
    plan: list[tuple[bool, bool]], _seed: Any
) -> None:
    """Invariants over any mix of calls that need approval and answers: a tool runs exactly
    when its call needs none or was approved, never twice; the model never sees a confirmation
    call; after the answers it sees one response per original call."""
    amounts = [100 * needs + i for i, (needs, _) in enumerate(plan)]  # >= 100: needs approval
    shop = Shop(require=lambda amount: amount >= 100)
    script = [calls(*(call("refund", {"amount": a}) for a in amounts)), "ok"]
    chat, agent, events = await first_turn(shop, script)
    requests = [c for e in events for c in e.get_function_calls() if c.name == REQUEST]
    assert sorted(shop.refunded) == sorted(a for a in amounts if a < 100)
    if requests:
        approve = {a: ok for a, (needs, ok) in zip(amounts, plan, strict=True) if needs}
        parts = [
            Part.from_function_response(
                REQUEST,
                {"confirmed": approve[c.args["originalFunctionCall"]["args"]["amount"]]},
                id=c.id,
            )
            for c in requests
        ]
        await chat.send(Content(role="user", parts=parts))
    expected = [a for a, (needs, ok) in zip(amounts, plan, strict=True) if not needs or ok]
    assert sorted(shop.refunded) == sorted(expected)
    last = model_of(agent).requests[-1]
    assert not any(REQUEST in item for item in seen_by_model(last))
    answered = [item for item in seen_by_model(last) if item.startswith("response:refund")]
    assert len(answered) == len(amounts)


async def test_a_tool_from_a_toolset_is_rerun_from_that_toolset() -> None:
    from trio_agents.tools import BaseTool, BaseToolset

    shop = Shop()

    class Tools(BaseToolset):
        async def get_tools(self, readonly_context: Any = None) -> list[BaseTool]:
            return [shop.tool]

    agent = make_agent([fc("refund", {"amount": 3}), "ok"], Tools())
    chat = await Chat.start(agent)
    events = await chat.send("refund 3")
    request_id, _ = request_of(events)
    resumed = await chat.send(answer(request_id, {"confirmed": True}))
    assert shop.refunded == [3]
    assert resumed[0].get_function_responses()[0].response == {"refunded": 3}


async def test_actions_of_the_calls_merge_into_the_response_event() -> None:
    """Checkpoint fields written on a tool's context ride on its response event."""

    def mark(tool_context: ToolContext) -> str:
        """Mark."""
        tool_context.actions.agent_state = {"step": 2}
        tool_context.actions.end_of_agent = False
        return "marked"

    agent = make_agent([fc("mark"), "ok"], FunctionTool(mark))
    events = await (await Chat.start(agent)).send("go")
    (response,) = [e for e in events if e.get_function_responses()]
    assert response.actions.agent_state == {"step": 2}
    assert response.actions.end_of_agent is False
    assert Event.from_json(response.to_json()) == response


async def test_normalized_flows_compare_equal_across_runs() -> None:
    """The testing kit's ``normalize`` renames the call ids a confirmation flow repeats."""
    from trio_agents.testing import normalize

    async def flow() -> list[dict[str, Any]]:
        chat, _, events = await first_turn(Shop(), [fc("refund", {"amount": 250}), "ok"])
        request_id, _ = request_of(events)
        await chat.send(answer(request_id, {"confirmed": True}))
        return normalize((await chat.session()).events)

    first, second = await flow(), await flow()
    assert first == second
    request = first[2]["content"]["parts"][0]["functionCall"]
    assert request["args"]["originalFunctionCall"]["id"] == "<call-1>"
    assert list(first[3]["actions"]["requestedToolConfirmations"]) == ["<call-1>"]
    assert first[4]["content"]["parts"][0]["functionResponse"]["id"] == request["id"]


async def test_the_flow_through_a_sqlite_store_and_a_new_runner(tmp_path: Any) -> None:
    """The request and its answer survive the store: a new Runner on the same SQLite file (as
    after a restart) re-runs the confirmed call; a bad answer leaves the file unchanged."""
    from trio_agents import Runner
    from trio_agents.sessions import SqliteSessionService

    path = str(tmp_path / "sessions.db")
    shop = Shop()
    async with SqliteSessionService(path) as service:
        agent = make_agent([fc("refund", {"amount": 5})], shop.tool)
        runner = Runner(agent=agent, app_name="shop", session_service=service)
        chat = await Chat.start(agent, runner=runner)
        events = await chat.send("refund 5")
    request_id, _ = request_of(events)
    async with SqliteSessionService(path) as service:
        agent = make_agent(["Refunded."], shop.tool)
        runner = Runner(agent=agent, app_name="shop", session_service=service)
        chat = Chat(runner, chat.session_id)
        stored = (await chat.session()).events
        assert stored[1:] == events  # every field, the confirmation ones included, read back
        with pytest.raises(ConfigurationError, match=request_id):
            await chat.send(answer(request_id, {"confirmed": "sure"}))
        assert (await chat.session()).events == stored
        resumed = await chat.send(answer(request_id, {"confirmed": True}))
    assert shop.refunded == [5]
    assert kinds(resumed) == ["FR:refund", "T:Refunded."]
