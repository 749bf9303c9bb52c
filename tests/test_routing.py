"""Who answers the next user message (R-XFER-8, ARCHITECTURE §4 "next-turn routing").

Evaluated over the session history once the new user event is stored:

1. function-response routing: a user message answering an earlier call goes to the call's author,
   transferable or not;
2. else the newest non-user event decides: a transfer it carries to a transferable target wins,
   then the root, then a transferable author; content-less error events and authors not in the
   tree are skipped;
3. else the root.

"Transferable" means the agent and every ancestor up to the root is an LLM agent with
``disallow_transfer_to_parent=False``. The first half of this file checks the picker on hand-made
histories (the ``test_runners.py`` table of ADK-SEMANTICS §4.1), the second drives whole turns.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.llm_helpers import Chat, fc, kinds
from trio_agents import (
    BaseAgent,
    Content,
    Event,
    EventActions,
    InvocationContext,
    LlmAgent,
    LoopAgent,
    Part,
    SequentialAgent,
)
from trio_agents.agents._transfer import agent_to_run
from trio_agents.testing import ScriptedModel
from trio_agents.tools import LongRunningFunctionTool


def llm(name: str, script: list[Any] | None = None, **kwargs: Any) -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedModel(script or []), **kwargs)


def to(agent_name: str) -> Any:
    return fc("transfer_to_agent", {"agent_name": agent_name})


def user(text: str = "hi") -> Event:
    return Event(author="user", content=Content.from_text(text))


def said(author: str, text: str = "ok", **actions: Any) -> Event:
    return Event(
        author=author,
        content=Content.from_text(text, role="model"),
        actions=EventActions(**actions),
    )


def called(author: str, call_id: str, name: str = "tool") -> Event:
    return Event(
        author=author,
        content=Content(role="model", parts=[Part.from_function_call(name, {}, id=call_id)]),
    )


def answered(*call_ids: str, name: str = "tool") -> Event:
    parts = [Part.from_function_response(name, {"ok": True}, id=i) for i in call_ids]
    return Event(author="user", content=Content(role="user", parts=parts))


def failed(author: str) -> Event:
    return Event(author=author, error_code="RuntimeError", error_message="boom")


class Tree:
    """root(LLM)[sub1(LLM)[sub1_1(LLM)], sub2(LLM), single(LLM, no parent), seq[s_a], custom]."""

    def __init__(self) -> None:
        self.sub1_1 = llm("sub1_1")
        self.sub1 = llm("sub1", sub_agents=[self.sub1_1])
        self.sub2 = llm("sub2")
        self.single = llm(
            "single", disallow_transfer_to_parent=True, disallow_transfer_to_peers=True
        )
        self.s_a = llm("s_a")
        self.seq = SequentialAgent(name="seq", sub_agents=[self.s_a])
        self.custom = Custom(name="custom")
        self.root = llm(
            "root", sub_agents=[self.sub1, self.sub2, self.single, self.seq, self.custom]
        )

    def pick(self, *events: Event) -> str:
        return agent_to_run(self.root, list(events)).name


class Custom(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(content=Content.from_text("custom says", role="model")))


# -- the picker on hand-made histories (R-XFER-8) --------------------------------------------------


def test_no_events_or_only_user_events_goes_to_root_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick() == "root"
    assert tree.pick(user(), user()) == "root"


def test_last_agent_event_by_root_goes_to_root_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), said("sub1"), user(), said("root"), user()) == "root"


def test_transferable_sub_agent_keeps_the_conversation_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), said("sub1"), user()) == "sub1"
    assert tree.pick(user(), said("sub1_1"), user()) == "sub1_1"  # LLM ancestors all the way


def test_non_transferable_agents_are_skipped_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), said("single"), user()) == "root"
    assert tree.pick(user(), said("s_a"), user()) == "root"  # under a SequentialAgent
    assert tree.pick(user(), said("custom"), user()) == "root"  # not an LLM agent
    # Skipping goes on to older events: here a transferable sub.
    assert tree.pick(user(), said("sub2"), user(), said("single"), user()) == "sub2"


def test_an_ancestor_that_disallows_going_up_blocks_its_descendants_r_xfer_8() -> None:
    tree = Tree()
    tree.sub1.disallow_transfer_to_parent = True
    assert tree.pick(user(), said("sub1_1"), user()) == "root"


def test_the_roots_own_flag_counts_too_r_xfer_8() -> None:
    """ "Every ancestor up to the root" includes the root (as ADK's
    ``is_transferable_across_agent_tree`` walks it)."""
    tree = Tree()
    tree.root.disallow_transfer_to_parent = True
    assert tree.pick(user(), said("sub1"), user()) == "root"
    assert tree.pick(user(), said("root"), user()) == "root"


def test_unknown_author_is_skipped_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), said("root"), said("ghost"), user()) == "root"
    assert tree.pick(user(), said("sub2"), said("ghost"), user()) == "sub2"
    assert tree.pick(user(), said("ghost"), user()) == "root"


def test_content_less_error_events_are_skipped_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), said("root"), failed("sub1"), user()) == "root"
    # An error event that carries content is an ordinary event of its author.
    with_content = Event(
        author="sub1",
        content=Content.from_text("partial answer", role="model"),
        error_code="SAFETY",
    )
    assert tree.pick(user(), said("root"), with_content, user()) == "sub1"


def test_transfer_to_a_transferable_target_that_never_replied_r_xfer_8() -> None:
    """[2.13] The target of a committed transfer answers next, even if it failed before replying."""
    tree = Tree()
    handoff = said("root", transfer_to_agent="sub2")
    assert tree.pick(user(), handoff, failed("sub2"), user()) == "sub2"


def test_transfer_to_a_non_transferable_target_falls_back_to_the_author_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), said("root", transfer_to_agent="single"), user()) == "root"
    assert tree.pick(user(), said("sub1", transfer_to_agent="seq"), user()) == "sub1"


def test_transfer_to_an_agent_outside_the_authors_targets_is_ignored_r_xfer_8() -> None:
    """``single`` may not hand off to its peer sub2, so its recorded transfer does not count."""
    tree = Tree()
    assert tree.pick(user(), said("single", transfer_to_agent="sub2"), user()) == "root"
    assert tree.pick(user(), said("root", transfer_to_agent="ghost"), user()) == "root"


def test_function_response_goes_to_the_calls_author_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), called("sub1", "c1"), answered("c1")) == "sub1"


def test_function_response_routing_ignores_transferability_r_xfer_8() -> None:
    tree = Tree()
    assert tree.pick(user(), called("single", "c1"), answered("c1")) == "single"
    assert tree.pick(user(), called("s_a", "c1"), answered("c1")) == "s_a"
    assert tree.pick(user(), called("custom", "c1"), answered("c1")) == "custom"


def test_function_response_takes_precedence_over_newer_events_r_xfer_8() -> None:
    tree = Tree()
    history = [user(), called("sub2", "c2"), said("sub2"), user(), said("root"), answered("c2")]
    assert tree.pick(*history) == "sub2"


def test_several_responses_route_by_the_first_one_r_xfer_8() -> None:
    tree = Tree()
    history = [user(), called("sub1", "c1"), called("sub2", "c2"), answered("c2", "c1")]
    assert tree.pick(*history) == "sub2"


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([user(), said("root"), answered("nowhere")], id="no-matching-call"),
        pytest.param([user(), called("ghost", "c1"), answered("c1")], id="caller-not-in-tree"),
        pytest.param(
            [user(), called("sub1", "c1"), said("root"), user()], id="last-event-not-a-response"
        ),
    ],
)
def test_unmatched_function_response_falls_through_to_the_scan_r_xfer_8(
    history: list[Event],
) -> None:
    assert Tree().pick(*history) == "root"


def test_a_non_llm_root_is_picked_unless_a_response_routes_elsewhere_r_xfer_8() -> None:
    a1 = llm("a1")
    root = SequentialAgent(name="seq", sub_agents=[a1, llm("a2")])
    assert agent_to_run(root, [user(), said("a1"), user()]) is root
    assert agent_to_run(root, [user(), called("a1", "c1"), answered("c1")]) is a1


# -- whole turns -----------------------------------------------------------------------------------


def answer(call_id: str, name: str, response: dict[str, Any]) -> Content:
    return Content(role="user", parts=[Part.from_function_response(name, response, id=call_id)])


async def turn_authors(session: Chat, message: Content | str = "next") -> list[str]:
    return [e.author for e in await session.send(message)]


async def test_auto_to_auto_next_turn_goes_to_the_sub_agent_r_xfer_8() -> None:
    sub = llm("sub", ["response1", "response2"])
    root = llm("root", [to("sub")], sub_agents=[sub])
    session = await Chat.start(root)
    assert await turn_authors(session, "one") == ["root", "root", "sub"]
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("sub", "response2")]


async def test_auto_to_single_next_turn_goes_back_to_root_r_xfer_8() -> None:
    sub = llm(
        "sub", ["response1"], disallow_transfer_to_parent=True, disallow_transfer_to_peers=True
    )
    root = llm("root", [to("sub"), "root answers"], sub_agents=[sub])
    session = await Chat.start(root)
    await session.send("one")
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("root", "root answers")]


async def test_auto_to_auto_to_single_next_turn_goes_to_the_middle_agent_r_xfer_8() -> None:
    sub1_1 = llm(
        "sub1_1", ["response1"], disallow_transfer_to_parent=True, disallow_transfer_to_peers=True
    )
    sub1 = llm("sub1", [to("sub1_1"), "response2"], sub_agents=[sub1_1])
    root = llm("root", [to("sub1")], sub_agents=[sub1])
    session = await Chat.start(root)
    assert await turn_authors(session, "one") == ["root", "root", "sub1", "sub1", "sub1_1"]
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("sub1", "response2")]


@pytest.mark.parametrize("workflow", [SequentialAgent, LoopAgent])
async def test_after_a_workflow_target_the_next_turn_goes_to_root_r_xfer_8(
    workflow: type[BaseAgent],
) -> None:
    x1 = llm("x1", ["one"])
    kwargs: dict[str, Any] = {"max_iterations": 1} if workflow is LoopAgent else {}
    flow = workflow(name="flow", sub_agents=[x1], **kwargs)
    root = llm("root", [to("flow"), "root again"], sub_agents=[flow])
    session = await Chat.start(root)
    assert await turn_authors(session, "one") == ["root", "root", "x1"]
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("root", "root again")]


async def test_peer_transfer_next_turn_goes_to_the_peer_s_xf_1() -> None:
    c = llm("c", ["c answers", "c again"])
    b = llm("b", [to("c")])
    root = llm("root", [to("b")], sub_agents=[b, c])
    session = await Chat.start(root)
    first = await session.send("one")
    assert kinds(first) == [
        "FC:transfer_to_agent",
        "FR:transfer_to_agent",
        "FC:transfer_to_agent",
        "FR:transfer_to_agent",
        "T:c answers",
    ]
    assert [e.author for e in first] == ["root", "root", "b", "b", "c"]
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("c", "c again")]


async def test_sub_to_parent_next_turn_goes_to_the_parent_s_xf_4() -> None:
    b = llm("b", ["b answers", to("root")])
    root = llm("root", [to("b"), "root answers", "root again"], sub_agents=[b])
    session = await Chat.start(root)
    await session.send("one")
    second = await session.send("two")
    assert [(e.author, k) for e, k in zip(second, kinds(second), strict=True)] == [
        ("b", "FC:transfer_to_agent"),
        ("b", "FR:transfer_to_agent"),
        ("root", "T:root answers"),
    ]
    third = await session.send("three")
    assert [(e.author, e.text) for e in third] == [("root", "root again")]


async def test_a_transfer_target_that_failed_answers_next_r_xfer_8() -> None:
    sub = llm("sub", [RuntimeError("sub is down"), "sub is back"])
    root = llm("root", [to("sub")], sub_agents=[sub])
    session = await Chat.start(root)
    with pytest.raises(RuntimeError, match="sub is down"):
        await session.send("one")
    stored = await session.stored()
    assert (stored[-1].author, stored[-1].error_code) == ("sub", "RuntimeError")
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("sub", "sub is back")]


async def test_events_of_an_agent_not_in_the_tree_are_skipped_r_xfer_8() -> None:
    """History written by an older version of the app names an agent that no longer exists."""
    sub = llm("sub", ["response1", "response2"])
    root = llm("root", [to("sub")], sub_agents=[sub])
    session = await Chat.start(root)
    await session.send("one")
    stored = await session.session()
    await session.runner.session_service.append_event(stored, said("retired_agent", "old"))
    turn = await session.send("two")
    assert [(e.author, e.text) for e in turn] == [("sub", "response2")]


async def test_user_function_response_goes_to_a_non_transferable_caller_r_xfer_8() -> None:
    """The call's author answers its response even though it would not keep the conversation."""

    def approve() -> None:
        return None

    sub = llm(
        "sub",
        [fc("approve"), "approved by sub"],
        tools=[LongRunningFunctionTool(approve)],
        disallow_transfer_to_parent=True,
    )
    root = llm("root", [to("sub"), "root takes the next plain message"], sub_agents=[sub])
    session = await Chat.start(root)
    first = await session.send("one")
    call_id = first[-1].get_function_calls()[0].id
    assert call_id is not None
    turn = await session.send(answer(call_id, "approve", {"ok": True}))
    assert [(e.author, e.text) for e in turn] == [("sub", "approved by sub")]
    turn = await session.send("three")
    assert [(e.author, e.text) for e in turn] == [("root", "root takes the next plain message")]


async def test_function_response_routing_beats_a_newer_root_reply_r_xfer_8() -> None:
    def approve() -> None:
        return None

    sub = llm("sub", [fc("approve"), "sub finishes"], tools=[LongRunningFunctionTool(approve)])
    root = llm("root", [to("sub"), "root replies"], sub_agents=[sub])
    session = await Chat.start(root)
    first = await session.send("one")
    call_id = first[-1].get_function_calls()[0].id
    assert call_id is not None
    # Meanwhile the history gains a newer root event (a plain message routed to sub would not
    # produce one, so it is written directly).
    stored = await session.session()
    await session.runner.session_service.append_event(stored, said("root", "root interjects"))
    turn = await session.send(answer(call_id, "approve", {"ok": True}))
    assert [(e.author, e.text) for e in turn] == [("sub", "sub finishes")]
