"""LoopAgent: passes over the sub-agents until escalation or ``max_iterations``."""

from __future__ import annotations

from typing import Any

import trio

from .._context import InvocationContext
from ._base import BaseAgent
from ._sequential import resume_index

__all__ = ["LoopAgent"]


class LoopAgent(BaseAgent):
    """Runs ``sub_agents`` in order, again and again (R-LOOP-1..5).

    ``max_iterations=None`` loops until an escalation; ``<= 0`` makes no pass. When any event
    committed under this loop escalates (from any descendant), the current sub-agent finishes,
    the remaining ones are skipped and the loop ends; enclosing loops end too (R-LOOP-3). A
    sub-agent that makes the invocation wait for the client ends the loop there, unfinished. In
    a resumable app the loop commits ``agent_state={"current_sub_agent": name, "times_looped":
    n}`` before each sub-agent, and a resumed invocation continues that pass.
    """

    def __init__(self, *, max_iterations: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_iterations = max_iterations

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        limit = self.max_iterations
        if not self.sub_agents or (limit is not None and limit <= 0):
            return
        escalated = False

        def on_escalate(author: BaseAgent) -> None:
            nonlocal escalated
            escalated = True

        looped = ctx.watching_escalation(on_escalate)
        done, start, resuming = self._start(ctx)
        plan = ctx.resume_plan
        if plan is not None and plan.was_escalated(self):
            escalated = True  # before it stopped: the current sub-agent finishes, then it ends
        resumable = ctx.is_resumable
        while limit is None or done < limit:
            before = ctx.events_emitted
            for agent in self.sub_agents[start:]:
                if resumable and not resuming:
                    state = {"current_sub_agent": agent.name, "times_looped": done}
                    await self._checkpoint(ctx, state)
                resuming = False
                mark = ctx.pause_mark()
                await agent.run(looped)
                if escalated or ctx.paused_since(mark):
                    return
            if ctx.events_emitted == before:
                await trio.lowlevel.checkpoint()  # a pass that emitted nothing still yields
            start = 0
            done += 1

    def _start(self, ctx: InvocationContext) -> tuple[int, int, bool]:
        """Passes done, the sub-agent to start at, and whether the loop resumes at it."""
        plan = ctx.resume_plan
        state = None if plan is None else plan.state_of(self)
        if state is None:
            return 0, 0, False
        times = state.get("times_looped")
        done = times if isinstance(times, int) and times >= 0 else 0
        start, resuming = resume_index(self, state.get("current_sub_agent"))
        return done, start, resuming
