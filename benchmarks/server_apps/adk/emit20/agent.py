"""A custom agent that emits 20 events, each with the state delta ``{"i": n}``."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.events import Event, EventActions


class Emitter(BaseAgent):
    """Emits ``count`` events."""

    count: int = 20

    async def _run_async_impl(self, ctx: Any) -> AsyncGenerator[Event, None]:
        for i in range(self.count):
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                actions=EventActions(state_delta={"i": i}),
            )


root_agent = Emitter(name="emit20", description="emits 20 events")
