"""Commits ``ticks`` events, ``gap`` seconds apart (the user's text says ``ticks=N gap=S``),
each with a state delta and a partial chunk before it; then ends."""

from __future__ import annotations

import re

import trio

from trio_agents import BaseAgent, Content, Event, EventActions, InvocationContext


def _asked(ctx: InvocationContext) -> tuple[int, float]:
    content = ctx.user_content
    text = "" if content is None else "".join(part.text or "" for part in content.parts)
    ticks = re.search(r"ticks=(\d+)", text)
    gap = re.search(r"gap=([0-9.]+)", text)
    return (int(ticks[1]) if ticks else 5), (float(gap[1]) if gap else 0.05)


class Ticker(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        ticks, gap = _asked(ctx)
        for tick in range(1, ticks + 1):
            await ctx.emit(Event(partial=True, content=Content.from_text(f"t{tick}", role="model")))
            await ctx.emit(
                Event(
                    content=Content.from_text(f"tick {tick}", role="model"),
                    actions=EventActions(state_delta={"tick": tick}),
                )
            )
            await trio.sleep(gap)


root_agent = Ticker(name="ticker", description="commits a tick event at a steady pace")
