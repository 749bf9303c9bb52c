"""Small custom agents shared by the agent tests."""

from __future__ import annotations

from typing import Any

import trio

from trio_agents import BaseAgent, Content, Event, EventActions, InMemoryRunner, InvocationContext


class Say(BaseAgent):
    """Emits one text event per word, optionally sleeping first; can escalate or fail."""

    words: tuple[str, ...] = ("hi",)
    delay: float = 0
    escalate_at: int | None = None
    error: Any = None
    finished: bool = False
    runs: int = 0

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        self.runs += 1
        try:
            for i, word in enumerate(self.words):
                if self.delay:
                    await trio.sleep(self.delay)
                escalate = True if i == self.escalate_at else None
                await ctx.emit(
                    Event(
                        content=Content.from_text(word, role="model"),
                        actions=EventActions(escalate=escalate),
                    )
                )
            if self.error is not None:
                raise self.error
        finally:
            self.finished = True


class Forever(BaseAgent):
    """Emits forever with a pause; records whether its body was finalised."""

    pause: float = 0.001
    finished: bool = False
    emitted: int = 0

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        try:
            while True:
                await trio.sleep(self.pause)
                await ctx.emit(Event(actions=EventActions(state_delta={self.name: self.emitted})))
                self.emitted += 1
        finally:
            self.finished = True


async def run_agent(agent: BaseAgent) -> tuple[list[Event], InMemoryRunner]:
    runner = InMemoryRunner(agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        return [e async for e in events], runner


def texts(events: list[Event]) -> list[str | None]:
    return [e.text for e in events]


def authored(events: list[Event]) -> list[tuple[str, str | None]]:
    return [(e.author, e.text) for e in events]
