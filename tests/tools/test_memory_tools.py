"""load_memory, preload_memory and context.search_memory, driven through LlmAgent (ADK §2.5)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.agents.llm_helpers import fc, responses
from trio_agents import (
    ConfigurationError,
    Content,
    Event,
    InMemoryRunner,
    LlmAgent,
    Part,
    Runner,
    Session,
    ToolContext,
)
from trio_agents.memory import (
    InMemoryMemoryService,
    MemoryService,
    SearchMemoryResponse,
    SqliteMemoryService,
)
from trio_agents.models import LlmRequest
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel
from trio_agents.tools import load_memory, preload_memory


async def _remember(runner: Runner, *messages: str) -> None:
    """Talk in one session, then add it to the Runner's memory."""
    svc = runner.session_service
    session = await svc.create_session(app_name=runner.app_name, user_id="u")
    for message in messages:
        async with runner.run(user_id="u", session_id=session.id, new_message=message) as events:
            async for _ in events:
                pass
    stored = await svc.get_session(app_name=runner.app_name, user_id="u", session_id=session.id)
    assert stored is not None
    await runner.memory_service.add_session_to_memory(stored)


async def _ask(runner: Runner, message: str | Content) -> list[Event]:
    svc = runner.session_service
    session = await svc.create_session(app_name=runner.app_name, user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message=message) as events:
        return [e async for e in events]


async def test_the_model_loads_memories_with_a_query() -> None:
    model = ScriptedModel(["noted", fc("load_memory", {"query": "dog name"}), "It is Rex."])
    runner = InMemoryRunner(LlmAgent(name="a", model=model, tools=[load_memory]))
    await _remember(runner, "My dog is named Rex")
    events = await _ask(runner, "What is my dog's name?")
    ((name, answer),) = responses(events[1])
    assert name == "load_memory"
    assert answer["memories"][0]["text"] == "My dog is named Rex"
    assert answer["memories"][0]["author"] == "user"
    assert events[-1].text == "It is Rex."
    request = model.requests[1]
    assert [t.name for t in request.tools] == ["load_memory"]
    assert request.tools[0].parameters["required"] == ["query"]
    assert "call load_memory function with a query" in (request.system_instruction or "")


async def test_load_memory_with_a_bad_query_answers_an_error_to_the_model() -> None:
    model = ScriptedModel([fc("load_memory", {"query": 3}), "sorry"])
    runner = InMemoryRunner(LlmAgent(name="a", model=model, tools=[load_memory]))
    events = await _ask(runner, "hi")
    ((_, answer),) = responses(events[1])
    assert "string 'query'" in answer["error"]


async def test_preload_memory_adds_past_conversations_to_the_instruction() -> None:
    model = ScriptedModel(["noted", "It is Rex."])
    runner = InMemoryRunner(LlmAgent(name="a", model=model, tools=[preload_memory]))
    await _remember(runner, "My dog is named Rex")
    await _ask(runner, "remind me of my dog's name")
    request = model.requests[-1]
    assert request.tools == []  # never offered to the model
    instruction = request.system_instruction or ""
    block = instruction[instruction.index("The following content") :]
    lines = block.splitlines()
    assert lines[2] == "<PAST_CONVERSATIONS>" and lines[-1] == "</PAST_CONVERSATIONS>"
    assert lines[3].startswith("Time: 20") and lines[4] == "user: My dog is named Rex"


async def test_preload_memory_searches_before_every_model_call_with_all_user_text() -> None:
    seen: list[str] = []

    class Spy(InMemoryMemoryService):
        async def search_memory(self, *, app_name: str, user_id: str, query: str) -> Any:
            seen.append(query)
            return await super().search_memory(app_name=app_name, user_id=user_id, query=query)

    def tick() -> str:
        """Tick."""
        return "tock"

    model = ScriptedModel([fc("tick"), "done"])
    agent = LlmAgent(name="a", model=model, tools=[preload_memory, tick])
    runner = InMemoryRunner(agent, memory_service=Spy())
    message = Content(role="user", parts=[Part.from_text("first"), Part.from_text("second")])
    await _ask(runner, message)
    assert seen == ["first second", "first second"]  # one search per model call


async def test_preload_memory_adds_nothing_when_nothing_matches() -> None:
    model = ScriptedModel(["ok"])
    runner = InMemoryRunner(LlmAgent(name="a", model=model, tools=[preload_memory]))
    await _ask(runner, "hello")
    assert "PAST_CONVERSATIONS" not in (model.requests[0].system_instruction or "")


class _Broken(MemoryService):
    async def add_session_to_memory(self, session: Session) -> None:
        raise AssertionError("not used")

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        raise OSError("memory backend down")


async def test_a_failing_memory_backend_does_not_stop_preload_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As in ADK: logged, and the model is called without memories."""
    model = ScriptedModel(["fine"])
    runner = InMemoryRunner(
        LlmAgent(name="a", model=model, tools=[preload_memory]), memory_service=_Broken()
    )
    with caplog.at_level(logging.WARNING):
        events = await _ask(runner, "hello")
    assert events[-1].text == "fine"
    assert "memory search failed" in caplog.text


async def test_a_call_to_preload_memory_answers_an_error_to_the_model() -> None:
    """preload_memory is never offered; a model that calls it anyway is told, the run goes on."""
    model = ScriptedModel([fc("preload_memory"), "ok"])
    runner = InMemoryRunner(LlmAgent(name="a", model=model, tools=[preload_memory]))
    events = await _ask(runner, "hi")
    ((name, answer),) = responses(events[1])
    assert (name, answer) == ("preload_memory", {"error": "preload_memory is not a callable tool"})
    assert events[-1].text == "ok"


async def test_callbacks_search_memory_too(tmp_path: Path) -> None:
    """``CallbackContext.search_memory`` on a Runner with the SQLite backend."""
    found: list[str] = []

    async def before(*, callback_context: Any, llm_request: LlmRequest) -> None:
        response = await callback_context.search_memory("favourite colour")
        found.extend(m.text for m in response.memories)

    async with SqliteMemoryService(tmp_path / "memory.db") as memory:
        model = ScriptedModel(["noted", "green"])
        agent = LlmAgent(name="a", model=model, before_model_callback=before)
        runner = Runner(
            agent=agent,
            app_name="app",
            session_service=InMemorySessionService(),
            memory_service=memory,
        )
        await _remember(runner, "My favourite colour is green")
        found.clear()
        await _ask(runner, "what colour?")
    assert found == ["My favourite colour is green"]


@pytest.mark.parametrize("tool", [load_memory, preload_memory], ids=["load", "preload"])
async def test_memory_tools_without_a_memory_service_are_a_clear_error(tool: Any) -> None:
    model = ScriptedModel([fc("load_memory", {"query": "x"}), "never"])
    agent = LlmAgent(name="a", model=model, tools=[tool])
    runner = Runner(agent=agent, app_name="app", session_service=InMemorySessionService())
    with pytest.raises(ConfigurationError, match="no memory service"):
        await _ask(runner, "go")


async def test_search_memory_without_a_memory_service_is_a_clear_error() -> None:
    async def recall(query: str, tool_context: ToolContext) -> str:
        """Recall.

        Args:
            query: What.
        """
        await tool_context.search_memory(query)
        return "never"

    model = ScriptedModel([fc("recall", {"query": "x"})])
    agent = LlmAgent(name="a", model=model, tools=[recall])
    runner = Runner(agent=agent, app_name="app", session_service=InMemorySessionService())
    with pytest.raises(ConfigurationError, match="no memory service"):
        await _ask(runner, "go")
