"""A custom agent that emits 20 events, each with the state delta ``{"i": n}``."""

from __future__ import annotations

from trio_agents import BaseAgent, Event, EventActions, InvocationContext


class Emitter(BaseAgent):
    """Emits ``count`` events."""

    count: int = 20

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        for i in range(self.count):
            await ctx.emit(Event(actions=EventActions(state_delta={"i": i})))


root_agent = Emitter(name="emit20", description="emits 20 events")
