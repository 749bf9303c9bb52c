"""The LLM step loop (R-LLM-2..6): build the request, call the model, run the tools.

A step calls the model once (through the before/after/on-error model callbacks), emits the model
event (and, when streaming, the partial chunks before it), runs the requested tools concurrently
and emits one merged function-response event. Steps repeat until a step ends on a final response,
a partial event, or no event at all.
"""

from __future__ import annotations

import inspect
import json
import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._callbacks import plugins_then_chain
from .._config import StreamingMode
from .._content import Content, FunctionCall, Part
from .._context import (
    CallbackContext,
    EventActionsDraft,
    InvocationContext,
    ReadonlyContext,
    with_call_ids,
)
from .._errors import ModelTimeoutError, SerializationError
from .._events import Event
from ..models._base import LlmRequest, LlmResponse, Model
from ..tools._base import BaseTool, ToolContext
from ..tools._child_pause import children_to_resume
from ..tools._schema import json_schema
from ..tools._set_model_response import (
    SET_MODEL_RESPONSE,
    SET_MODEL_RESPONSE_INSTRUCTION,
    SetModelResponseTool,
)
from ._confirmations import confirmation_answers
from ._instructions import inject_session_state
from ._llm import LlmAgent
from ._llm_contents import history_for
from ._llm_tools import run_function_calls
from ._llm_toolsets import in_step_tools

if TYPE_CHECKING:
    from .._resume_plan import ResumePlan
    from ._llm import InstructionProvider

__all__ = ["run_llm_agent"]

NO_CONTENT = "MODEL_RETURNED_NO_CONTENT"
INVALID_OUTPUT = "INVALID_OUTPUT_SCHEMA"
_DECLARE_ONLY = BaseTool.process_llm_request


async def run_llm_agent(agent: LlmAgent, ctx: InvocationContext) -> None:
    """Run steps until one ends on a final response, a partial event or no event (R-LLM-2)."""
    step = _step_with_toolsets if agent.uses_toolsets else _step
    plan = ctx.resume_plan
    if plan is not None and plan.last_event(agent) is not None and await _resume(agent, ctx, plan):
        return
    if _answers_calls(ctx) and (
        await _rerun_confirmed(agent, ctx) or await _resume_agent_tools(agent, ctx)
    ):
        return
    while not ctx.end_invocation:
        last = await step(agent, ctx)
        if last is None or last.partial or last.is_final_response():
            return


def _answers_calls(ctx: InvocationContext) -> bool:
    content = ctx.user_content
    return content is not None and any(p.function_response is not None for p in content.parts)


async def _rerun_confirmed(agent: LlmAgent, ctx: InvocationContext) -> bool:
    """Run again the calls the user's message confirms or rejects (R-LRO-5); True when the
    re-run asks for another confirmation, which ends the turn."""
    calls, confirmations = confirmation_answers(agent, ctx)
    if not calls:
        return False
    last = await _run_again(agent, ctx, calls, confirmations=confirmations)
    return last is not None and bool(
        last.long_running_tool_ids or last.actions.requested_tool_confirmations
    )


async def _resume(agent: LlmAgent, ctx: InvocationContext, plan: ResumePlan) -> bool:
    """Continue ``agent``'s turn from its last committed event; True when the turn is over.

    Calls of its last model turn that have no committed result run again (the runtime's closing
    response is not a result); a turn that ended on a final answer is not taken up again; a turn
    still waiting for the client stays paused unless the client has answered since.
    """
    calls = plan.calls_to_run(agent)
    if calls:
        responses = await _run_again(agent, ctx, calls)
        if responses is None:
            return True  # nothing to answer yet (long-running): the turn waits
        return _hands_off(agent, ctx, responses) or _turn_over(responses)
    if plan.answered_since(agent):
        return False  # the client answered: the model takes the answer
    if plan.waits_for_client(agent):
        ctx.mark_paused()
        return True
    last = plan.last_event(agent)
    return last is not None and _turn_over(last)


def _turn_over(event: Event) -> bool:
    return event.is_final_response() or bool(
        event.long_running_tool_ids or event.actions.requested_tool_confirmations
    )


async def _resume_agent_tools(agent: LlmAgent, ctx: InvocationContext) -> bool:
    """Continue the agent tools whose paused agent the user's message answers: each call runs
    again and resumes its agent; True when the turn is over (e.g. an agent paused again)."""
    resumes = children_to_resume(ctx)
    if not resumes:
        return False
    calls = _calls_by_id(ctx, agent, list(resumes))
    if not calls:
        return False
    last = await _run_again(agent, ctx, calls, resumes=resumes)
    return last is None or _turn_over(last)


async def _run_again(
    agent: LlmAgent, ctx: InvocationContext, calls: list[FunctionCall], **answers: Any
) -> Event | None:
    """Run ``calls`` of an earlier model turn (with the agent's toolsets' tools, if any);
    ``answers``: the confirmations or paused agent tools they continue."""

    async def rerun(agent: LlmAgent, ctx: InvocationContext) -> Event | None:
        return await run_function_calls(agent, ctx, calls, **answers)

    return await (in_step_tools(agent, ctx, rerun) if agent.uses_toolsets else rerun(agent, ctx))


def _hands_off(agent: LlmAgent, ctx: InvocationContext, responses: Event) -> bool:
    """Whether the tools' responses transfer to another agent (its turn is then over)."""
    target = responses.actions.transfer_to_agent
    if target:
        ctx.transfer_to = agent.root_agent.find_agent(target)
    return bool(target)


def _calls_by_id(ctx: InvocationContext, agent: LlmAgent, ids: list[str]) -> list[FunctionCall]:
    """``agent``'s calls with these ids, from the newest event back, in call order."""
    found: dict[str, FunctionCall] = {}
    for event in reversed(ctx.session.events):
        if event.author != agent.name:
            continue
        for call in event.get_function_calls():
            if call.id in ids and call.id not in found:
                found[call.id] = call
        if len(found) == len(ids):
            break
    return [found[i] for i in ids if i in found]


async def _step_with_toolsets(agent: LlmAgent, ctx: InvocationContext) -> Event | None:
    """A step whose tools its agent's toolsets give (asked once, at the start of the step)."""
    return await in_step_tools(agent, ctx, _step)


async def _step(agent: LlmAgent, ctx: InvocationContext) -> Event | None:
    request = await build_request(agent, ctx)
    cc = CallbackContext(ctx) if _uses_callback_context(agent, ctx) else None
    response = await _call_model(agent, ctx, cc, request)
    if response is None:
        return None
    event = _model_event(agent, ctx, cc, response)
    if event is None:
        return None
    event = await ctx.emit(event)
    calls = event.get_function_calls()
    if not calls:
        return event
    responses = await run_function_calls(agent, ctx, calls)
    if responses is not None and _hands_off(agent, ctx, responses):
        return None  # hand-off: this agent's turn is over (R-XFER-3, ARCHITECTURE §4)
    if responses is not None and agent.output_schema is not None:
        answer = _set_model_response(agent, ctx, responses)
        if answer is not None:
            return await ctx.emit(answer)
    return responses or event


def _set_model_response(agent: LlmAgent, ctx: InvocationContext, responses: Event) -> Event | None:
    """The final answer an accepted ``set_model_response`` call gave, as the model event ADK
    makes of it (its JSON text, the output key set), or None."""
    tool = agent.tools_by_name.get(SET_MODEL_RESPONSE)
    if not isinstance(tool, SetModelResponseTool):
        return None
    for response in responses.get_function_responses():
        if response.name != SET_MODEL_RESPONSE:
            continue
        try:
            answer = tool.answer(response.response)
        except SerializationError:
            continue  # the model was told what is wrong and calls again
        text = json.dumps(answer, ensure_ascii=False)
        event = Event(
            invocation_id=ctx.invocation_id,
            author=agent.name,
            branch=ctx.branch,
            content=Content(role="model", parts=[Part(text=text)]),
        )
        return apply_output(agent, CallbackContext(ctx), event)
    return None


# -- request assembly (R-LLM-3) --------------------------------------------------------------------


async def build_request(agent: LlmAgent, ctx: InvocationContext) -> LlmRequest:
    model = agent.canonical_model
    request = LlmRequest(
        model=model.model or None,
        generation_config=dict(agent.generate_content_config),
        labels={"adk_agent_name": agent.name},
    )
    static = _static_instruction(agent)
    if static is not None:
        request.system_instruction = static
    else:
        request.append_instructions(
            await _global_instruction(agent, ctx),
            await _instruction(agent.instruction, ctx),
            _identity(agent),
        )
    if agent.output_schema is not None and agent.tools:
        request.append_instructions(SET_MODEL_RESPONSE_INSTRUCTION)
    request.contents = history_for(ctx).request_contents(agent.include_contents)
    tools = agent.run_tools
    declared = _declare(tools, request)
    if declared < len(tools):
        await _add_tools(tools[declared:], ctx, request)
    if agent.output_schema is not None and not agent.tools:
        request.response_schema = output_json_schema(agent)
    return request


def _declare(tools: list[BaseTool], request: LlmRequest) -> int:
    """Add the leading tools that only declare themselves, directly; return how many."""
    for index, tool in enumerate(tools):
        if getattr(tool.process_llm_request, "__func__", None) is not _DECLARE_ONLY:
            return index
        declaration = tool.declaration()
        if declaration is not None:
            request.tools.append(declaration)
    return len(tools)


async def _add_tools(tools: list[BaseTool], ctx: InvocationContext, request: LlmRequest) -> None:
    """Let each tool add itself, in order; the ones that edit the request share one context."""
    tool_context = ToolContext(ctx)
    for tool in tools:
        if getattr(tool.process_llm_request, "__func__", None) is _DECLARE_ONLY:
            _declare([tool], request)
        else:
            await tool.process_llm_request(tool_context=tool_context, llm_request=request)


def _static_instruction(agent: LlmAgent) -> str | None:
    """The system instruction when no piece of it needs the invocation (R-TPL-2), else None.

    Text without placeholders renders as itself, so the pieces are joined once and the result
    is kept on the agent for as long as its instructions, name and description stay the same.
    """
    root = agent.root_agent
    own = agent.instruction
    glob = root.global_instruction if isinstance(root, LlmAgent) else ""
    key = (glob, own, agent.name, agent.description)
    cached = agent._static_instruction
    if cached is not None and cached[0] == key:
        return cached[1]
    if not (isinstance(glob, str) and isinstance(own, str)) or "{" in glob or "{" in own:
        return None  # a provider or a template: rendered at every step
    text = "\n\n".join(piece for piece in (glob, own, _identity(agent)) if piece)
    agent._static_instruction = (key, text)
    return text


async def _global_instruction(agent: LlmAgent, ctx: InvocationContext) -> str:
    """The root agent's ``global_instruction``, when the root is an LLM agent (R-TPL-2)."""
    root = agent.root_agent
    if not isinstance(root, LlmAgent):
        return ""
    return await _instruction(root.global_instruction, ctx)


async def _instruction(instruction: str | InstructionProvider, ctx: InvocationContext) -> str:
    if not instruction:
        return ""
    if isinstance(instruction, str) and "{" not in instruction:
        return instruction  # no placeholder: nothing to render
    readonly = ReadonlyContext(ctx)  # a provider must not write state nobody would persist
    if callable(instruction):  # a provider bypasses substitution (R-TPL)
        text = instruction(readonly)
        return await text if inspect.isawaitable(text) else text
    return await inject_session_state(instruction, readonly)


def _identity(agent: LlmAgent) -> str:
    text = f'You are an agent. Your internal name is "{agent.name}".'
    if agent.description:
        text += f' The description about you is "{agent.description}".'
    return text


def output_json_schema(agent: LlmAgent) -> dict[str, Any]:
    schema = agent.output_schema
    if isinstance(schema, type):
        return json_schema(schema, where=f"agent {agent.name!r} output_schema")
    return dict(schema or {})


# -- the model call (R-LLM-4, R-LLM-5, R-PART) -----------------------------------------------------


def _uses_callback_context(agent: LlmAgent, ctx: InvocationContext) -> bool:
    """Whether the step needs a callback context: plugins or model callbacks to hand it to, or
    an ``output_key`` / ``output_schema`` whose value rides on its actions."""
    hooks = agent.callbacks
    return bool(
        ctx.plugin_manager
        or hooks["before_model_callback"]
        or hooks["after_model_callback"]
        or hooks["on_model_error_callback"]
        or agent.output_key is not None
        or agent.output_schema is not None
    )


async def _call_model(
    agent: LlmAgent, ctx: InvocationContext, cc: CallbackContext | None, request: LlmRequest
) -> LlmResponse | None:
    """The model's answer, through the model hooks when there is a callback context (without
    one, no hook is registered)."""
    if cc is not None:
        override = await _before_model(agent, ctx, cc, request)
        if override is not None:
            return override  # used as is: no after-model (R-LLM-4)
    ctx.increment_llm_call_count()
    try:
        return await _generate(agent, ctx, cc, request)
    except Exception as exc:
        if cc is None:
            raise
        recovered = await _on_model_error(agent, ctx, cc, request, exc)
        if recovered is None:
            raise
        return await _after_model(agent, ctx, cc, recovered)


async def _before_model(
    agent: LlmAgent, ctx: InvocationContext, cc: CallbackContext, request: LlmRequest
) -> LlmResponse | None:
    """Plugins, then the agent's before-model callbacks; the first non-None answer wins."""
    plugins = ctx.plugin_manager
    override = await plugins_then_chain(
        plugins.before_model(cc, request) if plugins else None,
        agent.callbacks["before_model_callback"],
        callback_context=cc,
        llm_request=request,
    )
    return None if override is None else _checked_response(override, agent)


async def _on_model_error(
    agent: LlmAgent,
    ctx: InvocationContext,
    cc: CallbackContext,
    request: LlmRequest,
    error: Exception,
) -> LlmResponse | None:
    """Plugins, then the agent's on-model-error callbacks; a non-None answer recovers."""
    plugins = ctx.plugin_manager
    recovered = await plugins_then_chain(
        plugins.on_model_error(cc, request, error) if plugins else None,
        agent.callbacks["on_model_error_callback"],
        callback_context=cc,
        llm_request=request,
        error=error,
    )
    return None if recovered is None else _checked_response(recovered, agent)


async def _generate(
    agent: LlmAgent, ctx: InvocationContext, cc: CallbackContext | None, request: LlmRequest
) -> LlmResponse | None:
    model = agent.canonical_model
    config = ctx.run_config
    idle = config.model_idle_timeout
    if config.streaming_mode is not StreamingMode.SSE:
        if idle is None:
            response = await model.generate(request)
        else:
            response = await _generate_within(model, request, idle)
        return response if cc is None else await _after_model(agent, ctx, cc, response)
    deadline = math.inf if idle is None else trio.current_time() + idle
    final: LlmResponse | None = None
    with trio.CancelScope(deadline=deadline) as waiting:
        async with model.stream(request) as chunks:
            async for chunk in chunks:
                waiting.deadline = math.inf  # our own work and the consumer are not the model
                if cc is not None:
                    chunk = await _after_model(agent, ctx, cc, chunk)
                if chunk.partial:
                    await ctx.emit(_partial_event(agent, chunk))
                    final = None
                else:
                    final = chunk
                if idle is not None:
                    waiting.deadline = trio.current_time() + idle
    if waiting.cancelled_caught:
        raise _stalled(model, idle)
    return final


async def _generate_within(model: Model, request: LlmRequest, idle: float) -> LlmResponse:
    with trio.move_on_after(idle):
        return await model.generate(request)
    raise _stalled(model, idle)


def _stalled(model: Model, idle: float | None) -> ModelTimeoutError:
    provider = getattr(model, "provider", None) or type(model).__name__
    return ModelTimeoutError(
        provider=str(provider), model=model.model or type(model).__name__, seconds=idle or 0.0
    )


async def _after_model(
    agent: LlmAgent, ctx: InvocationContext, cc: CallbackContext, response: LlmResponse
) -> LlmResponse:
    plugins = ctx.plugin_manager
    replacement = await plugins_then_chain(
        plugins.after_model(cc, response) if plugins else None,
        agent.callbacks["after_model_callback"],
        callback_context=cc,
        llm_response=response,
    )
    if replacement is None:
        return response
    replacement = _checked_response(replacement, agent)
    inherited = {  # R-PART-3: unset stream markers come from the original
        name: getattr(response, name)
        for name in ("partial", "turn_complete", "usage_metadata")
        if getattr(replacement, name) is None
    }
    return attrs.evolve(replacement, **inherited) if inherited else replacement


def _checked_response(value: object, agent: LlmAgent) -> LlmResponse:
    if isinstance(value, LlmResponse):
        return value
    from .._errors import ConfigurationError

    raise ConfigurationError(
        f"agent {agent.name!r}: a model callback must return an LlmResponse or None, "
        f"got {type(value).__name__}"
    )


# -- events from responses (R-LLM-6, R-OUT) --------------------------------------------------------


def _partial_event(agent: LlmAgent, chunk: LlmResponse) -> Event:
    return Event(
        author=agent.name,
        content=chunk.content,
        partial=True,
        turn_complete=chunk.turn_complete,
        finish_reason=chunk.finish_reason,
        error_code=chunk.error_code,
        error_message=chunk.error_message,
        interrupted=chunk.interrupted,
        usage_metadata=chunk.usage_metadata,
        custom_metadata=chunk.custom_metadata,
    )


def _model_event(
    agent: LlmAgent, ctx: InvocationContext, cc: CallbackContext | None, response: LlmResponse
) -> Event | None:
    response = _post_process(response)
    if response.content is None and not response.error_code and not response.interrupted:
        return None  # nothing to say: the loop ends (R-LLM-6)
    content = with_call_ids(response.content)
    long_running = _long_running_ids(agent, content)
    event = Event(
        invocation_id=ctx.invocation_id,  # stamped here, so emit need not copy the event
        author=agent.name,
        branch=ctx.branch,
        content=content,
        partial=response.partial,
        turn_complete=response.turn_complete,
        finish_reason=response.finish_reason,
        error_code=response.error_code,
        error_message=response.error_message,
        interrupted=response.interrupted,
        custom_metadata=response.custom_metadata,
        usage_metadata=response.usage_metadata,
        long_running_tool_ids=long_running or None,
    )
    if cc is None:
        return event  # no output key or schema, and no hook that could have written actions
    return apply_output(agent, cc, event)


def apply_output(agent: LlmAgent, cc: CallbackContext, event: Event) -> Event:
    """``event`` with the output key written (R-OUT) and the actions of ``cc`` merged in."""
    event = _apply_output(agent, cc.actions, event)
    if not cc.actions.is_empty():
        event = attrs.evolve(event, actions=cc.actions.merged_into(event.actions))
    return event


def _post_process(response: LlmResponse) -> LlmResponse:
    """R-LLM-6: a STOP with no meaningful content is an error, so the event is final."""
    if response.partial or response.finish_reason != "STOP" or response.error_code:
        return response
    parts = response.content.parts if response.content else ()
    meaningful = any(
        p.function_call
        or p.function_response
        or p.inline_data
        or p.file_data
        or (p.text is not None and p.text.strip() and not p.thought)
        for p in parts
    )
    if meaningful:
        return response
    message = response.error_message or (
        "The model returned no actionable content (finish_reason=STOP with thought-only or "
        "whitespace-only parts)."
        if parts
        else "The model returned no content (finish_reason=STOP with empty parts)."
    )
    return attrs.evolve(response, error_code=NO_CONTENT, error_message=message)


def _long_running_ids(agent: LlmAgent, content: Content | None) -> set[str]:
    if content is None:
        return set()
    tools = agent.tools_by_name
    return {
        p.function_call.id
        for p in content.parts
        if p.function_call is not None
        and p.function_call.id
        and (tool := tools.get(p.function_call.name)) is not None
        and tool.is_long_running
    }


def _apply_output(agent: LlmAgent, actions: EventActionsDraft, event: Event) -> Event:
    """``output_key`` / ``output_schema`` for this agent's final text answer (R-OUT common core)."""
    if (agent.output_key is None and agent.output_schema is None) or not event.is_final_response():
        return event
    text = event.text
    if text is None or event.error_code:
        return event
    value: Any = text
    if agent.output_schema is not None:
        if not text.strip():
            return event
        try:
            value = parse_output(agent, text)
        except (json.JSONDecodeError, SerializationError) as exc:  # the answer, not our code
            return attrs.evolve(
                event,
                error_code=INVALID_OUTPUT,
                error_message=f"agent {agent.name!r}: answer does not match output_schema: {exc}",
            )
    if agent.output_key is not None:
        actions.state_delta[agent.output_key] = value
    return event


def parse_output(agent: LlmAgent, text: str) -> Any:
    """Parse and validate ``text`` against ``agent.output_schema``; return plain JSON data."""
    from ._output import parse_json_answer, validate_output

    data = parse_json_answer(text)
    return validate_output(agent.output_schema, data, where=f"agent {agent.name!r}")
