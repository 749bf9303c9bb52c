"""AgentTool: an agent called like a function (R-AT-1..9, S-AT-1..4, R-PLG-11, R-RUN-10).

Each call is a child run with its own in-memory session seeded from the parent's state; the
child's state and artifact changes come back on the parent's function-response event, and the
child's own events never reach the parent's consumer or session. The child run is nested in the
tool call's task, so cancelling the parent cancels it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pydantic
import pytest
import trio
import trio.testing

from tests.agents.llm_helpers import SSE, Chat, call, calls, chat, fc, kinds, responses
from trio_agents import (
    BaseAgent,
    CallbackContext,
    ConfigurationError,
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    LlmCallLimitError,
    Part,
    ReadonlyContext,
    RunConfig,
    Runner,
    SequentialAgent,
    ToolContext,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel
from trio_agents.tools import AgentTool, LongRunningFunctionTool


@attrs.define
class Ask:
    topic: str
    depth: int = 1


@attrs.define
class Verdict:
    v: int


def child_agent(script: list[Any], **kwargs: Any) -> LlmAgent:
    kwargs.setdefault("description", "Answers child questions.")
    return LlmAgent(name="child", model=ScriptedModel(script), **kwargs)


def parent_agent(script: list[Any], tool: AgentTool, **kwargs: Any) -> LlmAgent:
    return LlmAgent(name="root", model=ScriptedModel(script), tools=[tool], **kwargs)


def model_of(agent: LlmAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def first_user_text(model: ScriptedModel) -> str:
    content = model.requests[0].contents[0]
    assert content.role == "user"
    assert content.parts[0].text is not None
    return content.parts[0].text


# -- the declaration (R-AT-1) ----------------------------------------------------------------------


def test_declaration_without_input_schema_takes_a_request_string_r_at_1() -> None:
    declaration = AgentTool(child_agent([])).declaration()
    assert declaration is not None
    assert declaration.name == "child"
    assert declaration.description == "Answers child questions."
    assert declaration.parameters == {
        "type": "object",
        "properties": {"request": {"type": "string"}},
        "required": ["request"],
    }


def test_declaration_from_the_input_schema_r_at_1() -> None:
    declaration = AgentTool(child_agent([], input_schema=Ask)).declaration()
    assert declaration is not None
    params: Any = declaration.parameters
    assert set(params["properties"]) == {"topic", "depth"}
    assert params["properties"]["topic"] == {"type": "string"}
    assert params["required"] == ["topic"]

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    declaration = AgentTool(child_agent([], input_schema=schema)).declaration()
    assert declaration is not None
    assert declaration.parameters == schema


def test_composite_agent_declares_its_first_sub_agents_input_schema_r_at_1() -> None:
    first = child_agent([], input_schema=Ask)
    seq = SequentialAgent(name="pipeline", description="Two steps.", sub_agents=[first])
    declaration = AgentTool(seq).declaration()
    assert declaration is not None
    assert (declaration.name, declaration.description) == ("pipeline", "Two steps.")
    params: Any = declaration.parameters
    assert set(params["properties"]) == {"topic", "depth"}


async def test_the_parent_model_is_offered_the_declaration_r_at_1() -> None:
    tool = AgentTool(child_agent(["x"]))
    parent = parent_agent(["no call"], tool)
    await chat(parent)
    (offered,) = model_of(parent).requests[0].tools
    assert offered == tool.declaration()


# -- the child's input (R-AT-2) --------------------------------------------------------------------


async def test_request_text_becomes_the_childs_user_message_r_at_2() -> None:
    child = child_agent(["child answer"])
    await chat(parent_agent([fc("child", {"request": "do it"}), "done"], AgentTool(child)))
    contents = model_of(child).requests[0].contents
    assert contents == [Content(role="user", parts=[Part(text="do it")])]


async def test_without_a_request_the_arguments_travel_as_json_r_at_2() -> None:
    child = child_agent(["child answer"])
    await chat(parent_agent([fc("child", {"a": 1, "b": "x"}), "done"], AgentTool(child)))
    assert json.loads(first_user_text(model_of(child))) == {"a": 1, "b": "x"}


async def test_input_schema_arguments_are_validated_and_sent_as_json_r_at_2() -> None:
    child = child_agent(["child answer"], input_schema=Ask)
    await chat(parent_agent([fc("child", {"topic": "cats"}), "done"], AgentTool(child)))
    assert json.loads(first_user_text(model_of(child))) == {"topic": "cats", "depth": 1}


class Order(pydantic.BaseModel):
    item: str
    qty: int = 1
    note: str | None = None


async def test_pydantic_input_and_output_schemas() -> None:
    # ADK 2.13 declares the tool by the input model's schema, sends the child the validated
    # input as model_dump_json(exclude_none=True) and parses the child's answer with the output
    # model.
    child = child_agent(['{"item": "pen", "qty": 3}'], input_schema=Order, output_schema=Order)
    tool = AgentTool(child)
    assert tool.declaration().parameters == Order.model_json_schema()
    events = await chat(parent_agent([fc("child", {"item": "pén", "qty": 3}), "done"], tool))
    assert first_user_text(model_of(child)) == '{"item":"pén","qty":3}'
    assert responses(events[1]) == [("child", {"item": "pen", "qty": 3})]


async def test_input_schema_mismatch_fails_the_call_r_at_2() -> None:
    child = child_agent(["never"], input_schema=Ask)
    with pytest.raises(ValueError, match="agent tool 'child'"):
        await chat(parent_agent([fc("child", {"depth": 2}), "never"], AgentTool(child)))
    assert model_of(child).requests == []


# -- the child run (R-AT-3, R-AT-4, R-AT-9) --------------------------------------------------------


async def test_full_round_trip_s_at_1() -> None:
    async def work(tool_context: ToolContext) -> str:
        tool_context.state["child_key"] = "v"
        tool_context.state["temp:child_temp"] = "t"
        await tool_context.save_artifact("f.txt", Part.from_text("FILE"))
        return "worked"

    child = child_agent([fc("work"), "child final answer"], tools=[work], output_key="child_out")
    parent = parent_agent([fc("child", {"request": "do it"}), "summary"], AgentTool(child))
    session = await Chat.start(parent)
    events = await session.send("please")

    assert [e.author for e in events] == ["root", "root", "root"]
    assert kinds(events) == ["FC:child", "FR:child", "T:summary"]
    answer = events[1]
    assert responses(answer) == [("child", {"result": "child final answer"})]
    assert dict(answer.actions.state_delta) == {"child_key": "v", "child_out": "child final answer"}
    assert dict(answer.actions.artifact_delta) == {"f.txt": 0}
    assert first_user_text(model_of(child)) == "do it"
    # The parent model saw the child's answer as the tool result.
    seen = model_of(parent).requests[1].contents[-1].parts[0].function_response
    assert seen is not None
    assert dict(seen.response) == {"result": "child final answer"}

    stored = await session.session()
    assert [e.author for e in stored.events] == ["user", "root", "root", "root"]
    assert stored.state == {"child_key": "v", "child_out": "child final answer"}
    runner = session.runner
    part = await runner.artifact_service.load_artifact(
        app_name=runner.app_name, user_id="u", session_id=session.session_id, filename="f.txt"
    )
    assert part == Part.from_text("FILE")


async def test_a_child_saving_an_artifact_without_a_parent_service_is_a_configuration_error() -> (
    None
):
    async def work(tool_context: ToolContext) -> str:
        await tool_context.save_artifact("f.txt", Part.from_text("FILE"))
        return "worked"

    child = child_agent([fc("work"), "never"], tools=[work])
    parent = parent_agent([fc("child", {"request": "do it"}), "never"], AgentTool(child))
    runner = Runner(agent=parent, app_name="app", session_service=InMemorySessionService())
    with pytest.raises(ConfigurationError, match="Artifact service is not initialized"):
        await chat(parent, runner=runner)


async def test_child_runs_in_its_own_session_for_the_same_app_and_user_r_at_3() -> None:
    seen: list[tuple[str, str, str, int]] = []

    def where(tool_context: ToolContext) -> str:
        session = tool_context.session
        seen.append((session.app_name, session.user_id, session.id, len(session.events)))
        return "here"

    child = child_agent([fc("where"), "child done"], tools=[where])
    parent = parent_agent([fc("child", {"request": "where?"}), "done"], AgentTool(child))
    runner = InMemoryRunner(parent, app_name="my_app")
    session = await Chat.start(parent, runner=runner, user_id="alice")
    await session.send("first")
    ((app, user, child_session_id, child_events),) = seen
    assert (app, user) == ("my_app", "alice")
    assert child_session_id != session.session_id
    assert child_events == 2  # the child's own user message and model call only
    # Nothing of the child run is stored in the parent app's session service.
    sessions = await runner.session_service.list_sessions(app_name="my_app", user_id="alice")
    assert [s.id for s in sessions] == [session.session_id]


async def test_child_state_starts_from_the_parent_state_minus_internal_and_temp_s_at_4() -> None:
    initial: list[dict[str, Any]] = []

    def record(callback_context: CallbackContext) -> None:
        initial.append(dict(ReadonlyContext(callback_context.invocation_context).state))

    def set_temp(callback_context: CallbackContext) -> None:
        callback_context.state["temp:t"] = 1

    child = child_agent(["child answer"], before_agent_callback=record)
    parent = parent_agent(
        [fc("child", {"request": "x"}), "done"], AgentTool(child), before_agent_callback=set_temp
    )
    state = {"k": 1, "user:u": 2, "app:a": 3, "_adk_x": 4}
    await chat(parent, state=state)
    assert initial == [{"k": 1, "app:a": 3, "user:u": 2}]


async def test_child_events_are_neither_delivered_nor_stored_r_at_9() -> None:
    def step(n: int) -> int:
        return n

    child = child_agent([fc("step", {"n": 1}), fc("step", {"n": 2}), "child done"], tools=[step])
    parent = parent_agent([fc("child", {"request": "go"}), "parent done"], AgentTool(child))
    session = await Chat.start(parent)
    delivered = await session.send()
    assert kinds(delivered) == ["FC:child", "FR:child", "T:parent done"]
    assert {e.author for e in delivered} == {"root"}
    assert [e.id for e in await session.stored()] == [e.id for e in delivered]
    assert len(model_of(child).requests) == 3


async def test_child_runs_unstreamed_even_when_the_parent_streams_r_at_3() -> None:
    class Recording(ScriptedModel):
        streamed: int = 0

        @asynccontextmanager
        async def stream(self, request: LlmRequest) -> AsyncIterator[Any]:
            self.streamed += 1
            async with super().stream(request) as chunks:
                yield chunks

    child_model = Recording(["child answer"])
    parent_model = Recording([fc("child", {"request": "x"}), "done"])
    child = LlmAgent(name="child", model=child_model)
    parent = LlmAgent(name="root", model=parent_model, tools=[AgentTool(child)])
    events = await chat(parent, run_config=SSE)
    assert responses(next(e for e in events if e.get_function_responses())) == [
        ("child", {"result": "child answer"})
    ]
    assert parent_model.streamed == 2
    assert child_model.streamed == 0
    assert len(child_model.requests) == 1


def child_tool() -> str:
    return "ok"


async def test_child_has_its_own_call_budget_under_the_parent_limit_r_run_10() -> None:
    child = child_agent([fc("child_tool"), "child done"], tools=[child_tool])
    parent = parent_agent([fc("child", {"request": "x"}), "done"], AgentTool(child))
    events = await chat(parent, run_config=RunConfig(max_llm_calls=2))
    assert kinds(events) == ["FC:child", "FR:child", "T:done"]  # 2 + 2 calls, each under 2

    greedy = child_agent([fc("child_tool"), fc("child_tool"), "never"], tools=[child_tool])
    parent = parent_agent([fc("child", {"request": "x"}), "never"], AgentTool(greedy))
    with pytest.raises(LlmCallLimitError):
        await chat(parent, run_config=RunConfig(max_llm_calls=2))
    assert len(model_of(greedy).requests) == 2


async def test_child_run_uses_the_parents_custom_metadata_r_at_3() -> None:
    class Metadata(BasePlugin):
        def __init__(self) -> None:
            super().__init__(name="metadata")
            self.seen: list[tuple[str, Any]] = []

        async def on_event_callback(
            self, *, invocation_context: InvocationContext, event: Event
        ) -> None:
            self.seen.append((event.author, event.custom_metadata))

    plugin = Metadata()
    child = child_agent(["child answer"])
    parent = parent_agent([fc("child", {"request": "x"}), "done"], AgentTool(child))
    config = RunConfig(custom_metadata={"tenant": "t1"})
    await chat(parent, runner=InMemoryRunner(parent, plugins=[plugin]), run_config=config)
    assert ("child", {"tenant": "t1"}) in plugin.seen
    assert all(metadata == {"tenant": "t1"} for _, metadata in plugin.seen)


# -- what comes back (R-AT-5..8) -------------------------------------------------------------------


async def test_child_state_is_live_in_the_parent_right_after_the_call_r_at_5() -> None:
    def remember(tool_context: ToolContext) -> str:
        tool_context.state["fact"] = "from child"
        return "ok"

    child = child_agent([fc("remember"), "remembered"], tools=[remember])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "done"], AgentTool(child), instruction="Fact: {fact?}."
    )
    await chat(parent)
    systems = [r.system_instruction or "" for r in model_of(parent).requests]
    assert systems[0].startswith("Fact: .")
    assert systems[1].startswith("Fact: from child.")


async def test_child_reads_and_writes_the_parents_artifacts_r_at_6() -> None:
    loaded: list[Part | None] = []
    listed: list[list[str]] = []

    async def use_files(tool_context: ToolContext) -> str:
        loaded.append(await tool_context.load_artifact("parent.txt"))
        await tool_context.save_artifact("parent.txt", Part.from_text("v1 by child"))
        await tool_context.save_artifact("child.txt", Part.from_text("new"))
        listed.append(await tool_context.list_artifacts())
        return "ok"

    async def seed(callback_context: CallbackContext) -> None:
        await callback_context.save_artifact("parent.txt", Part.from_text("v0 by parent"))

    child = child_agent([fc("use_files"), "child done"], tools=[use_files])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "done"], AgentTool(child), before_agent_callback=seed
    )
    session = await Chat.start(parent)
    events = await session.send()
    assert loaded == [Part.from_text("v0 by parent")]
    assert listed == [["child.txt", "parent.txt"]]
    answer = next(e for e in events if e.get_function_responses())
    assert dict(answer.actions.artifact_delta) == {"parent.txt": 1, "child.txt": 0}
    runner = session.runner
    keys = await runner.artifact_service.list_artifact_keys(
        app_name=runner.app_name, user_id="u", session_id=session.session_id
    )
    assert keys == ["child.txt", "parent.txt"]


async def test_result_is_the_last_contents_non_thought_text_joined_r_at_7() -> None:
    final = LlmResponse(
        content=Content(
            role="model",
            parts=[
                Part(text="hidden", thought=True),
                Part.from_text("line 1"),
                Part(text="line 2"),
            ],
        ),
        finish_reason="STOP",
    )
    child = child_agent([final])
    events = await chat(parent_agent([fc("child", {"request": "x"}), "done"], AgentTool(child)))
    assert responses(events[1]) == [("child", {"result": "line 1\nline 2"})]


async def test_callbacks_see_the_childs_text_as_the_tool_result() -> None:
    # ADK 2.13's AgentTool answers with the child's text itself (a string); the model sees it
    # as {"result": text}. Empty text parts are left out of the joined text.
    seen: list[Any] = []

    def after_tool(tool: Any, args: Any, tool_context: Any, tool_response: Any) -> None:
        seen.append(tool_response)

    final = LlmResponse(
        content=Content(role="model", parts=[Part(text="a"), Part(text=""), Part(text="b")])
    )
    child = child_agent([final])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "done"], AgentTool(child), after_tool_callback=after_tool
    )
    events = await chat(parent)
    assert seen == ["a\nb"]
    assert responses(events[1]) == [("child", {"result": "a\nb"})]


async def test_output_schema_answer_is_parsed_into_the_result_s_at_3() -> None:
    child = child_agent(['{"v": 7}'], output_schema=Verdict, output_key="child_out")
    events = await chat(parent_agent([fc("child", {"request": "x"}), "done"], AgentTool(child)))
    assert responses(events[1]) == [("child", {"v": 7})]
    assert dict(events[1].actions.state_delta) == {"child_out": {"v": 7}}


async def test_error_without_content_becomes_the_result_r_at_7() -> None:
    refusal = LlmResponse(error_code="SAFETY", error_message="blocked by policy")
    child = child_agent([refusal])
    events = await chat(parent_agent([fc("child", {"request": "x"}), "done"], AgentTool(child)))
    assert responses(events[1]) == [("child", {"result": "blocked by policy"})]


async def test_a_child_that_says_nothing_gives_an_empty_result_r_at_7() -> None:
    class Silent(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await ctx.emit(Event(actions=EventActions(state_delta={"silent": True})))

    parent = parent_agent([fc("quiet", {"request": "x"}), "done"], AgentTool(Silent(name="quiet")))
    events = await chat(parent)
    assert responses(events[1]) == [("quiet", {"result": ""})]
    assert dict(events[1].actions.state_delta) == {"silent": True}


async def test_an_unresolved_long_running_call_in_the_child_pauses_the_parent() -> None:
    """ADK returns an error string here (R-AT-7); the child's open call is given to the client
    instead, in the parent session, and the parent stops there (tests/test_resume.py)."""

    def approve() -> None:
        return None

    child = child_agent([fc("approve")], tools=[LongRunningFunctionTool(approve)])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "never"],
        AgentTool(child, skip_summarization=True),
    )
    events = await chat(parent)
    assert kinds(events) == ["FC:child", "FR:child", "FC:approve"]
    ((_, result),) = responses(events[1])
    assert result["status"] == "pending"
    assert not events[1].is_final_response()  # skip_summarization is withdrawn
    assert events[2].long_running_tool_ids == {c.id for c in events[2].get_function_calls() if c.id}
    assert events[2].author == "root"
    assert len(model_of(parent).requests) == 1


async def test_long_running_call_answered_inside_the_child_is_fine_r_at_7() -> None:
    def start() -> dict[str, str]:
        return {"status": "pending"}

    child = child_agent([fc("start"), "started it"], tools=[LongRunningFunctionTool(start)])
    events = await chat(parent_agent([fc("child", {"request": "x"}), "done"], AgentTool(child)))
    assert responses(events[1]) == [("child", {"result": "started it"})]


async def test_skip_summarization_makes_the_response_final_s_at_2() -> None:
    child = child_agent(["child answer"])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "never"], AgentTool(child, skip_summarization=True)
    )
    session = await Chat.start(parent)
    events = await session.send()
    assert kinds(events) == ["FC:child", "FR:child"]
    assert events[-1].is_final_response()
    assert events[-1].actions.skip_summarization
    assert responses(events[-1]) == [("child", {"result": "child answer"})]
    assert len(model_of(parent).requests) == 1


async def test_skip_summarization_appends_the_answer_as_text_s_at_2() -> None:
    child = child_agent(["child answer"])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "never"], AgentTool(child, skip_summarization=True)
    )
    events = await chat(parent)
    content = events[-1].content
    assert content is not None
    assert [p.function_response is not None for p in content.parts] == [True, False]
    assert content.parts[1].text == "child answer"


async def test_two_calls_in_one_turn_run_separate_children_r_at_3() -> None:
    def echo(tool_context: ToolContext) -> str:
        request = tool_context.session.events[0].content
        assert request is not None
        text = request.parts[0].text
        tool_context.state[f"saw_{text}"] = True
        return f"echo {text}"

    child = LlmAgent(
        name="child",
        model=ScriptedModel(lambda request: fc("echo") if len(request.contents) == 1 else "ok"),
        tools=[echo],
    )
    parent = parent_agent(
        [calls(call("child", {"request": "a"}), call("child", {"request": "b"})), "done"],
        AgentTool(child),
    )
    events = await chat(parent)
    assert responses(events[1]) == [("child", {"result": "ok"}), ("child", {"result": "ok"})]
    assert dict(events[1].actions.state_delta) == {"saw_a": True, "saw_b": True}


async def test_a_failing_child_fails_the_parent_call_r_at_3() -> None:
    child = child_agent([RuntimeError("child exploded")])
    parent = parent_agent([fc("child", {"request": "x"}), "never"], AgentTool(child))
    session = await Chat.start(parent)
    with pytest.raises(RuntimeError, match="child exploded"):
        await session.send()
    stored = await session.stored()
    # Only the parent's FC, its closing response and the error event are in the parent session;
    # the error names the parent's agent, not the child (which is not in the parent's tree).
    assert kinds(stored) == ["FC:child", "FR:child", "E:RuntimeError"]
    assert [e.author for e in stored] == ["root", "root", "root"]
    assert responses(stored[1])[0][1]["error"] == "cancelled"


async def test_a_parent_tool_error_callback_can_recover_a_failing_child_r_at_3() -> None:
    def recover(tool: Any, args: Mapping[str, Any], tool_context: ToolContext, error: Exception):
        return {"recovered": str(error)}

    child = child_agent([RuntimeError("child exploded")])
    parent = parent_agent(
        [fc("child", {"request": "x"}), "carried on"],
        AgentTool(child),
        on_tool_error_callback=recover,
    )
    events = await chat(parent)
    assert kinds(events) == ["FC:child", "FR:child", "T:carried on"]
    assert responses(events[1]) == [("child", {"recovered": "child exploded"})]


# -- plugins (R-PLG-11) ----------------------------------------------------------------------------


class RunLog(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="run_log")
        self.log: list[str] = []

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: Content
    ) -> Content | None:
        self.log.append(f"message:{user_message.parts[0].text}")
        return None

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self.log.append(f"before_run:{invocation_context.agent.name}")

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self.log.append(f"after_run:{invocation_context.agent.name}")


@pytest.mark.parametrize("include_plugins", [True, False])
async def test_child_inherits_the_parents_plugins_unless_told_not_to_r_plg_11(
    include_plugins: bool,
) -> None:
    plugin = RunLog()
    child = child_agent(["child answer"])
    parent = parent_agent(
        [fc("child", {"request": "ask child"}), "done"],
        AgentTool(child, include_plugins=include_plugins),
    )
    await chat(parent, "ask parent", runner=InMemoryRunner(parent, plugins=[plugin]))
    child_part = ["message:ask child", "before_run:child", "after_run:child"]
    assert plugin.log == [
        "message:ask parent",
        "before_run:root",
        *(child_part if include_plugins else []),
        "after_run:root",
    ]


# -- cancellation ----------------------------------------------------------------------------------


async def test_cancelling_the_parent_cancels_the_child_run() -> None:
    state = {"started": False, "cancelled": False}

    async def hang() -> str:
        state["started"] = True
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            state["cancelled"] = True
            raise
        raise AssertionError("unreachable")

    child = child_agent([fc("hang"), "never"], tools=[hang])
    parent = parent_agent([fc("child", {"request": "x"}), "never"], AgentTool(child))
    session = await Chat.start(parent)
    delivered: list[Event] = []
    runner = session.runner
    async with runner.run(user_id="u", session_id=session.session_id, new_message="go") as events:
        async with trio.open_nursery() as nursery:

            async def stop_when_stuck() -> None:
                await trio.testing.wait_all_tasks_blocked()
                events.cancel("operator pressed stop")

            nursery.start_soon(stop_when_stuck)
            delivered.extend([e async for e in events])
        assert events.cancelled
    assert state == {"started": True, "cancelled": True}
    assert kinds(delivered) == ["FC:child", "FR:child"]
    assert len(model_of(child).requests) == 1
    assert len(model_of(parent).requests) == 1
    stored = await session.stored()
    assert kinds(stored) == ["FC:child", "FR:child"]  # the parent's call is closed
    assert stored == delivered
    ((name, response),) = responses(stored[1])
    assert name == "child"
    assert response["error"] == "cancelled"
    assert stored[1].get_function_responses()[0].id == delivered[0].get_function_calls()[0].id
