"""Agent transfer: targets, the offer, the hand-off and its enforcement (R-XFER-1..7, S-XF-*).

A transfer in trio_agents is a hand-off (ARCHITECTURE §4): the source finishes its turn (its
after-agent callbacks run), then the target runs in its place on the same branch, in the same
invocation, and control never returns to the source. Next-turn routing (R-XFER-8) is in
``tests/test_routing.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.llm_helpers import Chat, chat, fc, kinds, responses
from trio_agents import (
    AgentTransferError,
    BaseAgent,
    CallbackContext,
    Content,
    Event,
    InvocationContext,
    LlmAgent,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
    TrioAgentsError,
)
from trio_agents.agents._transfer import transfer_targets
from trio_agents.models import LlmRequest
from trio_agents.testing import ScriptedModel
from trio_agents.tools import exit_loop


def to(agent_name: str) -> Any:
    """A model response transferring to ``agent_name``."""
    return fc("transfer_to_agent", {"agent_name": agent_name})


def llm(name: str, script: list[Any] | None = None, **kwargs: Any) -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedModel(script or []), **kwargs)


def model_of(agent: LlmAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def transfer_enum(request: LlmRequest) -> list[str] | None:
    """The ``enum`` of ``agent_name`` in the request's transfer declaration, if offered."""
    for tool in request.tools:
        if tool.name == "transfer_to_agent":
            assert tool.parameters is not None
            params: Any = tool.parameters
            assert params["required"] == ["agent_name"]
            return list(params["properties"]["agent_name"]["enum"])
    return None


def names(agents: list[BaseAgent]) -> list[str]:
    return [a.name for a in agents]


class Speaker(BaseAgent):
    """A non-LLM agent that says one line."""

    line: str = "custom"

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(content=Content.from_text(self.line, role="model")))


# -- targets (R-XFER-1) ----------------------------------------------------------------------------


def test_targets_are_children_then_parent_then_peers_r_xfer_1() -> None:
    leaf = llm("leaf")
    b = llm("b", sub_agents=[leaf])
    c = llm("c")
    d = Speaker(name="d")
    root = llm("root", sub_agents=[b, c, d])
    assert names(transfer_targets(root)) == ["b", "c", "d"]
    assert names(transfer_targets(b)) == ["leaf", "root", "c", "d"]
    assert names(transfer_targets(leaf)) == ["b"]  # its parent; it has no peers


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, ["root", "c"]),
        ({"disallow_transfer_to_parent": True}, ["c"]),
        ({"disallow_transfer_to_peers": True}, ["root"]),
        ({"disallow_transfer_to_parent": True, "disallow_transfer_to_peers": True}, []),
    ],
)
def test_disallow_flags_remove_parent_and_peers_r_xfer_1(
    flags: dict[str, bool], expected: list[str]
) -> None:
    b = llm("b", **flags)
    llm("root", sub_agents=[b, llm("c")])
    assert names(transfer_targets(b)) == expected


def test_parent_and_peers_count_only_under_an_llm_parent_r_xfer_1() -> None:
    x1 = llm("x1", sub_agents=[llm("x1_child")])
    x2 = llm("x2")
    seq = SequentialAgent(name="seq", sub_agents=[x1, x2])
    llm("root", sub_agents=[seq])
    assert names(transfer_targets(x1)) == ["x1_child"]
    assert names(transfer_targets(x2)) == []


async def test_no_targets_no_transfer_tool_and_no_transfer_instructions_r_xfer_2() -> None:
    alone = llm("alone", ["hi"])
    await chat(alone)
    (request,) = model_of(alone).requests
    assert transfer_enum(request) is None
    assert "transfer_to_agent" not in (request.system_instruction or "")

    # An LLM agent inside a SequentialAgent has no parent/peer targets either.
    x1 = llm("x1", ["one"])
    await chat(SequentialAgent(name="seq", sub_agents=[x1, llm("x2", ["two"])]))
    (request,) = model_of(x1).requests
    assert transfer_enum(request) is None
    assert "transfer_to_agent" not in (request.system_instruction or "")


async def test_declaration_enum_lists_exactly_the_targets_r_xfer_2() -> None:
    b = llm("b", ["from b"], description="Billing questions.", disallow_transfer_to_peers=True)
    c = llm("c", description="Cancellations.")
    root = llm("root", [to("b")], sub_agents=[b, c])
    await chat(root)
    assert transfer_enum(model_of(root).requests[0]) == ["b", "c"]
    # S-XF-2: b, with peers disallowed, is offered only its parent.
    assert transfer_enum(model_of(b).requests[0]) == ["root"]


async def test_transfer_instructions_name_targets_and_descriptions_r_xfer_2() -> None:
    b = llm("b", ["from b"], description="Billing questions.")
    c = llm("c", description="Cancellations.")
    root = llm("root", [to("b")], sub_agents=[b, c], instruction="Route well.")
    await chat(root)
    root_system = model_of(root).requests[0].system_instruction or ""
    assert root_system.startswith("Route well.")
    assert "- b: Billing questions." in root_system
    assert "- c: Cancellations." in root_system
    assert "`transfer_to_agent`" in root_system
    assert "transfer back to your parent" not in root_system  # the root has no parent

    b_system = model_of(b).requests[0].system_instruction or ""
    assert "- root:" in b_system
    assert "- c: Cancellations." in b_system
    assert "transfer back to your parent root" in b_system


async def test_no_parent_fallback_line_when_parent_is_disallowed_r_xfer_2() -> None:
    b = llm("b", ["from b"], disallow_transfer_to_parent=True)
    root = llm("root", [to("b")], sub_agents=[b, llm("c")])
    await chat(root)
    b_system = model_of(b).requests[0].system_instruction or ""
    assert transfer_enum(model_of(b).requests[0]) == ["c"]
    assert "- root:" not in b_system
    assert "transfer back to your parent" not in b_system


# -- the transfer events and the hand-off (R-XFER-3, R-XFER-7) -------------------------------------


async def test_transfer_events_then_the_target_answers_r_xfer_3() -> None:
    sub = llm("sub", ["response1"])
    root = llm("root", [to("sub")], sub_agents=[sub])
    events = await chat(root)
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("root", "FC:transfer_to_agent"),
        ("root", "FR:transfer_to_agent"),
        ("sub", "T:response1"),
    ]
    call, answer = events[0], events[1]
    assert dict(call.get_function_calls()[0].args) == {"agent_name": "sub"}
    assert responses(answer) == [("transfer_to_agent", {"result": None})]
    assert answer.get_function_responses()[0].id == call.get_function_calls()[0].id
    assert answer.actions.transfer_to_agent == "sub"
    assert answer.content is not None
    assert answer.content.role == "user"
    assert not answer.is_final_response()
    # One invocation, one branch (none at the root).
    assert len({e.invocation_id for e in events}) == 1
    assert {e.branch for e in events} == {None}


async def test_control_never_returns_to_the_source_r_xfer_7() -> None:
    """The source's model is called once only; nothing of the source follows the target."""
    sub = llm("sub", ["sub answers"])
    root = llm("root", [to("sub"), "root must not speak again"], sub_agents=[sub])
    session = await Chat.start(root)
    events = await session.send()
    assert len(model_of(root).requests) == 1
    assert events[-1].author == "sub"
    assert [e.author for e in await session.stored()] == ["root", "root", "sub"]


async def test_source_after_callback_runs_before_the_target_starts_s_xf_5() -> None:
    order: list[str] = []

    def recorder(label: str) -> Any:
        def callback(callback_context: CallbackContext) -> None:
            order.append(f"{label}({callback_context.agent_name})")

        return callback

    sub = llm(
        "sub",
        ["from sub"],
        before_agent_callback=recorder("before"),
        after_agent_callback=recorder("after"),
    )
    root = llm(
        "root",
        [to("sub")],
        sub_agents=[sub],
        before_agent_callback=recorder("before"),
        after_agent_callback=recorder("after"),
    )
    await chat(root)
    assert order == ["before(root)", "after(root)", "before(sub)", "after(sub)"]


async def test_source_after_callback_content_comes_before_the_target_r_xfer_7() -> None:
    def sign_off(callback_context: CallbackContext) -> Content:
        return Content.from_text("root signs off", role="model")

    sub = llm("sub", ["from sub"])
    root = llm("root", [to("sub")], sub_agents=[sub], after_agent_callback=sign_off)
    events = await chat(root)
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("root", "FC:transfer_to_agent"),
        ("root", "FR:transfer_to_agent"),
        ("root", "T:root signs off"),
        ("sub", "T:from sub"),
    ]


async def test_the_target_sees_the_conversation_so_far_r_xfer_3() -> None:
    sub = llm("sub", ["sub answers"])
    root = llm("root", [to("sub")], sub_agents=[sub])
    await chat(root, "I need help")
    contents = model_of(sub).requests[0].contents
    assert contents[0] == Content.from_text("I need help", role="user")
    # The root's transfer call and response are retold as context.
    told = " ".join(p.text or "" for c in contents[1:] for p in c.parts)
    assert "[root] called tool `transfer_to_agent`" in told


async def test_target_runs_on_the_source_branch_r_xfer_3() -> None:
    """Inside a ParallelAgent the hand-off stays on the source's branch."""
    helper = llm("helper", ["helped"])
    worker = llm("worker", [to("helper")], sub_agents=[helper])
    other = llm("other", ["other done"])
    events = await chat(ParallelAgent(name="par", sub_agents=[worker, other]))
    by_author = {e.author: e.branch for e in events}
    assert by_author["worker"] == "par.worker"
    assert by_author["helper"] == "par.worker"
    assert by_author["other"] == "par.other"
    assert [e.text for e in events if e.author == "helper"] == ["helped"]


async def test_transfer_to_parent_and_to_peer_r_xfer_1() -> None:
    """root→b (turn 1), b→c peer (turn 2), c→root parent (turn 3): one hand-off each."""
    b = llm("b", [to("c")])
    c = llm("c", ["c speaks", to("root")])
    root = llm("root", [to("b"), "root again"], sub_agents=[b, c])
    session = await Chat.start(root)
    first = await session.send("one")
    assert [e.author for e in first] == ["root", "root", "b", "b", "c"]
    assert first[-1].text == "c speaks"
    third = await session.send("two")  # routed to c, which hands back to its parent
    assert [(e.author, k) for e, k in zip(third, kinds(third), strict=True)] == [
        ("c", "FC:transfer_to_agent"),
        ("c", "FR:transfer_to_agent"),
        ("root", "T:root again"),
    ]
    assert third[1].actions.transfer_to_agent == "root"


async def test_transfer_to_a_custom_agent_child_r_xfer_1() -> None:
    root = llm("root", [to("custom")], sub_agents=[Speaker(name="custom", line="hello")])
    events = await chat(root)
    assert (events[-1].author, events[-1].text) == ("custom", "hello")


# -- chains and workflow targets (R-XFER-5, R-XFER-6) ----------------------------------------------


async def test_chain_a_to_b_to_c_in_one_invocation_r_xfer_5() -> None:
    c = llm("c", ["c answers"], disallow_transfer_to_parent=True, disallow_transfer_to_peers=True)
    b = llm("b", [to("c")], sub_agents=[c])
    a = llm("a", [to("b")], sub_agents=[b])
    events = await chat(a)
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("a", "FC:transfer_to_agent"),
        ("a", "FR:transfer_to_agent"),
        ("b", "FC:transfer_to_agent"),
        ("b", "FR:transfer_to_agent"),
        ("c", "T:c answers"),
    ]
    assert [e.actions.transfer_to_agent for e in events] == [None, "b", None, "c", None]
    assert len({e.invocation_id for e in events}) == 1
    assert [len(model_of(x).requests) for x in (a, b, c)] == [1, 1, 1]


async def test_transfer_into_a_sequential_agent_runs_all_its_children_r_xfer_6() -> None:
    x1 = llm("x1", ["one"])
    x2 = llm("x2", ["two"])
    root = llm("root", [to("seq")], sub_agents=[SequentialAgent(name="seq", sub_agents=[x1, x2])])
    events = await chat(root)
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("root", "FC:transfer_to_agent"),
        ("root", "FR:transfer_to_agent"),
        ("x1", "T:one"),
        ("x2", "T:two"),
    ]


async def test_transfer_inside_a_sequence_then_the_sequence_continues_r_xfer_6() -> None:
    """test_auto_to_sequential_to_auto: the 2nd sub-agent hands off to its child; the 3rd still
    runs afterwards."""
    x2_child = llm("x2_child", ["child of two"])
    x1 = llm("x1", ["one"])
    x2 = llm("x2", [to("x2_child")], sub_agents=[x2_child])
    x3 = llm("x3", ["three"])
    root = llm(
        "root", [to("seq")], sub_agents=[SequentialAgent(name="seq", sub_agents=[x1, x2, x3])]
    )
    events = await chat(root)
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("root", "FC:transfer_to_agent"),
        ("root", "FR:transfer_to_agent"),
        ("x1", "T:one"),
        ("x2", "FC:transfer_to_agent"),
        ("x2", "FR:transfer_to_agent"),
        ("x2_child", "T:child of two"),
        ("x3", "T:three"),
    ]


async def test_transfer_into_a_loop_ends_the_turn_at_exit_loop_s_xf_6() -> None:
    """test_auto_to_loop replayed on 2.13: the turn ends with the exit_loop response; the root's
    next reply ("response4") comes only in turn 2."""
    s1 = llm("s1", ["response1", "response3"])
    s2 = llm("s2", ["response2", fc("exit_loop")], tools=[exit_loop])
    loop = LoopAgent(name="loop", sub_agents=[s1, s2])
    root = llm("root", [to("loop"), "response4"], sub_agents=[loop])
    session = await Chat.start(root)
    first = await session.send("go")
    assert [(e.author, k) for e, k in zip(first, kinds(first), strict=True)] == [
        ("root", "FC:transfer_to_agent"),
        ("root", "FR:transfer_to_agent"),
        ("s1", "T:response1"),
        ("s2", "T:response2"),
        ("s1", "T:response3"),
        ("s2", "FC:exit_loop"),
        ("s2", "FR:exit_loop"),
    ]
    assert first[-1].actions.escalate
    assert len(model_of(root).requests) == 1
    second = await session.send("again")
    assert [(e.author, e.text) for e in second] == [("root", "response4")]


# -- enforcement (R-XFER-4) ------------------------------------------------------------------------


async def failed_transfer(root: BaseAgent) -> tuple[AgentTransferError, Chat]:
    session = await Chat.start(root)
    with pytest.raises(AgentTransferError) as info:
        await session.send()
    return info.value, session


async def test_unknown_target_fails_naming_source_and_target_s_xf_3() -> None:
    root = llm("root", [to("ghost")], sub_agents=[llm("sub")])
    error, session = await failed_transfer(root)
    assert isinstance(error, TrioAgentsError)
    # ADK 2.13 raises ValueError for an unknown, unrelated or forbidden target (its
    # WorkflowDataError subclasses ValueError), so `except ValueError` catches both.
    assert isinstance(error, ValueError)
    assert (error.source, error.target) == ("root", "ghost")
    assert "'ghost'" in str(error)
    assert "'root'" in str(error)
    stored = await session.stored()
    # The FC stays, its call is closed, and an error event names the failure.
    assert kinds(stored) == [
        "FC:transfer_to_agent",
        "FR:transfer_to_agent",
        "E:AgentTransferError",
    ]
    assert [e.author for e in stored] == ["root", "root", "root"]
    ((_, closing),) = responses(stored[1])
    assert closing["error"] == "cancelled"
    assert stored[1].actions.transfer_to_agent is None


async def test_transfer_to_self_fails_r_xfer_4() -> None:
    root = llm("root", [to("root")], sub_agents=[llm("sub")])
    error, _ = await failed_transfer(root)
    assert (error.source, error.target) == ("root", "root")
    assert "itself" in str(error)


async def test_transfer_to_a_disallowed_peer_fails_s_xf_2() -> None:
    c = llm("c", ["c must not run"])
    b = llm("b", [to("c")], disallow_transfer_to_peers=True)
    root = llm("root", [to("b")], sub_agents=[b, c])
    error, session = await failed_transfer(root)
    assert (error.source, error.target) == ("b", "c")
    assert "'b'" in str(error)
    assert "'c'" in str(error)
    assert model_of(c).requests == []
    assert not any(e.author == "c" for e in await session.stored())


async def test_transfer_to_a_disallowed_parent_fails_r_xfer_4() -> None:
    b = llm("b", [to("root")], disallow_transfer_to_parent=True)
    root = llm("root", [to("b"), "root must not run again"], sub_agents=[b, llm("c")])
    error, _ = await failed_transfer(root)
    assert (error.source, error.target) == ("b", "root")
    assert len(model_of(root).requests) == 1


async def test_transfer_to_a_non_target_in_the_tree_fails_r_xfer_4() -> None:
    """A grandchild, and a peer under a non-LLM parent, exist in the tree but are not targets."""
    grandchild = llm("grandchild")
    root = llm("root", [to("grandchild")], sub_agents=[llm("sub", sub_agents=[grandchild])])
    error, _ = await failed_transfer(root)
    assert (error.source, error.target) == ("root", "grandchild")

    x2 = llm("x2", ["x2 runs in sequence"])
    x1 = llm("x1", [to("x2")], sub_agents=[llm("x1_child")])
    error, _ = await failed_transfer(SequentialAgent(name="seq", sub_agents=[x1, x2]))
    assert (error.source, error.target) == ("x1", "x2")
    assert model_of(x2).requests == []


async def test_an_agent_without_targets_has_no_transfer_tool_to_call_r_xfer_2() -> None:
    """Without targets ``transfer_to_agent`` is an unknown tool: an error response the model can
    recover from (R-TOOL-3), not a transfer."""
    x2 = llm("x2", ["x2 runs"])
    x1 = llm("x1", [to("x2"), "x1 recovers"])
    events = await chat(SequentialAgent(name="seq", sub_agents=[x1, x2]))
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("x1", "FC:transfer_to_agent"),
        ("x1", "FR:transfer_to_agent"),
        ("x1", "T:x1 recovers"),
        ("x2", "T:x2 runs"),
    ]
    ((_, response),) = responses(events[1])
    assert "no tool with that name is available" in response["error"]
    assert events[1].actions.transfer_to_agent is None
