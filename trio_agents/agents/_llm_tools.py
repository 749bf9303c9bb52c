"""Running the function calls of one model turn (R-TOOL-1..7, R-EV-7).

Every call runs concurrently in one nursery; the responses merge, in call order, into one
function-response event authored by the calling agent. If a call fails and nothing recovers it,
the siblings are cancelled, the responses that were already complete are emitted, and the error
propagates (the Runner answers the calls left open when the run ends).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._callbacks import plugins_then_chain
from .._content import Content, FunctionCall, Part
from .._context import EventActionsDraft, InvocationContext
from .._errors import SerializationError, ToolError
from .._events import Event, EventActions
from .._serde import check_json_value, is_json_value
from .._tool_confirmation import ToolConfirmation
from .._util import without_cancelled
from ..tools._base import BaseTool, ToolContext
from ..tools._child_pause import ChildPause, ChildResume, waiting_event
from ._confirmations import emit_responses

if TYPE_CHECKING:
    from ..plugins._manager import PluginManager
    from ._llm import LlmAgent

__all__ = ["run_function_calls"]

_Result = tuple[dict[str, Any], EventActionsDraft, "ChildPause | None"]
"""A call's response, its actions, and its agent tool's paused child (if it paused)."""
NURSERY_MESSAGE = "Exceptions from Trio nursery"
"""The message of the group a nursery raises (a lone call's failure is wrapped the same way)."""


async def run_function_calls(
    agent: LlmAgent,
    ctx: InvocationContext,
    calls: list[FunctionCall],
    confirmations: Mapping[str, ToolConfirmation] | None = None,
    resumes: Mapping[str, ChildResume] | None = None,
) -> Event | None:
    """Run the calls of one model event; emit and return the merged response event (None if
    there is nothing to answer yet).

    When tools asked for confirmation, the request event is emitted too; when an agent tool's
    agent paused, a waiting event with its open calls follows; the last event emitted is
    returned. ``confirmations`` are the user's answers, by call id, for calls that run again
    after a confirmation request; ``resumes`` the paused agent tools that continue.
    """
    results: list[_Result | None] = [None] * len(calls)
    if len(calls) == 1 and not confirmations and not resumes:
        failure = await _run_single(agent, ctx, calls[0], results)
    else:  # (a re-run is rare: no need for the lone-call fast path)
        failure = await _run_concurrently(agent, ctx, calls, results, confirmations, resumes)
    response = _merged_event(agent, ctx, calls, results)
    if response is None:
        committed = None
    elif response.actions.requested_tool_confirmations:
        committed = await emit_responses(ctx, calls, response)
    else:  # the common case, one frame less
        committed = await ctx.emit(response)
    for result in results:
        if result is not None and result[2] is not None:
            committed = await ctx.emit(waiting_event(ctx, result[2]))
    if failure is not None:
        raise failure
    return committed


async def _run_single(
    agent: LlmAgent,
    ctx: InvocationContext,
    call: FunctionCall,
    results: list[_Result | None],
) -> BaseException | None:
    """One call runs in the agent's own task: no nursery, the same failure as through one.

    (Unlike a nursery child, the tool shares the agent task's context variables.)
    """
    try:
        await _run_call(agent, ctx, call, results, 0)
    except Exception as exc:
        return without_cancelled(BaseExceptionGroup(NURSERY_MESSAGE, [exc]))
    return None


async def _run_concurrently(
    agent: LlmAgent,
    ctx: InvocationContext,
    calls: list[FunctionCall],
    results: list[_Result | None],
    confirmations: Mapping[str, ToolConfirmation] | None = None,
    resumes: Mapping[str, ChildResume] | None = None,
) -> BaseException | None:
    """Every call in its own task of one nursery; a failure cancels the siblings."""
    try:
        async with trio.open_nursery() as nursery:
            for index, call in enumerate(calls):
                nursery.start_soon(
                    _run_call, agent, ctx, call, results, index, confirmations, resumes
                )
    except BaseExceptionGroup as group:
        return without_cancelled(group)
    return None


async def _run_call(
    agent: LlmAgent,
    ctx: InvocationContext,
    call: FunctionCall,
    results: list[_Result | None],
    index: int,
    confirmations: Mapping[str, ToolConfirmation] | None = None,
    resumes: Mapping[str, ChildResume] | None = None,
) -> None:
    tool = agent.tools_by_name.get(call.name)
    tool_context = ToolContext(ctx, function_call_id=call.id)
    if confirmations and call.id is not None:
        tool_context.tool_confirmation = confirmations.get(call.id)
    if resumes and call.id is not None:
        tool_context.resume_child = resumes.get(call.id)
    if tool is None:
        unknown = await _unknown(agent, ctx, call, tool_context)
        results[index] = (unknown, tool_context.actions, None)
        return
    args = _copied_args(call)  # R-TOOL-1: callbacks and tool share this copy
    if ctx.plugin_manager or _has_tool_hooks(agent):
        result = await _ToolCall(agent, ctx.plugin_manager, tool, args, tool_context).invoke()
    elif tool.timeout is None:  # nothing to consult: the tool alone
        result = await tool.run_async(args=args, tool_context=tool_context)
    else:
        result = await call_tool(tool, args, tool_context)
    if tool.is_long_running and not result:
        return  # R-TOOL-2.5: no response part yet
    response = _normalized(result, tool, call)
    results[index] = (response, tool_context.actions, tool_context.paused_child)


@attrs.frozen
class _ToolCall:
    """One call of a tool through the plugins' and the agent's tool hooks (S-CB-1)."""

    agent: LlmAgent
    plugins: PluginManager
    tool: BaseTool
    args: dict[str, Any]
    tool_context: ToolContext

    async def invoke(self) -> Any:
        """Before-tool hooks (a non-None answer replaces the call), the tool (its errors through
        the error hooks), then the after-tool hooks (a non-None answer replaces the result)."""
        result = await self.before()
        if result is None:
            result = await self._run()
        replacement = await self._hook(
            "after_tool", "after_tool_callback", result, tool_response=result
        )
        return result if replacement is None else replacement

    async def _run(self) -> Any:
        try:
            return await call_tool(self.tool, self.args, self.tool_context)
        except Exception as exc:
            recovered = await self.on_error(exc)
            if recovered is None:
                raise
            return recovered

    async def before(self) -> Any:
        """Plugins, then the agent's before-tool callbacks; the first non-None answer wins."""
        return await self._hook("before_tool", "before_tool_callback")

    async def on_error(self, error: Exception) -> Any:
        """Plugins, then the agent's on-tool-error callbacks; a non-None answer recovers."""
        return await self._hook("on_tool_error", "on_tool_error_callback", error, error=error)

    async def _hook(self, plugin_hook: str, field: str, *extra: Any, **named: Any) -> Any:
        """The plugins' ``plugin_hook``, then the agent's ``field`` chain (first answer wins)."""
        tool, args, tool_context = self.tool, self.args, self.tool_context
        plugins = self.plugins
        answer = None
        if plugins:
            answer = getattr(plugins, plugin_hook)(tool, args, tool_context, *extra)
        return await plugins_then_chain(
            answer,
            self.agent.callbacks[field],
            tool=tool,
            args=args,
            tool_context=tool_context,
            **named,
        )


async def call_tool(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> Any:
    """Run ``tool`` once, within its ``timeout``: past it, the call is cancelled and its result
    is a structured error the model can act on (the run goes on)."""
    if tool.timeout is None:
        return await tool.run_async(args=args, tool_context=tool_context)
    with trio.move_on_after(tool.timeout):
        return await tool.run_async(args=args, tool_context=tool_context)
    return {"error": "timeout", "tool": tool.name, "seconds": tool.timeout}


def _has_tool_hooks(agent: LlmAgent) -> bool:
    hooks = agent.callbacks
    return bool(
        hooks["before_tool_callback"]
        or hooks["after_tool_callback"]
        or hooks["on_tool_error_callback"]
    )


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copied_args(call: FunctionCall) -> dict[str, Any]:
    """A deep copy of the call's arguments (a shallow one when every value is a scalar)."""
    args = dict(call.args)
    for value in args.values():
        if type(value) not in _SCALARS:
            return copy.deepcopy(args)
    return args


class _UnknownTool(BaseTool):
    """Stands in for a tool the model named but the agent does not have (R-TOOL-3)."""

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        raise ValueError(f"no tool named {self.name!r}")


async def _unknown(
    agent: LlmAgent, ctx: InvocationContext, call: FunctionCall, tool_context: ToolContext
) -> dict[str, Any]:
    """R-TOOL-3 [2.13]: before-tool callbacks may answer; else the error callbacks see a
    ``ValueError``; else the model is told which tools exist. After-tool callbacks are skipped."""
    stand_in = _UnknownTool(name=call.name)
    hooks = _ToolCall(agent, ctx.plugin_manager, stand_in, _copied_args(call), tool_context)
    answer = await hooks.before()
    if answer is not None:
        return _normalized(answer, stand_in, call)
    message = _unknown_tool(agent, call.name)
    recovered = await hooks.on_error(ValueError(message["error"]))
    return message if recovered is None else _normalized(recovered, stand_in, call)


def _unknown_tool(agent: LlmAgent, name: str) -> dict[str, Any]:
    available = ", ".join(agent.tools_by_name)
    return {
        "error": (
            f"Invoking `{name}()` failed as no tool with that name is available. The tools you "
            f"can call are: {available}. You could retry, but it is IMPORTANT that you only call "
            "a tool from that list."
        )
    }


def _normalized(result: Any, tool: BaseTool, call: FunctionCall) -> dict[str, Any]:
    """R-TOOL-5: a dict as is, anything else as ``{"result": value}``; it must be JSON once
    pydantic models and dataclasses in it are dumped (as ADK's serialization dumps them)."""
    response = result if isinstance(result, dict) else {"result": result}
    if is_json_value(response):
        return response
    dumped = _dumped_records(response)
    if is_json_value(dumped):
        return dumped  # type: ignore[no-any-return]
    try:
        check_json_value(response, f"tool {tool.name!r} result")
    except SerializationError as exc:
        raise ToolError(
            f"tool {tool.name!r} (call {call.id}) returned a value that is not JSON: {exc}",
            tool_name=tool.name,
            call_id=call.id,
        ) from exc
    return response


def _dumped_records(value: Any) -> Any:
    """``value`` with the pydantic models (without their ``None`` fields) and dataclass
    instances in it turned into dicts, recursively."""
    if isinstance(value, dict):
        return {key: _dumped_records(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_dumped_records(item) for item in value]
    if callable(getattr(value, "model_dump", None)) and not isinstance(value, type):
        return value.model_dump(mode="json", exclude_none=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dumped_records(dataclasses.asdict(value))
    return value


def _merged_event(
    agent: LlmAgent,
    ctx: InvocationContext,
    calls: list[FunctionCall],
    results: list[_Result | None],
) -> Event | None:
    parts: list[Part] = []
    texts: list[Part] = []
    merged: EventActionsDraft | None = None  # made for the first call with actions to merge
    for call, result in zip(calls, results, strict=True):
        if result is None:
            continue
        response, actions, _ = result
        parts.append(Part.from_function_response(call.name, response, id=call.id))
        if _has_actions(actions):
            merged = EventActionsDraft() if merged is None else merged
            _merge_actions(merged, actions)
            if actions.skip_summarization and _summarizes_itself(agent, call):
                texts.append(_display_text(response))
    if not parts:
        return None
    return Event(
        invocation_id=ctx.invocation_id,  # stamped here, so emit need not copy the event
        author=agent.name,
        branch=ctx.branch,
        content=Content(role="user", parts=[*parts, *texts]),
        actions=merged.freeze() if merged is not None and not merged.is_empty() else EventActions(),
    )


def _summarizes_itself(agent: LlmAgent, call: FunctionCall) -> bool:
    """R-AT-8 [2.13]: an agent tool that skips summarization also shows its answer as text, if
    its call kept ``skip_summarization`` (a child left waiting on a long-running call drops it)."""
    return bool(getattr(agent.tools_by_name.get(call.name), "skip_summarization", False))


def _display_text(response: dict[str, Any]) -> Part:
    answer = response.get("result", response)
    return Part.from_text(answer if isinstance(answer, str) else json.dumps(answer))


def _has_actions(actions: EventActionsDraft) -> bool:
    """Whether merging ``actions`` changes anything (a False or empty scalar still counts)."""
    return bool(
        actions.state_delta
        or actions.artifact_delta
        or actions.requested_auth_configs
        or actions.requested_tool_confirmations
        or actions.agent_state is not None
        or actions.end_of_agent is not None
        or actions.transfer_to_agent is not None
        or actions.escalate is not None
        or actions.skip_summarization is not None
    )


def _merge_actions(into: EventActionsDraft, actions: EventActionsDraft) -> None:
    """R-EV-7: deep-merge in call order; a later non-None scalar wins. A merged key carries its
    latest write time, so the merge stands for the latest of the writes it combines."""
    _merge_state(into, actions)
    into.artifact_delta.update(actions.artifact_delta)
    _deep_merge(into.requested_auth_configs, actions.requested_auth_configs)
    into.requested_tool_confirmations.update(actions.requested_tool_confirmations)
    if actions.agent_state is not None:
        into.agent_state = actions.agent_state
    for name in ("transfer_to_agent", "escalate", "skip_summarization", "end_of_agent"):
        value = getattr(actions, name)
        if value is not None:
            setattr(into, name, value)


def _merge_state(into: EventActionsDraft, actions: EventActionsDraft) -> None:
    """Merge one call's state writes: per key, the later write wins (its dict merged over the
    earlier one's), so the merged event stands for the latest write of each key it carries."""
    if actions.clock is None or not into.times:
        _deep_merge(into.state_delta, actions.state_delta)
    else:
        delta = into.state_delta
        for key, value in actions.state_delta.items():
            if into.times.get(key, 0) > actions.times.get(key, 0):  # ours is the later write
                _deep_merge(delta, {key: _merged_under(value, delta[key])})
            else:
                _deep_merge(delta, {key: value})
    if actions.clock is not None:
        into.clock = actions.clock
        for key, time in actions.times.items():
            into.times[key] = max(time, into.times.get(key, 0))


def _merged_under(earlier: Any, later: Any) -> Any:
    if isinstance(earlier, dict) and isinstance(later, dict):
        merged = dict(earlier)
        _deep_merge(merged, later)
        return merged
    return later


def _deep_merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merged = dict(into[key])
            _deep_merge(merged, value)
            into[key] = merged
        else:
            into[key] = value
