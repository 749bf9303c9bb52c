"""The hot-path shortcuts keep the public behaviour: frozen records, fresh ids, lazy imports,
cycle-free runs, and in-memory reads and appends without extra scheduling round trips."""

from __future__ import annotations

import gc
import subprocess
import sys
import uuid
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, strategies as st

from trio_agents import BaseAgent, Event, EventActions, InMemoryRunner, InvocationContext
from trio_agents._events import replace
from trio_agents._ids import new_event_id
from trio_agents.sessions import InMemorySessionService, SqliteSessionService


def test_events_built_through_their_draft_are_frozen_events() -> None:
    event = Event(author="a", actions=EventActions(state_delta={"k": 1}, escalate=True))
    assert type(event) is Event
    assert type(event.actions) is EventActions
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.author = "b"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.actions.escalate = False  # type: ignore[misc]
    assert event == attrs.evolve(event)
    assert event.actions == EventActions(state_delta={"k": 1}, escalate=True)


@given(author=st.text(max_size=5), branch=st.none() | st.text(max_size=5))
def test_replace_changes_only_what_it_is_given(author: str, branch: str | None) -> None:
    original = Event(author="x", invocation_id="i", actions=EventActions(state_delta={"k": 1}))
    changed = replace(original, {"author": author, "branch": branch})
    assert type(changed) is Event
    assert (changed.author, changed.branch) == (author, branch)
    assert attrs.evolve(changed, author="x", branch=None) == original
    assert (original.author, original.branch) == ("x", None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        changed.id = "other"  # type: ignore[misc]


def test_event_ids_are_distinct_uuid4_strings() -> None:
    ids = [new_event_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids[::997])


def test_importing_the_package_loads_no_http_client_and_no_postgres_driver() -> None:
    code = (
        "import sys, trio_agents, trio_agents.models, trio_agents.sessions;"
        "print(sorted(m for m in ('httpx', 'psycopg', 'psycopg_pool') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_lazy_names_resolve_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import trio_agents.models as models
    import trio_agents.sessions as sessions

    assert models.GeminiModel.__name__ == "GeminiModel"
    assert {"GeminiModel", "OpenAIModel", "parse_sse_lines"} <= set(dir(models))
    assert sessions.PostgresSessionService.__name__ == "PostgresSessionService"
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    assert type(models.resolve_model("openai/gpt-4o")).__name__ == "OpenAIModel"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        getattr(models, "Nope")


class _Two(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        for i in range(2):
            await ctx.emit(Event(actions=EventActions(state_delta={"i": i})))


async def test_a_finished_run_leaves_no_reference_cycle_behind() -> None:
    """Invocations are freed by reference counting, not left for the cyclic collector."""
    runner = InMemoryRunner(_Two(name="two"), app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    gc.collect()
    gc.disable()
    try:
        async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
            assert [e.actions.state_delta["i"] async for e in events] == [0, 1]
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = [o for o in gc.garbage if type(o).__module__.startswith("trio_agents")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []


async def test_in_memory_reads_without_waiting_agree_with_awaited_reads() -> None:
    service = InMemorySessionService()
    session = await service.create_session(app_name="a", user_id="u", state={"k": 1})
    service.append_event_nowait(
        session, Event(author="w", actions=EventActions(state_delta={"j": 2}))
    )
    now = service.get_session_nowait(app_name="a", user_id="u", session_id=session.id)
    later = await service.get_session(app_name="a", user_id="u", session_id=session.id)
    assert now == later
    assert now is not None and now.state == {"k": 1, "j": 2}
    assert service.get_session_nowait(app_name="a", user_id="u", session_id="missing") is None


async def test_stores_that_need_io_say_would_block(tmp_path: Any) -> None:
    async with SqliteSessionService(tmp_path / "s.db") as service:
        session = await service.create_session(app_name="a", user_id="u")
        with pytest.raises(trio.WouldBlock):
            service.get_session_nowait(app_name="a", user_id="u", session_id=session.id)
        with pytest.raises(trio.WouldBlock):
            service.append_event_nowait(session, Event(author="w"))


async def test_a_run_is_a_checkpoint_even_when_nothing_waits() -> None:
    runner = InMemoryRunner(_Two(name="two"), app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    with trio.testing.assert_checkpoints():
        async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
            await events.aclose()
