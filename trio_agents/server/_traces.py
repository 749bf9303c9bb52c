"""Spans of agent runs, model calls and tool calls, kept per session for ADK's dev UI.

:class:`TraceRecorder` is a plugin: the runtime's own hooks feed it, no OpenTelemetry SDK is
involved. Spans are named and attributed as the OpenTelemetry GenAI conventions say
(``invoke_agent <agent>``, ``generate_content <model>``, ``execute_tool <tool>``); each model
span carries the request and the response as one log record, which the UI's Request and Response
tabs read. Memory is bounded: the most recent ``max_sessions`` sessions keep their last
``max_spans`` finished spans each. A session is its app's name and its id: sessions of one id in
two apps keep their spans apart.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._content import Content, Part
from ..plugins import BasePlugin

if TYPE_CHECKING:
    from .._context import CallbackContext, InvocationContext
    from .._events import Event
    from ..agents import BaseAgent

__all__ = ["TraceRecorder"]

DETAILS = "gen_ai.client.inference.operation.details"
"""The log record holding a model call's request and response."""


@attrs.define
class Span:
    """One finished (or open) span, in the shape ADK's dev UI reads."""

    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    attributes: dict[str, Any]
    start_time: int = attrs.field(factory=time.time_ns)
    end_time: int | None = None
    logs: list[dict[str, Any]] = attrs.field(factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "attributes": self.attributes,
            "logs": self.logs,
        }


def _new_id() -> int:
    return random.getrandbits(63) or 1


SessionOf = tuple[str, str]
"""A traced session: its app's name and its id (two apps may have sessions of one id)."""


@attrs.define
class _Run:
    """The open spans of one invocation."""

    trace_id: int
    session: SessionOf
    agents: dict[tuple[str, str], list[Span]] = attrs.field(factory=dict)
    models: dict[int, Span] = attrs.field(factory=dict)
    tools: dict[str, Span] = attrs.field(factory=dict)
    last_model: dict[tuple[str, str], Span] = attrs.field(factory=dict)
    """The latest model span of each agent and branch, until an event names it."""


ENDED_RUNS = 64
"""Ended invocations whose open spans events delivered after the end can still name."""


class SpanRecorder(BasePlugin):
    """Records spans per session from the agent, model and tool hooks; :meth:`observe` links
    them to the events they produced. The server calls it for each event it serves, so runs
    need no ``on_event`` hook (they commit each event as it is emitted)."""

    def __init__(self, *, max_sessions: int = 64, max_spans: int = 2000) -> None:
        super().__init__("trace_recorder")
        self.max_sessions = max_sessions
        self.max_spans = max_spans
        self._sessions: collections.OrderedDict[SessionOf, collections.deque[Span]] = (
            collections.OrderedDict()
        )
        self._runs: dict[str, _Run] = {}
        self._ended: collections.OrderedDict[str, _Run] = collections.OrderedDict()

    # -- reading -----------------------------------------------------------------------------------

    def session_spans(self, session_id: str, *, app_name: str | None = None) -> list[Span]:
        """The finished spans of ``session_id`` in app ``app_name``, oldest first (without
        ``app_name``: those of every app's session of that id)."""
        if app_name is not None:
            return list(self._sessions.get((app_name, session_id), ()))
        return [span for spans in self._spans_of(session_id=session_id) for span in spans]

    def event_span(self, event_id: str, *, app_name: str | None = None) -> Span | None:
        """The span that produced the event ``event_id`` (in app ``app_name``), if still kept."""
        for spans in self._spans_of(app_name=app_name):
            for span in spans:
                if span.attributes.get("gcp.vertex.agent.event_id") == event_id:
                    return span
        return None

    def _spans_of(
        self, *, app_name: str | None = None, session_id: str | None = None
    ) -> Iterator[collections.deque[Span]]:
        for (app, session), spans in self._sessions.items():
            if app_name in (None, app) and session_id in (None, session):
                yield spans

    # -- plumbing ----------------------------------------------------------------------------------

    def _run(self, ctx: InvocationContext | CallbackContext) -> _Run:
        run = self._runs.get(ctx.invocation_id)
        if run is None:
            session = (ctx.session.app_name, ctx.session.id)
            run = self._runs[ctx.invocation_id] = _Run(_new_id(), session)
        return run

    def _open(self, run: _Run, name: str, parent: Span | None, attributes: dict[str, Any]) -> Span:
        parent_id = parent.span_id if parent is not None else None
        return Span(name, run.trace_id, _new_id(), parent_id, attributes)

    def _finish(self, run: _Run, span: Span, error: BaseException | str | None = None) -> None:
        span.end_time = time.time_ns()
        if error is not None:
            kind = error if isinstance(error, str) else type(error).__name__
            span.attributes["error.type"] = kind
        spans = self._sessions.pop(run.session, None)
        if spans is None:
            spans = collections.deque(maxlen=self.max_spans)
        spans.append(span)
        self._sessions[run.session] = spans
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)

    def _agent_span(self, run: _Run, name: str, branch: str | None) -> Span | None:
        stack = run.agents.get((name, branch or ""))
        return stack[-1] if stack else None

    def _parent_of(self, run: _Run, agent: BaseAgent, branch: str | None) -> Span | None:
        ancestor = agent.parent_agent
        while ancestor is not None:
            for key, stack in run.agents.items():
                if key[0] == ancestor.name and stack and (branch or "").startswith(key[1]):
                    return stack[-1]
            ancestor = ancestor.parent_agent
        return None

    def _close_run(self, ctx: InvocationContext, error: BaseException | None) -> None:
        run = self._runs.pop(ctx.invocation_id, None)
        if run is None:
            return
        self._ended[ctx.invocation_id] = run  # events delivered after the end still link
        while len(self._ended) > ENDED_RUNS:
            self._ended.popitem(last=False)
        for span in [*run.models.values(), *run.tools.values()]:
            if span.end_time is None:
                self._finish(run, span, error or "cancelled")
        for stack in run.agents.values():
            for span in reversed(stack):
                self._finish(run, span, error or "cancelled")

    # -- run hooks ---------------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Name ``event`` in the tool span it answers and the model span it came from."""
        invocation_id = event.invocation_id
        run = self._runs.get(invocation_id) or self._ended.get(invocation_id)
        if run is None or not (run.tools or run.last_model):
            return
        for response in event.get_function_responses():
            span = run.tools.get(response.id or "")
            if span is not None:
                span.attributes.setdefault("gcp.vertex.agent.event_id", event.id)
        model = run.last_model.pop((event.author, event.branch or ""), None)
        if model is not None and not event.partial:
            model.attributes["gcp.vertex.agent.event_id"] = event.id

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._close_run(invocation_context, None)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        self._close_run(invocation_context, error)

    # -- agent hooks -------------------------------------------------------------------------------

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        run = self._run(callback_context)
        branch = callback_context.branch
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent.name,
            "gen_ai.agent.description": agent.description,
            "gen_ai.conversation.id": callback_context.session.id,
            "gcp.vertex.agent.invocation_id": callback_context.invocation_id,
        }
        span = self._open(
            run, f"invoke_agent {agent.name}", self._parent_of(run, agent, branch), attributes
        )
        run.agents.setdefault((agent.name, branch or ""), []).append(span)

    async def after_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        self._end_agent(agent, callback_context, None)

    async def on_agent_error_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext, error: Exception
    ) -> None:
        self._end_agent(agent, callback_context, error)

    def _end_agent(self, agent: BaseAgent, cc: CallbackContext, error: Exception | None) -> None:
        run = self._runs.get(cc.invocation_id)
        stack = run.agents.get((agent.name, cc.branch or "")) if run is not None else None
        if run is not None and stack:
            self._finish(run, stack.pop(), error)

    # -- model hooks -------------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: Any
    ) -> None:
        run = self._run(callback_context)
        agent, branch = callback_context.agent_name, callback_context.branch
        model = getattr(llm_request, "model", None) or "unknown"
        attributes = {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": model,
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": callback_context.session.id,
            "gcp.vertex.agent.invocation_id": callback_context.invocation_id,
        }
        span = self._open(
            run, f"generate_content {model}", self._agent_span(run, agent, branch), attributes
        )
        span.logs.append(
            {"event_name": DETAILS, "body": None, "attributes": _request_details(llm_request)}
        )
        run.models[id(callback_context)] = span

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: Any
    ) -> None:
        run = self._runs.get(callback_context.invocation_id)
        if run is None or getattr(llm_response, "partial", None):
            return
        span = run.models.pop(id(callback_context), None)
        if span is None:
            return
        finish = str(getattr(llm_response, "finish_reason", None) or "stop").lower()
        content = getattr(llm_response, "content", None)
        message = {"role": "assistant", "parts": _parts(content), "finish_reason": finish}
        span.logs[0]["attributes"]["gen_ai.output.messages"] = [message]
        span.attributes["gen_ai.response.finish_reasons"] = [finish]
        run.last_model[callback_context.agent_name, callback_context.branch or ""] = span
        self._finish(run, span)

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: Any, error: Exception
    ) -> None:
        run = self._runs.get(callback_context.invocation_id)
        span = run.models.pop(id(callback_context), None) if run is not None else None
        if run is not None and span is not None:
            run.last_model[callback_context.agent_name, callback_context.branch or ""] = span
            self._finish(run, span, error)

    # -- tool hooks --------------------------------------------------------------------------------

    async def before_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any
    ) -> None:
        run = self._run(tool_context)
        call_id = tool_context.function_call_id or ""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.description": getattr(tool, "description", ""),
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": _plain(tool_args),
            "gen_ai.conversation.id": tool_context.session.id,
            "gcp.vertex.agent.invocation_id": tool_context.invocation_id,
        }
        parent = self._agent_span(run, tool_context.agent_name, tool_context.branch)
        run.tools[call_id] = self._open(run, f"execute_tool {tool.name}", parent, attributes)

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: dict[str, Any]
    ) -> None:
        self._end_tool(tool_context, result, None)

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> None:
        self._end_tool(tool_context, None, error)

    def _end_tool(self, tc: Any, result: Mapping[str, Any] | None, error: Exception | None) -> None:
        run = self._runs.get(tc.invocation_id)
        span = run.tools.get(tc.function_call_id or "") if run is not None else None
        if run is None or span is None or span.end_time is not None:
            return
        if result is not None:
            span.attributes["gen_ai.tool.call.result"] = _plain(result)
        self._finish(run, span, error)  # kept in run.tools: the response event names it later


class TraceRecorder(SpanRecorder):
    """Records spans per session, in memory and bounded; never changes a run. A plugin of any
    Runner: its ``on_event`` hook links spans to the events they produced.

    Args:
        max_sessions: sessions whose spans are kept (the least recently traced go first).
        max_spans: finished spans kept per session (the oldest go first).
    """

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        self.observe(event)


def _request_details(request: Any) -> dict[str, Any]:
    """A model request as the GenAI log record has it: messages, instructions, tools."""
    contents: Iterable[Content] = getattr(request, "contents", ())
    details: dict[str, Any] = {
        "gen_ai.input.messages": [
            {"role": "assistant" if c.role == "model" else c.role or "user", "parts": _parts(c)}
            for c in contents
        ]
    }
    system = getattr(request, "system_instruction", None)
    if system:
        details["gen_ai.system_instructions"] = [{"type": "text", "content": system}]
    tools = getattr(request, "tools", ())
    if tools:
        details["gen_ai.tool.definitions"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": _plain(t.parameters) if t.parameters is not None else None,
            }
            for t in tools
        ]
    return details


def _parts(content: Content | None) -> list[dict[str, Any]]:
    return [_part(p) for p in (content.parts if content is not None else ())]


def _part(part: Part) -> dict[str, Any]:
    if part.function_call is not None:
        call = part.function_call
        arguments = _plain(call.args)
        return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}
    if part.function_response is not None:
        answer = part.function_response
        return {"type": "tool_call_response", "id": answer.id, "response": _plain(answer.response)}
    if part.inline_data is not None:
        blob = part.inline_data
        return {"type": "blob", "mime_type": blob.mime_type or "", "data": len(blob.data)}
    if part.file_data is not None:
        data = part.file_data
        return {"type": "file_data", "mime_type": data.mime_type or "", "uri": data.file_uri}
    return {"type": "text", "content": part.text or ""}


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (frozen mappings become dicts; anything else its repr)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)
