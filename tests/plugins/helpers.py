"""Shared doubles for the plugin tests: a recording plugin, logged callbacks, models and tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.agents.llm_helpers import kinds as kinds  # one picture of a run for every suite
from trio_agents import BaseAgent, Content, Event, InMemoryRunner, LlmAgent, Part, RunConfig
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin
from trio_agents.testing import ScriptedModel

HOOKS = (
    "on_user_message",
    "before_run",
    "before_agent",
    "after_agent",
    "on_agent_error",
    "before_model",
    "after_model",
    "on_model_error",
    "before_tool",
    "after_tool",
    "on_tool_error",
    "on_event",
    "after_run",
    "on_run_error",
    "close",
)


class Recorder(BasePlugin):
    """Implements every hook: logs ``<name>.<hook>`` into ``log`` and keeps the keyword arguments.

    ``results`` maps a hook name (without ``_callback``) to what it returns: a value, an exception
    instance (raised), or a callable taking the hook's keyword arguments.
    """

    def __init__(self, name: str, log: list[str] | None = None, **results: Any) -> None:
        super().__init__(name=name)
        self.log: list[str] = [] if log is None else log
        self.results = results
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _hook(self, hook: str, **kwargs: Any) -> Any:
        self.log.append(f"{self.name}.{hook}")
        self.calls.append((hook, kwargs))
        result = self.results.get(hook)
        if isinstance(result, BaseException):
            raise result
        if callable(result):
            return result(**kwargs)
        return result

    def seen(self, hook: str) -> list[dict[str, Any]]:
        """The keyword arguments of every call of ``hook``."""
        return [kwargs for name, kwargs in self.calls if name == hook]

    async def on_user_message_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_user_message", **kwargs)

    async def before_run_callback(self, **kwargs: Any) -> Any:
        return self._hook("before_run", **kwargs)

    async def before_agent_callback(self, **kwargs: Any) -> Any:
        return self._hook("before_agent", **kwargs)

    async def after_agent_callback(self, **kwargs: Any) -> Any:
        return self._hook("after_agent", **kwargs)

    async def on_agent_error_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_agent_error", **kwargs)

    async def before_model_callback(self, **kwargs: Any) -> Any:
        return self._hook("before_model", **kwargs)

    async def after_model_callback(self, **kwargs: Any) -> Any:
        return self._hook("after_model", **kwargs)

    async def on_model_error_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_model_error", **kwargs)

    async def before_tool_callback(self, **kwargs: Any) -> Any:
        return self._hook("before_tool", **kwargs)

    async def after_tool_callback(self, **kwargs: Any) -> Any:
        return self._hook("after_tool", **kwargs)

    async def on_tool_error_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_tool_error", **kwargs)

    async def on_event_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_event", **kwargs)

    async def after_run_callback(self, **kwargs: Any) -> Any:
        return self._hook("after_run", **kwargs)

    async def on_run_error_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_run_error", **kwargs)

    async def close(self) -> None:
        self._hook("close")


def logged(log: list[str], name: str, result: Any = None) -> Callable[..., Any]:
    """An agent-level callback accepting any keywords that logs ``name`` and returns ``result``."""

    def callback(**kwargs: Any) -> Any:
        log.append(name)
        if isinstance(result, BaseException):
            raise result
        return result

    return callback


def agent_callbacks(log: list[str], **results: Any) -> dict[str, Any]:
    """Every callback an LlmAgent takes, logging ``agent.<hook>``; two before-agent callbacks."""
    callbacks: dict[str, Any] = {
        f"{hook}_callback": logged(log, f"agent.{hook}", results.get(hook))
        for hook in (
            "after_agent",
            "before_model",
            "after_model",
            "on_model_error",
            "before_tool",
            "after_tool",
            "on_tool_error",
        )
    }
    callbacks["before_agent_callback"] = [
        logged(log, "agent.before_agent1", results.get("before_agent")),
        logged(log, "agent.before_agent2"),
    ]
    return callbacks


def logged_model(log: list[str], script: Sequence[Any]) -> ScriptedModel:
    """A scripted model that logs ``model`` on every call."""
    entries = list(script)

    def handler(request: LlmRequest) -> Any:
        log.append("model")
        return entries.pop(0)

    return ScriptedModel(handler)


def echo_tool(log: list[str]) -> Callable[..., Any]:
    def echo(x: int = 0) -> dict[str, int]:
        log.append("tool.echo")
        return {"x": x}

    return echo


def boom_tool(log: list[str]) -> Callable[..., Any]:
    def boom() -> None:
        log.append("tool.boom")
        raise RuntimeError("boom")

    return boom


def fc(name: str, args: Mapping[str, Any] | None = None) -> LlmResponse:
    part = Part.from_function_call(name, dict(args or {}))
    return LlmResponse(content=Content(role="model", parts=[part]))


def reply(text: str) -> LlmResponse:
    return LlmResponse(content=Content.from_text(text, role="model"), finish_reason="STOP")


def fr(event: Event) -> list[dict[str, Any]]:
    """The response dicts of a function-response event."""
    return [dict(r.response) for r in event.get_function_responses()]


class Run:
    """A runner with one session; ``delivered`` and ``stored()`` for the last turn."""

    def __init__(self, agent: BaseAgent, *plugins: BasePlugin, **runner_kwargs: Any) -> None:
        self.runner = InMemoryRunner(agent, plugins=plugins, **runner_kwargs)
        self.session_id = ""
        self.delivered: list[Event] = []

    async def start(self, user_id: str = "u") -> Run:
        session = await self.runner.session_service.create_session(
            app_name=self.runner.app_name, user_id=user_id
        )
        self.session_id = session.id
        self.user_id = user_id
        return self

    async def send(
        self, message: Content | str = "hi", *, run_config: RunConfig | None = None
    ) -> list[Event]:
        """One invocation to the end; the events delivered (failures propagate)."""
        if not self.session_id:
            await self.start()
        turn: list[Event] = []
        async with self.runner.run(
            user_id=self.user_id,
            session_id=self.session_id,
            new_message=message,
            run_config=run_config,
        ) as events:
            async for event in events:
                turn.append(event)
        self.delivered.extend(turn)
        return turn

    async def stored(self) -> list[Event]:
        """Every stored event of the session, the user events included."""
        session = await self.runner.session_service.get_session(
            app_name=self.runner.app_name, user_id=self.user_id, session_id=self.session_id
        )
        assert session is not None
        return list(session.events)


async def run_once(agent: BaseAgent, *plugins: BasePlugin, **kwargs: Any) -> list[Event]:
    run = Run(agent, *plugins)
    return await run.send(**kwargs)


def llm_agent(log: list[str], script: Sequence[Any], **kwargs: Any) -> LlmAgent:
    """An LlmAgent ``a`` on a logged scripted model with the echo and boom tools."""
    kwargs.setdefault("tools", [echo_tool(log), boom_tool(log)])
    return LlmAgent(name="a", model=logged_model(log, script), **kwargs)
