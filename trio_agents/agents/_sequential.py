"""SequentialAgent: sub-agents one after another on the same branch."""

from __future__ import annotations

from .._context import InvocationContext
from ._base import BaseAgent

__all__ = ["SequentialAgent", "resume_index"]


class SequentialAgent(BaseAgent):
    """Runs ``sub_agents`` in order (R-SEQ-1). Escalation does not stop it (R-SEQ-2); a sub-agent
    skipped by its before-callback does not stop it either (R-SEQ-3).

    A sub-agent that makes the invocation wait for the client (a long-running call or a
    confirmation request) ends the sequence there: the next sub-agents do not start. In a
    resumable app the sequence commits ``agent_state={"current_sub_agent": name}`` before each
    sub-agent, and a resumed invocation continues from that sub-agent.
    """

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        agents = self.sub_agents
        start, resuming = _start_of(self, ctx)
        for agent in agents[start:]:
            if ctx.is_resumable and not resuming:
                await self._checkpoint(ctx, {"current_sub_agent": agent.name})
            resuming = False
            mark = ctx.pause_mark()
            await agent.run(ctx)
            if ctx.paused_since(mark):
                return


def _start_of(agent: BaseAgent, ctx: InvocationContext) -> tuple[int, bool]:
    """Where a (resumed) sequence starts, and whether it resumes at that sub-agent."""
    plan = ctx.resume_plan
    state = None if plan is None else plan.state_of(agent)
    if state is None:
        return 0, False
    return resume_index(agent, state.get("current_sub_agent"))


def resume_index(agent: BaseAgent, current: object) -> tuple[int, bool]:
    """The index of the sub-agent a checkpoint names, and True; ``""`` means the agent had
    finished them all; a name this tree does not have starts over (index 0, not resuming)."""
    names = [child.name for child in agent.sub_agents]
    if current == "":
        return len(names), True
    if not isinstance(current, str) or current not in names:
        return 0, False
    return names.index(current), True
