"""ParallelAgent: sub-agents concurrently, each on its own branch, supervised by a nursery."""

from __future__ import annotations

import trio

from .._context import InvocationContext
from .._util import without_cancelled
from ._base import BaseAgent

__all__ = ["ParallelAgent", "child_branch"]


def child_branch(parent_branch: str | None, parallel: str, child: str) -> str:
    """The branch of ``child`` under the parallel agent ``parallel`` (R-PAR-1)."""
    segment = f"{parallel}.{child}"
    return segment if not parent_branch else f"{parent_branch}.{segment}"


class ParallelAgent(BaseAgent):
    """Runs every sub-agent at once, each in its own task and on its own branch.

    * Branch names: ``<parent branch>.<this agent>.<child>`` (R-PAR-1); branches share state
      (R-PAR-2) but see only their own history (R-PAR-7, R-BR-1).
    * Per-branch order is kept; the interleaving across branches is unspecified (R-PAR-3).
    * If a branch raises, the siblings are cancelled and drained before the error leaves this
      agent: the original exception when it is the only one, else an ``ExceptionGroup``.
    * An escalating event authored by a direct sub-agent is delivered, then every branch is
      cancelled and this agent ends (R-PAR-6).
    * A branch that makes the invocation wait for the client pauses; the others run on, and
      this agent ends unfinished once every branch has ended or paused. In a resumable app it
      commits ``agent_state={}`` when it starts; a resumed invocation runs again only the
      branches that had not finished.
    """

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        if not self.sub_agents:
            return
        plan = ctx.resume_plan
        if plan is not None and plan.was_escalated(self):
            return  # a child escalated before the invocation stopped: this agent had ended
        if ctx.is_resumable and (plan is None or plan.state_of(self) is None):
            await self._checkpoint(ctx, {})
        try:
            async with trio.open_nursery() as nursery:

                def on_escalate(author: BaseAgent) -> None:
                    if author.parent_agent is self:
                        nursery.cancel_scope.cancel(reason=f"{author.name} escalated")

                watched = ctx.watching_escalation(on_escalate)
                for agent in self.sub_agents:
                    branch = child_branch(ctx.branch, self.name, agent.name)
                    nursery.start_soon(agent.run, watched.for_branch(branch))
        except BaseExceptionGroup as group:
            failure = without_cancelled(group)
            if failure is group:
                raise
            raise failure from failure.__cause__
