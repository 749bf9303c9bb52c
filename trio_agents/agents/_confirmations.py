"""Tool confirmation in the LLM flow (R-LRO-5): asking for it, and re-running on the answer.

A turn whose tools asked for confirmation ends with a long-running ``adk_request_confirmation``
call per such tool, authored by the agent; its arguments carry the original call and the
requested :class:`~trio_agents.ToolConfirmation`. When the user's answer starts the next run,
the agent that asked re-runs the original calls, each with ``tool_context.tool_confirmation``
set, before it calls the model again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._aftermath import is_closing_response
from .._content import Content, FunctionCall, FunctionResponse, Part
from .._events import Event, replace
from .._ids import new_function_call_id
from .._serde import unstructure
from .._tool_confirmation import REQUEST_CONFIRMATION, ToolConfirmation, confirmation_from_response

if TYPE_CHECKING:
    from .._context import InvocationContext
    from ._llm import LlmAgent

__all__ = ["confirmation_answers", "emit_responses"]


def request_event(ctx: InvocationContext, calls: Sequence[FunctionCall], response: Event) -> Event:
    """The event asking the client to confirm the calls whose tools requested it."""
    parts: list[Part] = []
    for call_id, confirmation in response.actions.requested_tool_confirmations.items():
        original = next((c for c in calls if c.id == call_id), None)
        if original is None:
            continue
        parts.append(
            Part(
                function_call=FunctionCall(
                    name=REQUEST_CONFIRMATION,
                    id=new_function_call_id(),
                    args={
                        "originalFunctionCall": unstructure(original),
                        "toolConfirmation": confirmation.to_dict(),
                    },
                )
            )
        )
    return Event(
        invocation_id=ctx.invocation_id,
        author=ctx.agent.name,
        branch=ctx.branch,
        content=Content(role="model", parts=parts),
        long_running_tool_ids=[
            p.function_call.id for p in parts if p.function_call and p.function_call.id
        ],
    )


async def emit_responses(
    ctx: InvocationContext, calls: Sequence[FunctionCall], response: Event
) -> Event:
    """Emit the merged function-response event and, when its tools asked for confirmation, the
    request event; return the last event emitted (which ends the turn when a request is made).

    As ADK orders them: when some responses are settled (not waiting for a confirmation), the
    responses come first and stop skipping summarization; otherwise the request comes first.
    """
    if not response.actions.requested_tool_confirmations:
        return await ctx.emit(response)
    request = request_event(ctx, calls, response)
    if not request.get_function_calls():
        return await ctx.emit(response)
    waiting = response.actions.requested_tool_confirmations
    if any(r.id not in waiting for r in response.get_function_responses()):
        settled = replace(
            response, {"actions": replace(response.actions, {"skip_summarization": None})}
        )
        await ctx.emit(settled)
        return await ctx.emit(request)
    await ctx.emit(request)
    return await ctx.emit(response)


def confirmation_answers(
    agent: LlmAgent, ctx: InvocationContext
) -> tuple[list[FunctionCall], dict[str, ToolConfirmation]]:
    """The calls of ``agent`` that the user's message confirms or rejects, not yet re-run, and
    the answer for each (by original call id)."""
    content = ctx.user_content
    answers = _answers(content) if content is not None else {}
    if not answers:
        return [], {}
    requests, originals, rerun = _scan(agent, ctx.session.events, answers)
    calls: list[FunctionCall] = []
    confirmations: dict[str, ToolConfirmation] = {}
    for request_id, answer in answers.items():
        original_id = requests.get(request_id)
        call = originals.get(original_id) if original_id is not None else None
        if call is None or call.id is None or call.id in rerun or call.id in confirmations:
            continue
        calls.append(call)
        confirmations[call.id] = confirmation_from_response(answer.response, request_id)
    return calls, confirmations


def _scan(
    agent: LlmAgent, events: Sequence[Event], answers: Mapping[str, FunctionResponse]
) -> tuple[dict[str, str], dict[str, FunctionCall], set[str]]:
    """From the newest event back: ``agent``'s confirmation requests that ``answers`` answer
    (request id -> original call id), the calls by id, and the ids answered after the user's
    answer (calls already re-run; a closing response the runtime wrote does not count)."""
    requests: dict[str, str] = {}
    originals: dict[str, FunctionCall] = {}
    rerun: set[str] = set()
    answered_here = False
    calls_seen: set[str] = set()
    for event in reversed(events):
        responses = event.get_function_responses()
        if event.author == "user" and any(r.id in answers for r in responses):
            answered_here = True
        if not answered_here:
            rerun.update(r.id for r in responses if r.id and not is_closing_response(r))
        for call in event.get_function_calls():
            if call.id is None:
                continue
            if call.id in answers:
                calls_seen.add(call.id)
            if call.name != REQUEST_CONFIRMATION:
                originals.setdefault(call.id, call)
            elif call.id in answers and event.author == agent.name:
                original = call.args.get("originalFunctionCall")
                if isinstance(original, dict) and isinstance(original.get("id"), str):
                    requests[call.id] = original["id"]
        if len(calls_seen) == len(answers) and all(i in originals for i in requests.values()):
            break  # every answered call found, and the original of every request
    return requests, originals, rerun


def _answers(content: Content) -> dict[str, FunctionResponse]:
    found: dict[str, FunctionResponse] = {}
    for part in content.parts:
        response = part.function_response
        if response is not None and response.id:
            found[response.id] = response
    return found
