"""The tools of one model step when an LLM agent has toolsets.

Each step asks every toolset once (:meth:`~trio_agents.tools.BaseToolset.get_tools_with_prefix`)
and keeps the answer for the whole step: the request's declarations, the calls the model makes
and their responses all see the same tools. The answer rides on a context variable set for the
step, keyed by the agent, so concurrent agents (and an agent tool's inner run) each see their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

from .._context import InvocationContext, ReadonlyContext
from .._errors import ConfigurationError
from ..tools._base import BaseTool

if TYPE_CHECKING:
    from ._llm import LlmAgent

__all__ = ["in_step_tools", "step_tools_of"]

StepTools = tuple[list[BaseTool], dict[str, BaseTool]]
T = TypeVar("T")

_STEP: ContextVar[tuple[object, StepTools] | None] = ContextVar(
    "trio_agents_step_tools", default=None
)


def step_tools_of(agent: LlmAgent) -> StepTools | None:
    """The tools of ``agent``'s current step, or None outside one."""
    current = _STEP.get()
    return current[1] if current is not None and current[0] is agent else None


async def in_step_tools(
    agent: LlmAgent,
    ctx: InvocationContext,
    step: Callable[[LlmAgent, InvocationContext], Awaitable[T]],
) -> T:
    """Run ``step`` with the tools ``agent``'s toolsets give now."""
    token = _STEP.set((agent, await resolve_tools(agent, ctx)))
    try:
        return await step(agent, ctx)
    finally:
        _STEP.reset(token)


async def resolve_tools(agent: LlmAgent, ctx: InvocationContext | None) -> StepTools:
    """``agent``'s tools in declaration order, each toolset's in its place, then the rest.

    Raises:
        ToolsetError: a toolset could not list its tools (naming it).
        ConfigurationError: two tools answer to one name.
    """
    static, _ = agent.static_tools()
    readonly = ReadonlyContext(ctx) if ctx is not None else None
    tools: list[BaseTool] = []
    given = 0
    for entry in agent.tools:
        if isinstance(entry, BaseTool):
            tools.append(entry)
            given += 1
        else:
            tools.extend(await entry.get_tools_with_prefix(readonly))
    tools.extend(static[given:])  # transfer_to_agent, when offered
    by_name: dict[str, BaseTool] = {}
    for tool in tools:
        if by_name.setdefault(tool.name, tool) is not tool:
            raise ConfigurationError(
                f"agent {agent.name!r}: two tools are named {tool.name!r} "
                "(give a toolset a tool_name_prefix or a tool_filter)"
            )
    return tools, by_name
