"""SequentialAgent: sub-agents one after another on the same branch."""

from __future__ import annotations

from .._context import InvocationContext
from ._base import BaseAgent

__all__ = ["SequentialAgent"]


class SequentialAgent(BaseAgent):
    """Runs ``sub_agents`` in order (R-SEQ-1). Escalation does not stop it (R-SEQ-2); a sub-agent
    skipped by its before-callback does not stop it either (R-SEQ-3)."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        for agent in self.sub_agents:
            await agent.run(ctx)
