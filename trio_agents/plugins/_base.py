"""The plugin interface: global callbacks that run before the agent-level ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._content import Content
from .._events import Event

if TYPE_CHECKING:
    from .._context import CallbackContext, InvocationContext
    from ..agents._base import BaseAgent

__all__ = ["BasePlugin"]


class BasePlugin:
    """Subclass and override the hooks you need; every hook is async and keyword-only.

    A hook returning ``None`` observes; a non-None result intervenes (the first non-None result
    among the plugins, in registration order, wins and the rest of the chain is skipped, the
    agent-, model- or tool-level callbacks of that kind included). Model and tool hooks receive
    the objects defined by :mod:`trio_agents.models` and :mod:`trio_agents.tools`.

    Hooks run in the task of the work they surround, so hook calls from sibling
    :class:`~trio_agents.ParallelAgent` branches, from concurrent tool calls and from concurrent
    invocations interleave: keep per-invocation state in a dict keyed by
    ``invocation_context.invocation_id`` (``callback_context.invocation_id``), create it lazily,
    and drop it in ``after_run_callback`` and ``on_run_error_callback`` (one of the two ends
    every invocation that reached ``before_run``). No hook of an invocation runs after its
    ``after_run_callback``. A hook that raises becomes :class:`~trio_agents.PluginError`.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: Content
    ) -> Content | None:
        return None

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> Content | None:
        return None

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        return None

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        return None

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> Content | None:
        return None

    async def after_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> Content | None:
        return None

    async def on_agent_error_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext, error: Exception
    ) -> None:
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: Any
    ) -> Any | None:
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: Any
    ) -> Any | None:
        return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: Any, error: Exception
    ) -> Any | None:
        return None

    async def before_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        return None

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        return None

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> dict[str, Any] | None:
        return None

    async def close(self) -> None:
        return None
