"""Artifacts as agents, tools and callbacks see them (R-ART-3, §2.4, R-TPL artifact rows).

``save_artifact`` stores at once and records ``artifact_delta[filename] = version`` on the
context's actions; the delta rides on the event the context commits next (the function-response
event of a tool, the model event of a model callback, the callback event of an agent callback)
and is persisted with it. ``load_artifact`` / ``list_artifacts`` read the session's files and the
user's ``user:`` files. ``{artifact.name}`` in an instruction inserts the latest version's text.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.llm_helpers import Chat, call, calls, chat, fc, kinds, responses
from trio_agents import (
    ArtifactNotFoundError,
    BaseAgent,
    CallbackContext,
    ConfigurationError,
    Content,
    Event,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    Part,
    Runner,
    SequentialAgent,
    TemplateKeyError,
    ToolContext,
)
from trio_agents.artifacts import InMemoryArtifactService
from trio_agents.models import LlmRequest
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel


def agent(script: list[Any], *tools: Any, **kwargs: Any) -> LlmAgent:
    return LlmAgent(name="a", model=ScriptedModel(script), tools=list(tools), **kwargs)


def model_of(agent: LlmAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


async def stored_part(session: Chat, filename: str, version: int | None = None) -> Part | None:
    runner = session.runner
    part: Part | None = await runner.artifact_service.load_artifact(
        app_name=runner.app_name,
        user_id=session.user_id,
        session_id=session.session_id,
        filename=filename,
        version=version,
    )
    return part


# -- saving from a tool (R-ART-3) ------------------------------------------------------------------


async def test_tool_save_returns_versions_and_the_delta_rides_on_the_response_r_art_3() -> None:
    saved: list[int] = []

    async def write(tool_context: ToolContext, body: str) -> str:
        saved.append(await tool_context.save_artifact("report.txt", Part.from_text(body)))
        return "written"

    a = agent([fc("write", {"body": "draft"}), fc("write", {"body": "final"}), "done"], write)
    session = await Chat.start(a)
    events = await session.send()
    assert kinds(events) == ["FC:write", "FR:write", "FC:write", "FR:write", "T:done"]
    assert saved == [0, 1]
    assert [dict(e.actions.artifact_delta) for e in events] == [
        {},
        {"report.txt": 0},
        {},
        {"report.txt": 1},
        {},
    ]
    # Persisted with the event.
    stored = await session.stored()
    assert [dict(e.actions.artifact_delta) for e in stored] == [
        dict(e.actions.artifact_delta) for e in events
    ]
    assert await stored_part(session, "report.txt") == Part.from_text("final")
    assert await stored_part(session, "report.txt", 0) == Part.from_text("draft")


async def test_save_is_visible_at_once_before_any_event_r_art_3() -> None:
    seen: list[Any] = []

    async def write_then_read(tool_context: ToolContext) -> str:
        await tool_context.save_artifact("x.txt", Part.from_text("now"))
        seen.append(await tool_context.load_artifact("x.txt"))
        seen.append(await tool_context.list_artifacts())
        return "ok"

    await chat(agent([fc("write_then_read"), "done"], write_then_read))
    assert seen == [Part.from_text("now"), ["x.txt"]]


async def test_calls_of_one_turn_merge_their_artifact_deltas_r_ev_7() -> None:
    async def put(tool_context: ToolContext, name: str) -> str:
        await tool_context.save_artifact(name, Part.from_text(name))
        return name

    a = agent(
        [calls(call("put", {"name": "one.txt"}), call("put", {"name": "two.txt"})), "ok"], put
    )
    events = await chat(a)
    assert dict(events[1].actions.artifact_delta) == {"one.txt": 0, "two.txt": 0}


# -- saving from callbacks (R-ART-3) ---------------------------------------------------------------


async def test_agent_callbacks_commit_their_artifact_delta_r_art_3() -> None:
    async def before(callback_context: CallbackContext) -> None:
        await callback_context.save_artifact("in.txt", Part.from_text("before"))

    async def after(callback_context: CallbackContext) -> None:
        await callback_context.save_artifact("out.txt", Part.from_text("after"))

    a = agent(["answer"], before_agent_callback=before, after_agent_callback=after)
    session = await Chat.start(a)
    events = await session.send()
    assert [(e.text, dict(e.actions.artifact_delta)) for e in events] == [
        (None, {"in.txt": 0}),
        ("answer", {}),
        (None, {"out.txt": 0}),
    ]
    assert [dict(e.actions.artifact_delta) for e in await session.stored()] == [
        {"in.txt": 0},
        {},
        {"out.txt": 0},
    ]


async def test_model_callback_delta_rides_on_the_model_event_r_art_3() -> None:
    async def before_model(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        await callback_context.save_artifact("prompt.txt", Part.from_text("seen prompt"))

    events = await chat(agent(["answer"], before_model_callback=before_model))
    assert [(e.text, dict(e.actions.artifact_delta)) for e in events] == [
        ("answer", {"prompt.txt": 0})
    ]


async def test_custom_agent_uses_a_callback_context_for_artifacts_r_art_3() -> None:
    class Archiver(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            cc = CallbackContext(ctx)
            version = await cc.save_artifact("log.txt", Part.from_text("archived"))
            await ctx.emit(
                Event(
                    content=Content.from_text(f"saved v{version}", role="model"),
                    actions=cc.actions.freeze(),
                )
            )

    session = await Chat.start(Archiver(name="archiver"))
    (event,) = await session.send()
    assert (event.text, dict(event.actions.artifact_delta)) == ("saved v0", {"log.txt": 0})
    assert await stored_part(session, "log.txt") == Part.from_text("archived")


# -- loading and listing ---------------------------------------------------------------------------


async def test_load_latest_a_version_or_nothing_r_art_1() -> None:
    got: dict[str, Any] = {}

    async def inspect(tool_context: ToolContext) -> str:
        for body in ("v0", "v1"):
            await tool_context.save_artifact("f.txt", Part.from_text(body))
        got["latest"] = await tool_context.load_artifact("f.txt")
        got["first"] = await tool_context.load_artifact("f.txt", version=0)
        got["missing"] = await tool_context.load_artifact("nope.txt")
        try:
            await tool_context.load_artifact("f.txt", version=5)
        except ArtifactNotFoundError as exc:
            got["error"] = (exc.filename, exc.version)
        return "ok"

    await chat(agent([fc("inspect"), "done"], inspect))
    assert got == {
        "latest": Part.from_text("v1"),
        "first": Part.from_text("v0"),
        "missing": None,
        "error": ("f.txt", 5),
    }


async def test_list_shows_session_and_user_files_sorted_r_art_1() -> None:
    listed: list[list[str]] = []

    async def save_and_list(tool_context: ToolContext) -> str:
        for name in ("zeta.txt", "user:profile", "alpha.txt"):
            await tool_context.save_artifact(name, Part.from_text(name))
        listed.append(await tool_context.list_artifacts())
        return "ok"

    await chat(agent([fc("save_and_list"), "done"], save_and_list))
    assert listed == [["alpha.txt", "user:profile", "zeta.txt"]]


async def test_user_files_follow_the_user_into_new_sessions_r_art_2() -> None:
    reads: list[tuple[Any, Any, list[str]]] = []

    async def remember(tool_context: ToolContext) -> str:
        await tool_context.save_artifact("user:prefs", Part.from_text("dark mode"))
        await tool_context.save_artifact("session.txt", Part.from_text("only here"))
        return "ok"

    async def recall(tool_context: ToolContext) -> str:
        reads.append(
            (
                await tool_context.load_artifact("user:prefs"),
                await tool_context.load_artifact("session.txt"),
                await tool_context.list_artifacts(),
            )
        )
        return "ok"

    model = ScriptedModel([fc("remember"), "saved", fc("recall"), "read", fc("recall"), "read"])
    a = LlmAgent(name="a", model=model, tools=[remember, recall])
    runner = InMemoryRunner(a)
    await (await Chat.start(a, runner=runner, user_id="alice")).send()
    await (await Chat.start(a, runner=runner, user_id="alice")).send()
    await (await Chat.start(a, runner=runner, user_id="bob")).send()
    assert reads == [
        (Part.from_text("dark mode"), None, ["user:prefs"]),
        (None, None, []),
    ]


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("filename", ["", "a/b.txt", "..", "user:"])
async def test_invalid_filename_fails_the_call_with_a_typed_error(filename: str) -> None:
    async def write(tool_context: ToolContext) -> str:
        await tool_context.save_artifact(filename, Part.from_text("x"))
        return "never"

    session = await Chat.start(agent([fc("write"), "never"], write))
    with pytest.raises(ConfigurationError, match="invalid artifact filename"):
        await session.send()
    assert kinds(await session.stored()) == ["FC:write", "FR:write", "E:ConfigurationError"]


async def test_without_an_artifact_service_the_context_says_so() -> None:
    caught: list[str] = []

    async def write(tool_context: ToolContext) -> str:
        for attempt in (
            lambda: tool_context.save_artifact("f.txt", Part.from_text("x")),
            lambda: tool_context.load_artifact("f.txt"),
            tool_context.list_artifacts,
        ):
            try:
                await attempt()
            except ConfigurationError as exc:
                caught.append(str(exc))
        return "ok"

    a = agent([fc("write"), "done"], write)
    runner = Runner(agent=a, app_name="app", session_service=InMemorySessionService())
    await chat(a, runner=runner)
    assert caught == ["Artifact service is not initialized."] * 3


# -- templating (R-TPL artifact rows, R-TPL-1) -----------------------------------------------------


async def test_instruction_sees_an_artifact_saved_earlier_in_the_invocation_r_tpl_1() -> None:
    async def write(tool_context: ToolContext) -> str:
        await tool_context.save_artifact("plan.md", Part.from_text("step one"))
        return "ok"

    a = agent([fc("write"), "done"], write, instruction="Plan: [{artifact.plan.md?}]")
    await chat(a)
    systems = [r.system_instruction or "" for r in model_of(a).requests]
    assert systems[0].startswith("Plan: []")
    assert systems[1].startswith("Plan: [step one]")


async def test_instruction_uses_the_latest_version_and_user_files_r_tpl() -> None:
    a = agent(["ok"], instruction="{artifact.notes.txt} / {artifact.user:bio}")
    runner = InMemoryRunner(a)
    session = await Chat.start(a, runner=runner)
    store: InMemoryArtifactService = runner.artifact_service
    ids = {"app_name": runner.app_name, "user_id": "u"}
    await store.save_artifact(
        **ids, session_id=session.session_id, filename="notes.txt", artifact=Part.from_text("old")
    )
    await store.save_artifact(
        **ids, session_id=session.session_id, filename="notes.txt", artifact=Part.from_text("new")
    )
    await store.save_artifact(
        **ids, session_id="another", filename="user:bio", artifact=Part.from_text("likes trio")
    )
    await session.send()
    assert (model_of(a).requests[0].system_instruction or "").startswith("new / likes trio")


async def test_missing_artifact_in_an_instruction_fails_naming_it_r_tpl() -> None:
    a = agent(["never"], instruction="{artifact.absent.txt}")
    with pytest.raises(TemplateKeyError) as info:
        await chat(a)
    # ADK 2.13 names the missing artifact this way.
    assert str(info.value) == "Artifact 'absent.txt' not found in agent 'a'."
    assert info.value.key == "artifact.absent.txt"
    assert info.value.agent == "a"
    assert model_of(a).requests == []


async def test_artifact_placeholder_without_a_service_is_a_configuration_error_r_tpl() -> None:
    a = agent(["never"], instruction="{artifact.f.txt?}")
    runner = Runner(agent=a, app_name="app", session_service=InMemorySessionService())
    with pytest.raises(ConfigurationError, match="Artifact service is not initialized"):
        await chat(a, runner=runner)


async def test_artifact_saved_by_one_agent_is_read_by_the_next_r_art_2() -> None:
    async def write(tool_context: ToolContext) -> str:
        await tool_context.save_artifact("handoff.txt", Part.from_text("from writer"))
        return "ok"

    writer = LlmAgent(name="writer", model=ScriptedModel([fc("write"), "written"]), tools=[write])
    reader = LlmAgent(
        name="reader", model=ScriptedModel(["read"]), instruction="Got: {artifact.handoff.txt}"
    )
    events = await chat(SequentialAgent(name="seq", sub_agents=[writer, reader]))
    assert responses(events[1]) == [("write", {"result": "ok"})]
    system = model_of(reader).requests[0].system_instruction or ""
    assert system.startswith("Got: from writer")


async def test_a_tool_saves_custom_metadata_with_its_version() -> None:
    """As google-adk 2.13's ``Context.save_artifact(filename, artifact, custom_metadata)``: the
    metadata is kept with the version, and the delta records the version as before."""

    async def write(tool_context: ToolContext) -> str:
        await tool_context.save_artifact("r.txt", Part.from_text("v"), {"source": "tool"})
        return "ok"

    session = await Chat.start(agent([fc("write"), "done"], write))
    events = await session.send()
    assert [dict(e.actions.artifact_delta) for e in events][1] == {"r.txt": 0}
    runner = session.runner
    record = await runner.artifact_service.get_artifact_version(
        app_name=runner.app_name,
        user_id=session.user_id,
        session_id=session.session_id,
        filename="r.txt",
    )
    assert record is not None
    assert (record.version, dict(record.custom_metadata)) == (0, {"source": "tool"})
