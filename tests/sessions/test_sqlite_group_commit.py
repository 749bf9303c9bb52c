"""Group commit on SQLite: concurrent appends to different sessions share one transaction (one
fsync), and every caller hears back only after that transaction is committed."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trio_agents import Content, Event, EventActions, StaleSessionError
from trio_agents.sessions import SqliteSessionService


def text_event(i: int) -> Event:
    return Event(
        author="a",
        invocation_id=f"e-{i}",
        content=Content.from_text(f"n{i}", role="model"),
        actions=EventActions(state_delta={"n": i, "user:last": i}),
    )


async def test_concurrent_appends_share_commits_and_all_are_stored(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionService(path, durable=True) as service:
        sessions = [
            await service.create_session(app_name="app", user_id=f"u{i}") for i in range(40)
        ]
        before = service._db.batches
        async with trio.open_nursery() as nursery:
            for i, session in enumerate(sessions):
                nursery.start_soon(service.append_event, session, text_event(i))
        batches = service._db.batches - before
    assert 1 <= batches < 40  # several appends per commit (the first one may run alone)
    async with SqliteSessionService(path) as other:  # a fresh connection sees every append
        for i, session in enumerate(sessions):
            stored = await other.get_session(app_name="app", user_id=f"u{i}", session_id=session.id)
            assert stored is not None
            assert [e.text for e in stored.events] == [f"n{i}"]
            assert stored.state == {"n": i, "user:last": i}
            assert stored.revision == session.revision == 1


async def test_a_failing_append_in_a_batch_fails_alone(tmp_path: Path) -> None:
    async with SqliteSessionService(tmp_path / "s.db") as service:
        sessions = [await service.create_session(app_name="app", user_id="u") for _ in range(10)]
        stale = await service.get_session(app_name="app", user_id="u", session_id=sessions[5].id)
        assert stale is not None
        await service.append_event(sessions[5], text_event(99))  # `stale` is one revision behind
        errors: list[BaseException] = []

        async def append(session: object, event: Event) -> None:
            try:
                await service.append_event(session, event)  # type: ignore[arg-type]
            except StaleSessionError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for i, session in enumerate(sessions):
                nursery.start_soon(append, stale if i == 5 else session, text_event(i))
        assert len(errors) == 1
        for i, session in enumerate(sessions):
            stored = await service.get_session(app_name="app", user_id="u", session_id=session.id)
            assert stored is not None
            expected = ["n99"] if i == 5 else [f"n{i}"]
            assert [e.text for e in stored.events] == expected
            assert stored.state["n"] == (99 if i == 5 else i)


@pytest.mark.parametrize("durable", [True, False])
async def test_cancelling_callers_mid_batch_leaves_every_session_consistent(
    tmp_path: Path, durable: bool
) -> None:
    async with SqliteSessionService(tmp_path / "s.db", durable=durable) as service:
        sessions = [await service.create_session(app_name="app", user_id="u") for _ in range(5)]
        async with trio.open_nursery() as nursery:
            for i, session in enumerate(sessions):
                nursery.start_soon(service.append_event, session, text_event(i))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()  # callers whose jobs did not start leave at once
        for session in sessions:
            stored = await service.get_session(app_name="app", user_id="u", session_id=session.id)
            assert stored is not None
            # Whatever was committed, the caller's snapshot and the store agree.
            assert len(stored.events) in (0, 1)
            assert stored.revision == len(stored.events)
