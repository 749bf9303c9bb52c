"""RecordingPlugin: every hook call with its arguments, for assertions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..models._base import LlmRequest
from ..plugins._base import BasePlugin

__all__ = ["HookCall", "RecordingPlugin"]

HOOKS = (
    "on_user_message",
    "before_run",
    "on_event",
    "after_run",
    "on_run_error",
    "before_agent",
    "after_agent",
    "on_agent_error",
    "before_model",
    "after_model",
    "on_model_error",
    "before_tool",
    "after_tool",
    "on_tool_error",
    "close",
)
"""The hooks of :class:`~trio_agents.plugins.BasePlugin`, named without ``_callback``."""


@attrs.frozen
class HookCall:
    """One hook call seen by :class:`RecordingPlugin`.

    ``hook`` is the hook's name without ``_callback`` (``"before_model"``); ``args`` are its
    keyword arguments. A mutable argument (``llm_request``, ``tool_args``) is copied as it was at
    the call, so later edits by other callbacks do not rewrite the record.
    """

    hook: str
    args: Mapping[str, Any]

    @property
    def invocation_id(self) -> str | None:
        """The invocation the call belongs to (None for ``close``)."""
        context = self.args.get("invocation_context") or self.args.get("callback_context")
        if context is None and "tool_context" in self.args:
            context = self.args["tool_context"]
        return getattr(context, "invocation_id", None)


def _snapshot(args: dict[str, Any]) -> dict[str, Any]:
    request = args.get("llm_request")
    if isinstance(request, LlmRequest):
        args["llm_request"] = attrs.evolve(
            request,
            contents=list(request.contents),
            tools=list(request.tools),
            generation_config=dict(request.generation_config),
            labels=dict(request.labels),
        )
    if isinstance(args.get("tool_args"), dict):
        args["tool_args"] = dict(args["tool_args"])
    return args


class RecordingPlugin(BasePlugin):
    """Records every hook call, in order, and changes nothing (every hook returns None).

    Hook calls of parallel branches and concurrent tools interleave here as they happened::

        recorder = RecordingPlugin()
        runner = InMemoryRunner(agent, plugins=[recorder])
        ...
        assert recorder.hooks()[:2] == ["on_user_message", "before_run"]
        (call,) = recorder.calls_of("before_tool")
        assert call["tool_args"] == {"city": "Oslo"}
    """

    def __init__(self, name: str = "recorder") -> None:
        super().__init__(name)
        self.calls: list[HookCall] = []

    def hooks(self) -> list[str]:
        """The names of the hooks called so far, in order."""
        return [call.hook for call in self.calls]

    def calls_of(self, hook: str) -> list[Mapping[str, Any]]:
        """The keyword arguments of every call of ``hook`` (a name of :data:`HOOKS`), in order."""
        if hook not in HOOKS:
            raise ValueError(f"unknown hook {hook!r}; hooks are {', '.join(HOOKS)}")
        return [call.args for call in self.calls if call.hook == hook]

    def clear(self) -> None:
        """Forget the calls recorded so far."""
        self.calls.clear()

    def _record(self, hook: str, args: dict[str, Any]) -> None:
        self.calls.append(HookCall(hook, _snapshot(args)))

    async def on_user_message_callback(self, **kwargs: Any) -> None:
        self._record("on_user_message", kwargs)

    async def before_run_callback(self, **kwargs: Any) -> None:
        self._record("before_run", kwargs)

    async def on_event_callback(self, **kwargs: Any) -> None:
        self._record("on_event", kwargs)

    async def after_run_callback(self, **kwargs: Any) -> None:
        self._record("after_run", kwargs)

    async def on_run_error_callback(self, **kwargs: Any) -> None:
        self._record("on_run_error", kwargs)

    async def before_agent_callback(self, **kwargs: Any) -> None:
        self._record("before_agent", kwargs)

    async def after_agent_callback(self, **kwargs: Any) -> None:
        self._record("after_agent", kwargs)

    async def on_agent_error_callback(self, **kwargs: Any) -> None:
        self._record("on_agent_error", kwargs)

    async def before_model_callback(self, **kwargs: Any) -> None:
        self._record("before_model", kwargs)

    async def after_model_callback(self, **kwargs: Any) -> None:
        self._record("after_model", kwargs)

    async def on_model_error_callback(self, **kwargs: Any) -> None:
        self._record("on_model_error", kwargs)

    async def before_tool_callback(self, **kwargs: Any) -> None:
        self._record("before_tool", kwargs)

    async def after_tool_callback(self, **kwargs: Any) -> None:
        self._record("after_tool", kwargs)

    async def on_tool_error_callback(self, **kwargs: Any) -> None:
        self._record("on_tool_error", kwargs)

    async def close(self) -> None:
        self._record("close", {})
