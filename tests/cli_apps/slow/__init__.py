"""Commits ``started`` to state, then streams a partial chunk every 0.2 s until cancelled."""

from __future__ import annotations

import itertools

import trio

from trio_agents import BaseAgent, Content, Event, EventActions, InvocationContext


class Slow(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(
            Event(
                content=Content.from_text("Working on it…", role="model"),
                actions=EventActions(state_delta={"started": True}),
            )
        )
        for tick in itertools.count(1):
            chunk = Content.from_text(f"tick {tick} ", role="model")
            await ctx.emit(Event(partial=True, content=chunk))
            await trio.sleep(0.2)


root_agent = Slow(name="slow", description="works until cancelled")
