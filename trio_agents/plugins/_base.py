"""The plugin interface: global callbacks that run before the agent-level ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._content import Content
from .._events import Event

if TYPE_CHECKING:
    from .._context import CallbackContext, InvocationContext
    from ..agents._base import BaseAgent
    from ..models._base import LlmRequest, LlmResponse
    from ..tools._base import BaseTool, ToolContext

__all__ = ["BasePlugin"]


class BasePlugin:
    """Subclass and override the hooks you need; every hook is async and keyword-only.

    A hook returning ``None`` observes; a non-None result intervenes (the first non-None result
    among the plugins, in registration order, wins and the rest of the chain is skipped, the
    agent-, model- or tool-level callbacks of that kind included). Hooks documented as
    *notifications* only observe: whatever they return is ignored, and every plugin's hook runs.

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
        """Names the plugin in errors and logs; unique among a Runner's plugins."""

    # -- the run ---------------------------------------------------------------------------------

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: Content
    ) -> Content | None:
        """Runs first, with the new user message, before it is stored.

        A non-None :class:`~trio_agents.Content` replaces the message: it is what the session
        stores and the agents see. Any other non-None value is a
        :class:`~trio_agents.PluginError`.
        """
        return None

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> Content | None:
        """Runs once the user message is stored, before the root agent starts.

        A non-None :class:`~trio_agents.Content` is the whole answer: it is emitted as one
        ``model`` event and no agent runs. Other values are ignored.
        """
        return None

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        """Runs for every event an agent emits (partial chunks included), before it is stored.

        A non-None :class:`~trio_agents.Event` replaces it, keeping the original's ``id``,
        ``invocation_id`` and ``timestamp``: the replacement is what is stored and delivered.
        Any other non-None value is a :class:`~trio_agents.PluginError`.
        """
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        """Notification: the run ended without an error (finished or cancelled).

        The last hook of the invocation. If it raises, the run fails with that
        :class:`~trio_agents.PluginError` and ``on_run_error_callback`` runs.
        """
        return None

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        """Notification: the run failed with ``error``; it still propagates to the caller.

        Runs shielded from cancellation, within the Runner's ``cleanup_timeout``; an exception
        here is attached to ``error`` as a note and never replaces it.
        """
        return None

    # -- agents ----------------------------------------------------------------------------------

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> Content | None:
        """Runs before ``agent`` starts, before the agent's own ``before_agent_callback``.

        A non-None :class:`~trio_agents.Content` is emitted as the agent's answer, the agent does
        not run and the invocation ends. State written through ``callback_context`` is emitted
        either way.
        """
        return None

    async def after_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> Content | None:
        """Runs after ``agent`` finished, before the agent's own ``after_agent_callback``.

        A non-None :class:`~trio_agents.Content` is emitted as one more event of the agent. After
        a cancellation the hook still runs (shielded, within ``cleanup_timeout``) but its result
        is ignored. Not called when the agent failed: see ``on_agent_error_callback``.
        """
        return None

    async def on_agent_error_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext, error: Exception
    ) -> None:
        """Notification: ``agent`` raised ``error``, which still propagates.

        Runs shielded from cancellation, within the Runner's ``cleanup_timeout``; an exception
        here is attached to ``error`` as a note and never replaces it.
        """
        return None

    # -- model calls -----------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Runs before each model call of an LLM agent; ``llm_request`` may be edited in place.

        A non-None :class:`~trio_agents.models.LlmResponse` is used as the model's answer: the
        model is not called and the after-model hooks are skipped.
        """
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """Runs for each answer of the model, every streamed chunk (``partial``) included.

        A non-None :class:`~trio_agents.models.LlmResponse` replaces the answer; the stream
        markers it leaves unset (``partial``, ``turn_complete``, ``usage_metadata``) are taken
        from the original.
        """
        return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        """Runs when the model call for ``llm_request`` raised ``error``.

        A non-None :class:`~trio_agents.models.LlmResponse` recovers: it is used as the model's
        answer (and goes through the after-model hooks). With ``None`` from every hook and
        callback, ``error`` propagates.
        """
        return None

    # -- tool calls ------------------------------------------------------------------------------

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Runs before each tool call; ``tool_args`` (a copy of the model's) may be edited.

        A non-None dict is used as the tool's result: the tool does not run, the after-tool hooks
        still do. For a tool the agent does not have, ``tool`` is a stand-in of that name and an
        answer here spares the model the "no such tool" error.
        """
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: Any,
    ) -> dict[str, Any] | None:
        """Runs after each tool call with its ``result`` (whatever the tool returned).

        A non-None dict replaces the result the model gets.
        """
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """Runs when a tool raised ``error`` (or the model named a tool that does not exist).

        A non-None dict recovers: it is used as the tool's result (and goes through the
        after-tool hooks). With ``None`` from every hook and callback, ``error`` propagates.
        """
        return None

    async def close(self) -> None:
        """Release resources: the Runner calls it once, when it closes, within ``cleanup_timeout``.

        A plugin still closing past that limit is cancelled and abandoned.
        """
        return None
