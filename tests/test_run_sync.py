"""``Runner.run_sync`` for scripts and notebooks, and ``InMemoryRunner``'s own services."""

from __future__ import annotations

import pytest

from trio_agents import (
    BaseAgent,
    ConfigurationError,
    Event,
    EventActions,
    InMemoryRunner,
    InvocationContext,
    SessionNotFoundError,
)
from trio_agents.sessions import InMemorySessionService


class Counter(BaseAgent):
    """Counts its turns in state ``turns``."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        turns = int(ctx.session.state.get("turns", 0)) + 1
        await ctx.emit(Event(actions=EventActions(state_delta={"turns": turns})))


def test_run_sync_creates_the_session_when_asked_then_continues_it() -> None:
    runner = InMemoryRunner(Counter(name="counter"))
    first = runner.run_sync(
        user_id="u", session_id="s1", new_message="hi", auto_create_session=True
    )
    again = runner.run_sync(
        user_id="u", session_id="s1", new_message="hi", auto_create_session=True
    )
    assert [e.actions.state_delta for e in first + again] == [{"turns": 1}, {"turns": 2}]


def test_run_sync_without_the_flag_needs_an_existing_session() -> None:
    runner = InMemoryRunner(Counter(name="counter"))
    with pytest.raises(SessionNotFoundError, match="Session not found: s1"):
        runner.run_sync(user_id="u", session_id="s1", new_message="hi")


def test_in_memory_runner_refuses_a_session_service_and_says_what_to_use() -> None:
    with pytest.raises(ConfigurationError) as caught:
        InMemoryRunner(Counter(name="counter"), session_service=InMemorySessionService())
    assert str(caught.value) == (
        "InMemoryRunner makes its own InMemorySessionService and takes no session_service; "
        "for another one use Runner(agent=..., app_name=..., session_service=...)"
    )
