"""TracingPlugin: OpenTelemetry spans for invocations, agents, model calls and tool calls.

Needs the ``otel`` extra (``opentelemetry-api``), imported only when the plugin is created.

Spans follow the task tree with explicit parents, never a context held across a hook boundary:
``invoke_workflow <root>`` → ``invoke_agent <agent>`` (nested like the agents; parallel branches
are siblings) → ``generate_content <model>`` and ``execute_tool <tool>`` (concurrent calls of one
model turn are siblings). The model and tool spans are also made current while the model or tool
runs, so spans a tool opens itself nest under its ``execute_tool`` span, and an ``AgentTool``
child run nests under it too. Attributes follow the OpenTelemetry GenAI semantic conventions;
prompts, answers, tool arguments and results are recorded only with ``capture_content=True``.
Spans still open when the invocation ends (the consumer left, ``cancel()``, an error elsewhere)
are ended with an error status ``cancelled``.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import ConfigurationError
from .._version import __version__
from ._base import BasePlugin

if TYPE_CHECKING:
    from types import ModuleType

    from .._context import CallbackContext, InvocationContext
    from .._events import Event
    from ..agents._base import BaseAgent
    from ..models._base import LlmRequest, LlmResponse
    from ..tools._base import BaseTool, ToolContext

__all__ = ["TracingPlugin"]

CANCELLED = "cancelled"


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigurationError(
            "TracingPlugin needs OpenTelemetry: pip install 'trio_agents[otel]' (opentelemetry-api)"
        ) from exc


@attrs.define
class _Open:
    """An open model or tool span; ``owner`` keeps the keyed context object alive."""

    owner: object
    span: Any
    agent: str
    branch: str | None
    token: object | None = None
    failed: bool = False


@attrs.define
class _Trace:
    """The open spans of one invocation."""

    root: Any
    agents: dict[str, list[tuple[str, Any]]] = attrs.field(factory=dict)
    """Agent name → stack of ``(branch, span)``."""
    models: dict[int, _Open] = attrs.field(factory=dict)
    tools: dict[int, _Open] = attrs.field(factory=dict)


class TracingPlugin(BasePlugin):
    """Emits OpenTelemetry spans; never intervenes.

    ``tracer_provider`` defaults to the global one. Register it after plugins that answer
    ``before_model`` (a response cache): an answered call never reaches the model and gets no
    ``generate_content`` span.
    """

    def __init__(
        self,
        name: str = "tracing",
        *,
        tracer_provider: Any = None,
        capture_content: bool = False,
        max_content_chars: int = 10_000,
    ) -> None:
        super().__init__(name)
        self._trace_api: Any = _import("opentelemetry.trace")
        self._context_api: Any = _import("opentelemetry.context")
        self._tracer: Any = self._trace_api.get_tracer(
            "trio_agents", __version__, tracer_provider=tracer_provider
        )
        self.capture_content = capture_content
        self.max_content_chars = max_content_chars
        self._live: dict[str, _Trace] = {}

    # -- span plumbing -----------------------------------------------------------------------------

    def _start(self, name: str, parent: Any, attributes: dict[str, Any], *, client: bool) -> Any:
        trace = self._trace_api
        context = trace.set_span_in_context(parent) if parent is not None else None
        kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    def _attach(self, span: Any) -> object:
        return self._context_api.attach(self._trace_api.set_span_in_context(span))

    def _detach(self, call: _Open) -> None:
        if call.token is not None:
            token, call.token = call.token, None
            self._context_api.detach(token)

    def _fail(self, span: Any, error: BaseException | str) -> None:
        trace = self._trace_api
        if isinstance(error, BaseException):
            span.record_exception(error)
            error_type, description = type(error).__name__, str(error)
        else:
            error_type = description = error
        span.set_attribute("error.type", error_type)
        span.set_status(trace.Status(trace.StatusCode.ERROR, description))

    def _trace(self, ctx: InvocationContext) -> _Trace:
        trace = self._live.get(ctx.invocation_id)
        if trace is None:
            root = ctx.agent.name
            span = self._start(
                f"invoke_workflow {root}",
                None,  # the current context: a caller's span, or an AgentTool's execute_tool
                {
                    "gen_ai.operation.name": "invoke_workflow",
                    "gen_ai.workflow.name": root,
                    "gen_ai.conversation.id": ctx.session.id,
                    "trio_agents.invocation_id": ctx.invocation_id,
                    "trio_agents.user_id": ctx.user_id,
                },
                client=False,
            )
            trace = self._live[ctx.invocation_id] = _Trace(root=span)
        return trace

    def _trace_of(self, cc: CallbackContext) -> _Trace:
        return self._trace(cc.invocation_context)

    def _agent_span(self, trace: _Trace, name: str, branch: str | None) -> Any:
        for agent_branch, span in reversed(trace.agents.get(name, ())):
            if agent_branch == (branch or ""):
                return span
        return None

    def _parent_of(self, trace: _Trace, agent: BaseAgent, branch: str | None) -> Any:
        """The span of the nearest running ancestor on this branch, else the invocation span."""
        here = branch or ""
        ancestor = agent.parent_agent
        while ancestor is not None:
            for agent_branch, span in reversed(trace.agents.get(ancestor.name, ())):
                if not agent_branch or here == agent_branch or here.startswith(agent_branch + "."):
                    return span
            ancestor = ancestor.parent_agent
        return trace.root

    def _end_all(self, trace: _Trace, error: BaseException | None) -> None:
        for call in (*trace.models.values(), *trace.tools.values()):
            if not call.failed:
                self._fail(call.span, CANCELLED)
            call.span.end()
        interrupted = error is not None or bool(trace.models or trace.tools)
        for stack in trace.agents.values():
            for _, span in reversed(stack):
                if interrupted:
                    self._fail(span, CANCELLED)
                span.end()
        if error is not None:
            self._fail(trace.root, error)
        elif interrupted:
            self._fail(trace.root, CANCELLED)
        trace.root.end()

    def _text(self, value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, default=repr)
        return text[: self.max_content_chars]

    # -- run hooks ---------------------------------------------------------------------------------

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._trace(invocation_context)

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        self._trace(invocation_context)

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        trace = self._live.pop(invocation_context.invocation_id, None)
        if trace is not None:
            self._end_all(trace, None)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        trace = self._live.pop(invocation_context.invocation_id, None)
        if trace is not None:
            self._end_all(trace, error)

    # -- agent hooks -------------------------------------------------------------------------------

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        trace = self._trace_of(callback_context)
        branch = callback_context.branch
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent.name,
            "gen_ai.conversation.id": callback_context.session.id,
        }
        if agent.description:
            attributes["gen_ai.agent.description"] = agent.description
        if branch:
            attributes["trio_agents.branch"] = branch
        parent = self._parent_of(trace, agent, branch)
        span = self._start(f"invoke_agent {agent.name}", parent, attributes, client=False)
        trace.agents.setdefault(agent.name, []).append((branch or "", span))

    async def after_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        # After a cancellation (R-AG-3) the agent's span and its open calls end as cancelled.
        self._end_agent(callback_context, agent, CANCELLED if callback_context.cancelled else None)

    async def on_agent_error_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext, error: Exception
    ) -> None:
        self._end_agent(callback_context, agent, error)

    def _end_agent(
        self, cc: CallbackContext, agent: BaseAgent, error: BaseException | str | None
    ) -> None:
        trace = self._live.get(cc.invocation_id)
        if trace is None:
            return
        self._end_leftovers(trace, agent.name, cc.branch, interrupted=error is not None)
        branch = cc.branch or ""
        stack = trace.agents.get(agent.name, [])
        for index in range(len(stack) - 1, -1, -1):
            if stack[index][0] == branch:
                _, span = stack.pop(index)
                if error is not None:
                    self._fail(span, error)
                span.end()
                break
        if not stack:
            trace.agents.pop(agent.name, None)

    def _end_leftovers(
        self, trace: _Trace, agent: str, branch: str | None, *, interrupted: bool
    ) -> None:
        """End the calls of ``agent`` that no after hook closed.

        A model call whose ``before_model`` a later plugin answered never gets ``after_model``;
        its span is ended with ``trio_agents.no_response`` (its context was made current in this
        same task, so it is detached here). When the agent failed, calls that did not fail
        themselves were cancelled.
        """
        for table in (trace.models, trace.tools):
            for key, call in list(table.items()):
                if call.agent != agent or (call.branch or "") != (branch or ""):
                    continue
                del table[key]
                if call.failed:
                    pass
                elif interrupted:
                    self._fail(call.span, CANCELLED)
                else:
                    call.span.set_attribute("trio_agents.no_response", True)
                if table is trace.models:
                    self._detach(call)
                call.span.end()

    # -- model hooks -------------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        trace = self._trace_of(callback_context)
        agent, branch = callback_context.agent_name, callback_context.branch
        model = getattr(llm_request, "model", None) or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": model,
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": callback_context.session.id,
        }
        tools = [t.name for t in getattr(llm_request, "tools", ())]
        if tools:
            attributes["trio_agents.tool_names"] = tools
        if self.capture_content:
            system = getattr(llm_request, "system_instruction", None)
            if system:
                attributes["gen_ai.system_instructions"] = self._text(system)
            contents = [_plain(c) for c in getattr(llm_request, "contents", ())]
            attributes["gen_ai.input.messages"] = self._text(contents)
        self._end_leftovers(trace, agent, branch, interrupted=False)
        parent = self._agent_span(trace, agent, branch) or trace.root
        span = self._start(f"generate_content {model}", parent, attributes, client=True)
        call = _Open(callback_context, span, agent, branch)
        call.token = self._attach(span)
        trace.models[id(callback_context)] = call

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> None:
        trace = self._live.get(callback_context.invocation_id)
        call = trace.models.get(id(callback_context)) if trace is not None else None
        if call is None or getattr(llm_response, "partial", None):
            return
        assert trace is not None
        del trace.models[id(callback_context)]
        span = call.span
        finish = getattr(llm_response, "finish_reason", None)
        if finish:
            span.set_attribute("gen_ai.response.finish_reasons", [finish])
        usage = getattr(llm_response, "usage_metadata", None)
        if usage is not None:
            for attribute, field in (
                ("gen_ai.usage.input_tokens", "prompt_token_count"),
                ("gen_ai.usage.output_tokens", "candidates_token_count"),
            ):
                value = getattr(usage, field, None)
                if value is not None:
                    span.set_attribute(attribute, value)
        error_code = getattr(llm_response, "error_code", None)
        if error_code:
            self._fail(span, str(error_code))
        content = getattr(llm_response, "content", None)
        if self.capture_content and content is not None:
            span.set_attribute("gen_ai.output.messages", self._text([_plain(content)]))
        self._detach(call)
        span.end()

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> None:
        trace = self._live.get(callback_context.invocation_id)
        call = trace.models.get(id(callback_context)) if trace is not None else None
        if call is not None:
            self._fail(call.span, error)  # ended by after_model if recovered, else later
            call.failed = True
            self._detach(call)

    # -- tool hooks --------------------------------------------------------------------------------

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> None:
        trace = self._trace(tool_context.invocation_context)
        agent, branch = tool_context.agent_name, tool_context.branch
        name = getattr(tool, "name", "unknown")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "gen_ai.agent.name": agent,
        }
        description = getattr(tool, "description", "")
        if description:
            attributes["gen_ai.tool.description"] = description
        if tool_context.function_call_id:
            attributes["gen_ai.tool.call.id"] = tool_context.function_call_id
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = self._text(tool_args)
        parent = self._agent_span(trace, agent, branch) or trace.root
        span = self._start(f"execute_tool {name}", parent, attributes, client=False)
        call = _Open(tool_context, span, agent, branch)
        call.token = self._attach(span)
        trace.tools[id(tool_context)] = call

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: Any
    ) -> None:
        trace = self._live.get(tool_context.invocation_id)
        call = trace.tools.pop(id(tool_context), None) if trace is not None else None
        if call is None:
            return
        if self.capture_content:
            call.span.set_attribute("gen_ai.tool.call.result", self._text(result))
        self._detach(call)
        call.span.end()

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> None:
        trace = self._live.get(tool_context.invocation_id)
        call = trace.tools.get(id(tool_context)) if trace is not None else None
        if call is not None:
            self._fail(call.span, error)  # ended by after_tool if recovered, else later
            call.failed = True
            self._detach(call)


def _plain(record: Any) -> Any:
    if attrs.has(type(record)):
        return attrs.asdict(record, filter=lambda _, v: v is not None, value_serializer=_no_bytes)
    return record


def _no_bytes(instance: Any, field: Any, value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return value
