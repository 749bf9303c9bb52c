"""LoopAgent: passes over the sub-agents until escalation or ``max_iterations``."""

from __future__ import annotations

from typing import Any

import trio

from .._context import InvocationContext
from ._base import BaseAgent

__all__ = ["LoopAgent"]


class LoopAgent(BaseAgent):
    """Runs ``sub_agents`` in order, again and again (R-LOOP-1..4).

    ``max_iterations=None`` loops until an escalation; ``<= 0`` makes no pass. When any event
    committed under this loop escalates (from any descendant), the current sub-agent finishes,
    the remaining ones are skipped and the loop ends; enclosing loops end too (R-LOOP-3).
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
        done = 0
        while limit is None or done < limit:
            before = ctx.events_emitted
            for agent in self.sub_agents:
                await agent.run(looped)
                if escalated:
                    return
            if ctx.events_emitted == before:
                await trio.lowlevel.checkpoint()  # a pass that emitted nothing still yields
            done += 1
