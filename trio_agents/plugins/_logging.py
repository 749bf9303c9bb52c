"""LoggingPlugin: one structured log line per hook through the standard ``logging`` module.

Each record's message is the hook name followed by ``key=value`` pairs (logfmt style); the same
data is on the record as ``record.hook`` (str) and ``record.fields`` (dict) for JSON formatters.
Content bodies (messages, model text, tool arguments and results) are logged only with
``include_content=True``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._base import BasePlugin

if TYPE_CHECKING:
    from .._content import Content
    from .._context import CallbackContext, InvocationContext
    from .._events import Event
    from ..agents._base import BaseAgent
    from ..models._base import LlmRequest, LlmResponse
    from ..tools._base import BaseTool, ToolContext

__all__ = ["LoggingPlugin"]

Fields = dict[str, Any]


class LoggingPlugin(BasePlugin):
    """Logs every hook; never intervenes.

    Register it first to see every hook: a plugin that short-circuits a hook hides that hook from
    the plugins registered after it. Error hooks log at ``error_level``, the rest at ``level``.
    With ``include_content=True`` the text of messages and events, the request contents, and the
    tool arguments and results are logged too, each cut to ``max_content_chars``.
    """

    def __init__(
        self,
        name: str = "logging",
        *,
        logger: logging.Logger | str = "trio_agents.plugins.logging",
        level: int = logging.INFO,
        error_level: int = logging.WARNING,
        include_content: bool = False,
        max_content_chars: int = 2000,
    ) -> None:
        super().__init__(name)
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.level = level
        self.error_level = error_level
        self.include_content = include_content
        self.max_content_chars = max_content_chars

    # -- output ------------------------------------------------------------------------------------

    def _emit(self, level: int, hook: str, fields: Fields) -> None:
        message = " ".join([hook, *(f"{k}={_logfmt(v)}" for k, v in fields.items())])
        self.logger.log(level, "%s", message, extra={"hook": hook, "fields": fields})

    def _content(self, fields: Fields, key: str, value: Any) -> None:
        if self.include_content and value is not None:
            text = value if isinstance(value, str) else _json(value)
            if len(text) > self.max_content_chars:
                text = text[: self.max_content_chars] + "…"
            fields[key] = text

    # -- run hooks ---------------------------------------------------------------------------------

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: Content
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            fields = _run_fields(invocation_context)
            fields["parts"] = len(user_message.parts)
            self._content(fields, "text", user_message.text)
            self._emit(self.level, "on_user_message", fields)

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        if self.logger.isEnabledFor(self.level):
            fields = _run_fields(invocation_context)
            fields["agent"] = invocation_context.agent.name
            self._emit(self.level, "before_run", fields)

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            fields: Fields = {
                "invocation_id": invocation_context.invocation_id,
                "event_id": event.id,
                "author": event.author,
            }
            _put(fields, "branch", event.branch)
            _put(fields, "partial", event.partial or None)
            fields["final"] = event.is_final_response()
            _put(fields, "function_calls", [c.name for c in event.get_function_calls()] or None)
            responses = [r.name for r in event.get_function_responses()]
            _put(fields, "function_responses", responses or None)
            _put(fields, "state_keys", sorted(event.actions.state_delta) or None)
            _put(fields, "transfer_to_agent", event.actions.transfer_to_agent)
            _put(fields, "escalate", event.actions.escalate)
            _put(fields, "error_code", event.error_code)
            _usage(fields, event.usage_metadata)
            self._content(fields, "text", event.text)
            self._emit(self.level, "on_event", fields)

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        if self.logger.isEnabledFor(self.level):
            self._emit(self.level, "after_run", _run_fields(invocation_context))

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        if self.logger.isEnabledFor(self.error_level):
            fields = _run_fields(invocation_context)
            _error(fields, error)
            self._emit(self.error_level, "on_run_error", fields)

    # -- agent hooks -------------------------------------------------------------------------------

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            self._emit(self.level, "before_agent", _agent_fields(callback_context, agent.name))

    async def after_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            self._emit(self.level, "after_agent", _agent_fields(callback_context, agent.name))

    async def on_agent_error_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext, error: Exception
    ) -> None:
        if self.logger.isEnabledFor(self.error_level):
            fields = _agent_fields(callback_context, agent.name)
            _error(fields, error)
            self._emit(self.error_level, "on_agent_error", fields)

    # -- model hooks -------------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            fields = _agent_fields(callback_context, callback_context.agent_name)
            _put(fields, "model", getattr(llm_request, "model", None))
            fields["contents"] = len(getattr(llm_request, "contents", ()))
            tools = [t.name for t in getattr(llm_request, "tools", ())]
            _put(fields, "tools", tools or None)
            self._content(
                fields, "system_instruction", getattr(llm_request, "system_instruction", None)
            )
            if self.include_content:
                contents = getattr(llm_request, "contents", ())
                self._content(fields, "request", [_plain(c) for c in contents])
            self._emit(self.level, "before_model", fields)

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            fields = _agent_fields(callback_context, callback_context.agent_name)
            _put(fields, "partial", getattr(llm_response, "partial", None) or None)
            _put(fields, "finish_reason", getattr(llm_response, "finish_reason", None))
            _put(fields, "error_code", getattr(llm_response, "error_code", None))
            content = getattr(llm_response, "content", None)
            if content is not None:
                calls = [p.function_call.name for p in content.parts if p.function_call]
                _put(fields, "function_calls", calls or None)
                self._content(fields, "text", content.text)
            _usage(fields, getattr(llm_response, "usage_metadata", None))
            self._emit(self.level, "after_model", fields)

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> None:
        if self.logger.isEnabledFor(self.error_level):
            fields = _agent_fields(callback_context, callback_context.agent_name)
            _put(fields, "model", getattr(llm_request, "model", None))
            _error(fields, error)
            self._emit(self.error_level, "on_model_error", fields)

    # -- tool hooks --------------------------------------------------------------------------------

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            fields = _tool_fields(tool, tool_context)
            self._content(fields, "args", tool_args)
            self._emit(self.level, "before_tool", fields)

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: Any
    ) -> None:
        if self.logger.isEnabledFor(self.level):
            fields = _tool_fields(tool, tool_context)
            if isinstance(result, Mapping) and "error" in result:
                fields["error_result"] = True
            self._content(fields, "result", result)
            self._emit(self.level, "after_tool", fields)

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> None:
        if self.logger.isEnabledFor(self.error_level):
            fields = _tool_fields(tool, tool_context)
            _error(fields, error)
            self._emit(self.error_level, "on_tool_error", fields)

    async def close(self) -> None:
        if self.logger.isEnabledFor(self.level):
            self._emit(self.level, "close", {"plugin": self.name})


def _run_fields(ctx: InvocationContext) -> Fields:
    return {
        "invocation_id": ctx.invocation_id,
        "session_id": ctx.session.id,
        "user_id": ctx.user_id,
    }


def _agent_fields(cc: CallbackContext, agent: str) -> Fields:
    fields: Fields = {"invocation_id": cc.invocation_id, "agent": agent}
    _put(fields, "branch", cc.branch)
    return fields


def _tool_fields(tool: Any, tool_context: ToolContext) -> Fields:
    fields = _agent_fields(tool_context, tool_context.agent_name)
    fields["tool"] = getattr(tool, "name", repr(tool))
    _put(fields, "call_id", getattr(tool_context, "function_call_id", None))
    return fields


def _put(fields: Fields, key: str, value: Any) -> None:
    if value is not None:
        fields[key] = value


def _error(fields: Fields, error: BaseException) -> None:
    fields["error_type"] = type(error).__name__
    fields["error"] = str(error)


def _usage(fields: Fields, usage: Any) -> None:
    if usage is None:
        return
    _put(fields, "prompt_tokens", getattr(usage, "prompt_token_count", None))
    _put(fields, "completion_tokens", getattr(usage, "candidates_token_count", None))
    _put(fields, "total_tokens", getattr(usage, "total_token_count", None))


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value, filter=lambda _, v: v is not None, value_serializer=_bytes)
    return value


def _bytes(instance: Any, field: Any, value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr, sort_keys=True)


def _logfmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    text = value if isinstance(value, str) else _json(value)
    if text and not any(c in text for c in ' "=\\\n\t'):
        return text
    return json.dumps(text, ensure_ascii=False)
