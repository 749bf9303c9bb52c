"""Instruction templating (R-TPL, S-TPL-1) as seen in the model's system instruction."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.llm_helpers import Chat, chat, fc, identity, kinds
from trio_agents import (
    ConfigurationError,
    LlmAgent,
    Part,
    ReadonlyContext,
    RunConfig,
    Runner,
    SequentialAgent,
    TemplateKeyError,
    ToolContext,
)
from trio_agents.agents import inject_session_state
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel

STATE = {"name": "Bob", "n": 3, "none": None, "app:a": "A", "user:b": "B", "d": {"k": 1}}


async def rendered(instruction: Any, **kwargs: Any) -> str:
    """The system instruction minus the identity sentence, after one run."""
    model = ScriptedModel(["ok"])
    agent = LlmAgent(name="a", model=model, instruction=instruction, **kwargs)
    session = await Chat.start(agent, state=STATE)
    artifacts = session.runner.artifact_service
    await artifacts.save_artifact(
        app_name=session.runner.app_name,
        user_id="u",
        session_id=session.session_id,
        filename="f.txt",
        artifact=Part.from_text("FILE"),
    )
    await session.send(state_delta={"temp:t": "T"})
    system = model.requests[0].system_instruction
    assert system is not None
    suffix = identity("a")
    assert system.endswith(suffix)
    return system[: -len(suffix)].removesuffix("\n\n")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{name}", "Bob"),
        ("{ name }", "Bob"),
        ("{{name}}", "Bob"),
        ("{{{name}}}", "Bob"),
        ("Hi {name}, n={n}.", "Hi Bob, n=3."),
        ("${name}", "${name}"),
        ("\\{name}", "\\{name}"),
        ("{n}", "3"),
        ("[{none}]", "[]"),
        ("{d}", "{'k': 1}"),
        ("{app:a}/{user:b}/{temp:t}", "A/B/T"),
        ("{bad:x}", "{bad:x}"),
        ("{not valid}", "{not valid}"),
        ('{"json": 1}', '{"json": 1}'),
        ("{a.b}", "{a.b}"),
        ("{}", "{}"),
        ("{1abc}", "{1abc}"),
        ("[{missing?}]", "[]"),
        ("{name?}", "Bob"),
        ("{artifact.f.txt}", "FILE"),
        ("[{artifact.nope?}]", "[]"),
    ],
)
async def test_template_table_s_tpl_1(template: str, expected: str) -> None:
    assert await rendered(template) == expected


async def test_a_missing_variable_fails_the_run_s_tpl_1() -> None:
    model = ScriptedModel(["never"])
    session = await Chat.start(LlmAgent(name="a", model=model, instruction="Hi {missing}."))
    with pytest.raises(TemplateKeyError) as info:
        await session.send()
    assert str(info.value) == "Context variable not found: `missing` in agent 'a'."
    assert isinstance(info.value, KeyError)
    assert (info.value.key, info.value.agent) == ("missing", "a")
    assert model.requests == []
    stored = await session.stored()
    assert [(e.author, e.error_code) for e in stored] == [("a", "TemplateKeyError")]


async def test_a_missing_artifact_fails_the_run_s_tpl_1() -> None:
    model = ScriptedModel(["never"])
    session = await Chat.start(LlmAgent(name="a", model=model, instruction="{artifact.nope}"))
    with pytest.raises(TemplateKeyError) as info:
        await session.send()
    # ADK 2.13 raises KeyError("Artifact 'nope' not found in agent 'a'.") here.
    assert str(info.value) == "Artifact 'nope' not found in agent 'a'."
    assert info.value.key == "artifact.nope"
    assert model.requests == []


async def test_an_artifact_placeholder_needs_an_artifact_service_s_tpl_1() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel(["never"]), instruction="{artifact.f.txt}")
    runner = Runner(agent=agent, app_name="app", session_service=InMemorySessionService())
    session = await Chat.start(agent, runner=runner)
    with pytest.raises(ConfigurationError, match="Artifact service is not initialized"):
        await session.send()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_an_instruction_provider_bypasses_templating_r_tpl(asynchronous: bool) -> None:
    seen: list[Any] = []

    def provide(ctx: ReadonlyContext) -> str:
        seen.append((ctx.agent_name, dict(ctx.state)["name"]))
        return "Literal {name} and {missing}."

    async def provide_async(ctx: ReadonlyContext) -> str:
        return provide(ctx)

    assert await rendered(provide_async if asynchronous else provide) == (
        "Literal {name} and {missing}."
    )
    assert seen == [("a", "Bob")]


async def test_contexts_name_the_user_and_the_run_config() -> None:
    # ADK's contexts (instruction providers, callbacks, tools) expose user_id and run_config.
    seen: list[tuple[str, Any]] = []

    def provide(ctx: ReadonlyContext) -> str:
        seen.append((ctx.user_id, ctx.run_config.max_llm_calls))
        return "Be brief."

    def before_model(callback_context: Any, llm_request: Any) -> None:
        seen.append((callback_context.user_id, callback_context.run_config.max_llm_calls))

    agent = LlmAgent(
        name="a",
        model=ScriptedModel(["ok"]),
        instruction=provide,
        before_model_callback=before_model,
    )
    session = await Chat.start(agent, user_id="ann")
    await session.send(run_config=RunConfig(max_llm_calls=7))
    assert seen == [("ann", 7), ("ann", 7)]


async def test_a_provider_can_render_templates_itself_r_tpl() -> None:
    async def provide(ctx: ReadonlyContext) -> str:
        return await inject_session_state("Dear {name}", ctx)

    assert await rendered(provide) == "Dear Bob"


async def test_the_provider_context_is_read_only_r_tpl() -> None:
    def provide(ctx: ReadonlyContext) -> str:
        ctx.state["x"] = 1  # type: ignore[index]
        return "unreachable"

    with pytest.raises(TypeError):
        await rendered(provide)


async def test_the_instruction_is_rendered_again_at_every_step_r_tpl_1() -> None:
    def bump(tool_context: ToolContext) -> str:
        tool_context.state["count"] = tool_context.state.get("count", 0) + 1
        return "bumped"

    model = ScriptedModel([fc("bump"), fc("bump"), "done"])
    agent = LlmAgent(name="a", model=model, instruction="count={count?}", tools=[bump])
    await chat(agent)
    assert [(r.system_instruction or "").split("\n\n")[0] for r in model.requests] == [
        "count=",
        "count=1",
        "count=2",
    ]


async def test_later_agents_see_earlier_writes_in_their_template_s_st_1() -> None:
    def write(tool_context: ToolContext) -> str:
        tool_context.state["temp:x"] = 1
        tool_context.state["y"] = 2
        tool_context.state["app:z"] = 3
        tool_context.state["user:w"] = 4
        return "written"

    second = ScriptedModel(["ok"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="a1", model=ScriptedModel([fc("write"), "a1 done"]), tools=[write]),
            LlmAgent(name="a2", model=second, instruction="x={temp:x?} y={y} z={app:z} w={user:w}"),
        ],
    )
    events = await chat(seq)
    assert kinds(events) == ["FC:write", "FR:write", "T:a1 done", "T:ok"]
    assert (second.requests[0].system_instruction or "").startswith("x=1 y=2 z=3 w=4\n\n")
    assert dict(events[1].actions.state_delta) == {"y": 2, "app:z": 3, "user:w": 4}


async def test_output_key_of_an_earlier_agent_feeds_a_later_template_r_seq_1() -> None:
    second = ScriptedModel(["ok"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="a1", model=ScriptedModel(["Paris"]), output_key="city"),
            LlmAgent(name="a2", model=second, instruction="Describe {city}."),
        ],
    )
    await chat(seq)
    assert (second.requests[0].system_instruction or "").startswith("Describe Paris.\n\n")


async def test_empty_instruction_adds_nothing_r_tpl_2() -> None:
    model = ScriptedModel(["ok"])
    await chat(LlmAgent(name="a", model=model, instruction=""))
    assert model.requests[0].system_instruction == identity("a")


async def test_a_provider_returning_empty_text_adds_nothing_r_tpl_2() -> None:
    model = ScriptedModel(["ok"])
    await chat(LlmAgent(name="a", model=model, instruction=lambda ctx: ""))
    assert model.requests[0].system_instruction == identity("a")
