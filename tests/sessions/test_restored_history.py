"""A session created with a restored history (what the server's ``POST …/sessions`` with
``events`` stores, through ``SessionService._create_with_history``): all of it, or nothing.

Nothing means no session and none of the ``app:``/``user:`` keys of its initial state, whether
an event is refused, the store fails in the middle of the transaction, or the caller is
cancelled. Each test runs on every backend (``session_service``) unless it names one.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.sessions.conftest import ServiceFactory, open_postgres_service, open_sqlite_service
from trio_agents import Content, Event, EventActions, SerializationError
from trio_agents.sessions import Session, SessionService, _pg_appends, _sqlite

APP, USER = "app", "u"
STATE = {"own": 1, "app:shared": "new", "user:pref": "new"}


def history(count: int, *, bad_at: int | None = None) -> list[Event]:
    """``count`` events at timestamps 1, 2, ...; the one at ``bad_at`` has an unstorable delta."""
    return [
        Event(
            author="agent",
            timestamp=float(i + 1),
            content=Content.from_text(f"event {i}", role="model"),
            actions=EventActions(state_delta={"bad": {1, 2}} if i == bad_at else {"i": i}),
        )
        for i in range(count)
    ]


async def restore(svc: SessionService, events: list[Event], session_id: str = "r") -> Session:
    return await svc._create_with_history(
        app_name=APP, user_id=USER, state=STATE, session_id=session_id, events=events
    )


async def probe(svc: SessionService) -> Session:
    """A session of the same app and user whose state had the scopes' keys before."""
    return await svc.create_session(
        app_name=APP, user_id=USER, session_id="probe", state={"app:shared": 0, "user:pref": 0}
    )


async def assert_nothing_stored(svc: SessionService) -> None:
    assert await svc.get_session(app_name=APP, user_id=USER, session_id="r") is None
    before = await svc.get_session(app_name=APP, user_id=USER, session_id="probe")
    assert before is not None
    assert before.state == {"app:shared": 0, "user:pref": 0}
    again = await restore(svc, history(2))  # the id is free: no leftover, no 409
    assert again.revision == 2


async def test_a_restored_history_reads_back_whole(session_service: SessionService) -> None:
    partial = Event(author="agent", partial=True, content=Content.from_text("…", role="model"))
    events = history(3)
    created = await restore(session_service, [*events[:2], partial, events[2]])
    assert (created.revision, list(created.events)) == (3, events)
    assert created.state == {"own": 1, "app:shared": "new", "user:pref": "new", "i": 2}
    assert created.last_update_time == 3.0

    read = await session_service.get_session(app_name=APP, user_id=USER, session_id="r")
    assert read == created
    await session_service.append_event(created, Event(author="agent", timestamp=4.0))
    assert created.revision == 4


async def test_a_refused_event_stores_nothing(session_service: SessionService) -> None:
    await probe(session_service)
    with pytest.raises(SerializationError, match="bad"):
        await restore(session_service, history(4, bad_at=2))
    await assert_nothing_stored(session_service)


async def test_a_cancelled_restore_stores_nothing(session_service: SessionService) -> None:
    await probe(session_service)
    with trio.CancelScope() as scope:
        scope.cancel()
        await restore(session_service, history(3))
    assert scope.cancelled_caught
    await assert_nothing_stored(session_service)


class StoreFailed(Exception):
    """An I/O failure of the store in the middle of the transaction."""


def fail_second_append(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    original = getattr(module, name)
    calls = 0

    def failing(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise StoreFailed("disk I/O error")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)


@pytest.mark.parametrize(
    ("opener", "module", "name"),
    [
        (open_sqlite_service, _sqlite, "_append_in_transaction"),
        (open_postgres_service, _pg_appends, "write_batch"),
    ],
    ids=["sqlite", "postgres"],
)
async def test_a_store_failing_mid_transaction_stores_nothing(
    monkeypatch: pytest.MonkeyPatch, opener: ServiceFactory, module: Any, name: str
) -> None:
    """The second append of the transaction fails: the first one, the session row and the
    scopes' keys are rolled back with it."""
    async with opener() as service:
        await probe(service)
        fail_second_append(monkeypatch, module, name)
        with pytest.raises(StoreFailed):
            await restore(service, history(3))
        monkeypatch.undo()
        await assert_nothing_stored(service)
