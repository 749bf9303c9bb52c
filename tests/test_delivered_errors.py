"""Delivered events equal stored events on every failure path (the error event included), and
the exception leaves ``runner.run()`` with its own type once the consumer has read it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.llm_helpers import fc
from trio_agents import (
    Event,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    LlmCallLimitError,
    ParallelAgent,
    PluginError,
    RunConfig,
    TemplateKeyError,
)
from trio_agents.models import LlmRequest
from trio_agents.plugins import BasePlugin
from trio_agents.testing import ScriptedModel


class Failing(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="failing")

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        if event.get_function_calls():
            raise ValueError("boom")


def agent_raising() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    from trio_agents import BaseAgent

    class Raiser(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await ctx.emit(Event())
            raise ValueError("boom")

    return Raiser(name="a"), [], None


def tool_raising() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    def lookup() -> str:
        raise ValueError("boom")

    return LlmAgent(name="a", model=ScriptedModel([fc("lookup"), "x"]), tools=[lookup]), [], None


def model_raising() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    return LlmAgent(name="a", model=ScriptedModel([ValueError("boom")])), [], None


def callback_raising() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    def before_model(callback_context: Any, llm_request: LlmRequest) -> None:
        raise ValueError("boom")

    agent = LlmAgent(name="a", model=ScriptedModel(["x"]), before_model_callback=before_model)
    return agent, [], None


def plugin_raising() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    def lookup() -> str:
        return "ok"

    agent = LlmAgent(name="a", model=ScriptedModel([fc("lookup"), "x"]), tools=[lookup])
    return agent, [Failing()], None


def template_failing() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    return LlmAgent(name="a", model=ScriptedModel(["x"]), instruction="Hi {missing}"), [], None


def budget_exceeded() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    def lookup() -> str:
        return "ok"

    model = ScriptedModel(lambda request: fc("lookup"))
    agent = LlmAgent(name="a", model=model, tools=[lookup])
    return agent, [], RunConfig(max_llm_calls=2)


def branch_raising() -> tuple[Any, list[BasePlugin], RunConfig | None]:
    raiser, _, _ = agent_raising()

    def wait() -> str:
        return "ok"

    other = LlmAgent(name="b", model=ScriptedModel([fc("wait"), "done"]), tools=[wait])
    return ParallelAgent(name="fan", sub_agents=[raiser, other]), [], None


CASES: dict[str, tuple[Callable[[], Any], type[BaseException], str]] = {
    "agent": (agent_raising, ValueError, "ValueError"),
    "tool": (tool_raising, ValueError, "ValueError"),
    "model": (model_raising, ValueError, "ValueError"),
    "callback": (callback_raising, ValueError, "ValueError"),
    "plugin": (plugin_raising, PluginError, "PluginError"),
    "template": (template_failing, TemplateKeyError, "TemplateKeyError"),
    "max_llm_calls": (budget_exceeded, LlmCallLimitError, "LlmCallLimitError"),
    "parallel_branch": (branch_raising, ValueError, "ValueError"),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_error_event_is_delivered_then_the_exception_leaves(case: str) -> None:
    make, error_type, code = CASES[case]
    agent, plugins, config = make()
    runner = InMemoryRunner(agent, plugins=plugins)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    delivered: list[Event] = []
    with pytest.raises(error_type):
        async with runner.run(
            user_id="u", session_id=session.id, new_message="go", run_config=config
        ) as events:
            async for event in events:
                delivered.append(event)
    stored = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session.id
    )
    assert stored is not None
    assert list(stored.events[1:]) == delivered  # delivered equals stored, nothing left out
    error = delivered[-1]
    assert (error.error_code, error.content) == (code, None)
    calls = {c.id for e in stored.events for c in e.get_function_calls()}
    answers = {r.id for e in stored.events for r in e.get_function_responses()}
    assert calls <= answers  # no call left unanswered
