"""The contract every :class:`SessionService` backend honours.

The suite runs once per backend (``session_service`` fixture, ``conftest.SERVICE_FACTORIES``).
Rules cited: ADK-SEMANTICS §3.4 (R-ST-*, R-SS-6), scenarios S-ST-*, the ``test_session_service``
table of §4.1, and ARCHITECTURE §3-4 (revisions and stale writes, commit order on read).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from trio_agents import (
    Blob,
    CodeExecutionResult,
    ConfigurationError,
    Content,
    Event,
    EventActions,
    ExecutableCode,
    FileData,
    FunctionCall,
    FunctionResponse,
    Part,
    SerializationError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
    UsageMetadata,
)
from trio_agents.sessions import GetSessionConfig, ListSessionsResponse, Session, SessionService
from trio_agents.testing.strategies import json_values, state_deltas as shipped_state_deltas

APP = "app"
USER = "u"


async def create(svc: SessionService, user_id: str = USER, **kwargs: Any) -> Session:
    return await svc.create_session(app_name=APP, user_id=user_id, **kwargs)


async def reread(
    svc: SessionService, session: Session, config: GetSessionConfig | None = None
) -> Session:
    found = await svc.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id, config=config
    )
    assert found is not None
    return found


def event(delta: dict[Any, Any] | None = None, **kwargs: Any) -> Event:
    return Event(
        author="agent", invocation_id="e-1", actions=EventActions(state_delta=delta), **kwargs
    )


async def append_all(svc: SessionService, session: Session, events: list[Event]) -> list[Event]:
    return [await svc.append_event(session, e) for e in events]


# -- create / get / delete ------------------------------------------------------------------------


async def test_get_missing_session_returns_none(session_service: SessionService) -> None:
    """test_get_empty_session."""
    assert await session_service.get_session(app_name=APP, user_id=USER, session_id="x") is None


async def test_create_get_delete_round_trip(session_service: SessionService) -> None:
    """test_create_get_session: fields round-trip, get equals create, gone after delete."""
    created = await create(session_service, state={"k": 1, "nested": {"a": [1, "b", None]}})
    assert (created.app_name, created.user_id) == (APP, USER)
    assert created.state == {"k": 1, "nested": {"a": [1, "b", None]}}
    assert len(created.events) == 0
    assert created.revision == 0
    assert await reread(session_service, created) == created

    await session_service.delete_session(app_name=APP, user_id=USER, session_id=created.id)
    assert (
        await session_service.get_session(app_name=APP, user_id=USER, session_id=created.id) is None
    )


async def test_create_generates_distinct_ids(session_service: SessionService) -> None:
    first, second = await create(session_service), await create(session_service)
    assert first.id and second.id
    assert first.id != second.id


async def test_delete_missing_session_is_a_no_op(session_service: SessionService) -> None:
    """R-ST-7: deleting a missing session does nothing."""
    await session_service.delete_session(app_name=APP, user_id=USER, session_id="nope")


async def test_session_is_scoped_by_app_and_user(session_service: SessionService) -> None:
    created = await create(session_service, session_id="s")
    for app, user in [("other", USER), (APP, "other")]:
        assert await session_service.get_session(app_name=app, user_id=user, session_id="s") is None
        await session_service.delete_session(app_name=app, user_id=user, session_id="s")
    assert await reread(session_service, created) == created


async def test_duplicate_session_id_raises_and_changes_nothing(
    session_service: SessionService,
) -> None:
    """S-ST-6: an existing id → SessionExistsError; the rejected state is not stored."""
    await create(session_service, session_id="s1", state={"k": 1, "app:a": 1})
    with pytest.raises(SessionExistsError, match="s1") as info:
        await create(session_service, session_id="s1", state={"k": 2, "app:a": 2})
    assert info.value.session_id == "s1"
    stored = await session_service.get_session(app_name=APP, user_id=USER, session_id="s1")
    assert stored is not None
    assert stored.state == {"k": 1, "app:a": 1}


async def test_session_id_whitespace_is_stripped(session_service: SessionService) -> None:
    """R-ST-7: surrounding whitespace is stripped from session ids."""
    created = await create(session_service, session_id="  s1\t")
    assert created.id == "s1"
    assert (
        await session_service.get_session(app_name=APP, user_id=USER, session_id="s1") is not None
    )
    with pytest.raises(SessionExistsError):
        await create(session_service, session_id="s1 ")


async def test_padded_session_id_reads_and_deletes_the_stripped_session(
    session_service: SessionService,
) -> None:
    """As google-adk 2.13 (every store): ``get_session`` and ``delete_session`` strip the id too,
    so ``" s1 "`` finds and deletes the session created as ``"s1"``."""
    await create(session_service, session_id="s1", state={"k": 1})
    found = await session_service.get_session(app_name=APP, user_id=USER, session_id=" s1\t")
    assert found is not None
    assert (found.id, found.state) == ("s1", {"k": 1})
    windowed = await session_service.get_session(
        app_name=APP, user_id=USER, session_id=" s1", config=GetSessionConfig(num_recent_events=1)
    )
    assert windowed is not None and windowed.id == "s1"
    await session_service.delete_session(app_name=APP, user_id=USER, session_id="  s1 ")
    assert await session_service.get_session(app_name=APP, user_id=USER, session_id="s1") is None


@pytest.mark.parametrize("blank", ["", "   "])
async def test_blank_session_id_gets_a_generated_id(
    session_service: SessionService, blank: str
) -> None:
    created = await create(session_service, session_id=blank)
    assert created.id.strip()
    assert created.id != (await create(session_service, session_id=blank)).id


async def test_create_drops_temp_keys_and_scopes_app_and_user_keys(
    session_service: SessionService,
) -> None:
    """R-ST-4 / S-ST-2: temp: keys given at create are dropped; app:/user: keys are shared."""
    created = await create(session_service, state={"temp:z": 1, "own": 2, "app:a": 3, "user:b": 4})
    assert created.state == {"own": 2, "app:a": 3, "user:b": 4}
    assert (await reread(session_service, created)).state == created.state

    same_user = await create(session_service)
    other_user = await create(session_service, user_id="v")
    assert same_user.state == {"app:a": 3, "user:b": 4}
    assert other_user.state == {"app:a": 3}


async def test_stored_state_is_isolated_from_callers_objects(
    session_service: SessionService,
) -> None:
    """R-ST-7: the store copies what it is given and hands out copies (nested values too)."""
    given_state = {"d": {"k": 1}, "app:l": [1]}
    created = await create(session_service, state=given_state)
    given_state["d"]["k"] = "mutated"
    given_state["app:l"].append("mutated")
    created.state["d"]["k"] = "mutated"
    created.state["app:l"].append("mutated")
    delta = {"e": {"k": 1}}
    await session_service.append_event(created, event(delta))
    delta["e"]["k"] = "mutated"

    stored = await reread(session_service, created)
    assert stored.state == {"d": {"k": 1}, "app:l": [1], "e": {"k": 1}}
    stored.state["d"]["k"] = "mutated"
    assert (await reread(session_service, created)).state["d"] == {"k": 1}


# -- list_sessions --------------------------------------------------------------------------------


async def test_list_sessions_without_events_in_last_update_order(
    session_service: SessionService,
) -> None:
    """test_create_and_list_sessions, S-ST-8: no events, merged state; ordered as google-adk
    orders them, by last update time (creation, then the last event's timestamp), then id."""
    ids = ["s3", "s1", "s5", "s2", "s4"]
    sessions = [await create(session_service, session_id=i, state={"n": i}) for i in ids]
    later = max(s.last_update_time for s in sessions) + 1
    await session_service.append_event(
        sessions[0], event({"user:u": 1, "n": "changed"}, timestamp=later)
    )
    at = [s.last_update_time for s in sessions]
    expected = [i for _, i in sorted(zip(at, ids, strict=True))]

    listed = await session_service.list_sessions(app_name=APP, user_id=USER)
    assert [s.id for s in listed] == expected
    assert expected[-1] == "s3"  # moved last by its event
    assert all(len(s.events) == 0 for s in listed)
    assert {s.id: s.state for s in listed} == {
        "s3": {"n": "changed", "user:u": 1},
        **{i: {"n": i, "user:u": 1} for i in ids[1:]},
    }


async def test_list_sessions_breaks_ties_by_user_then_id(session_service: SessionService) -> None:
    """Sessions last updated at the same time list by user id, then id, by code point."""
    keys = [("v", "b"), ("u", "é"), ("v", "a"), ("u", "Z"), ("u", "a")]
    for user, sid in keys:
        session = await create(session_service, user_id=user, session_id=sid)
        await session_service.append_event(session, event({"x": 1}, timestamp=5.0))
    listed = await session_service.list_sessions(app_name=APP)
    assert [(s.user_id, s.id) for s in listed] == sorted(keys)
    assert all(s.last_update_time == 5.0 for s in listed)


async def test_list_sessions_filters_by_app_and_user(session_service: SessionService) -> None:
    mine = await create(session_service)
    theirs = await create(session_service, user_id="v")
    await session_service.create_session(app_name="other", user_id=USER)

    assert [s.id for s in await session_service.list_sessions(app_name=APP, user_id=USER)] == [
        mine.id
    ]
    every_user = await session_service.list_sessions(app_name=APP, user_id=None)
    assert [s.id for s in every_user] == [mine.id, theirs.id]
    assert await session_service.list_sessions(app_name="nobody") == []


# -- append_event (R-ST-5) ------------------------------------------------------------------------


async def test_append_updates_store_and_passed_session(session_service: SessionService) -> None:
    """R-ST-5: the event is stored; the passed session is updated in place."""
    session = await create(session_service, state={"a": 1})
    e = event({"a": 2, "b": 3}, timestamp=1234.5)

    committed = await session_service.append_event(session, e)

    assert committed == e
    assert session.state == {"a": 2, "b": 3}
    assert list(session.events) == [e]
    assert session.last_update_time == 1234.5
    stored = await reread(session_service, session)
    assert stored.state == {"a": 2, "b": 3}
    assert list(stored.events) == [e]
    assert stored == session


async def test_partial_event_is_not_stored(session_service: SessionService) -> None:
    """R-ST-5 step 1 / S-ST-5: a partial event changes nothing and comes back untouched."""
    session = await create(session_service, state={"a": 1})
    before = attrs.evolve(session, state=dict(session.state))
    e = event({"a": 2, "temp:t": 1}, partial=True)

    assert await session_service.append_event(session, e) is e
    assert session == before
    assert await reread(session_service, session) == before


async def test_temp_keys_reach_the_passed_session_only(session_service: SessionService) -> None:
    """R-ST-5 steps 2-3 / S-ST-2: temp: applied to the live object, stripped from the event."""
    session = await create(session_service, state={"temp:z": 0})
    e = event({"a": 2, "temp:t": 9, "app:x": 2})

    committed = await session_service.append_event(session, e)

    assert session.state == {"a": 2, "temp:t": 9, "app:x": 2}
    assert dict(committed.actions.state_delta) == {"a": 2, "app:x": 2}
    assert committed == attrs.evolve(
        e, actions=attrs.evolve(e.actions, state_delta={"a": 2, "app:x": 2})
    )
    assert list(session.events) == [committed]
    stored = await reread(session_service, session)
    assert stored.state == {"a": 2, "app:x": 2}
    assert list(stored.events) == [committed]
    assert "temp:t" not in stored.events[0].actions.state_delta


async def test_app_and_user_keys_are_visible_across_sessions(
    session_service: SessionService,
) -> None:
    """test_session_state / S-ST-1 (store part) / R-ST-4."""
    s1 = await create(session_service, state={"sk": "old"})
    s2 = await create(session_service)
    s3 = await create(session_service, user_id="user2")
    elsewhere = await session_service.create_session(app_name="other", user_id=USER)

    await session_service.append_event(
        s1, event({"app:key": "a", "user:key1": "u", "temp:key": "t", "sk": "new"})
    )

    assert (await reread(session_service, s1)).state == {
        "sk": "new",
        "app:key": "a",
        "user:key1": "u",
    }
    assert (await reread(session_service, s2)).state == {"app:key": "a", "user:key1": "u"}
    assert (await reread(session_service, s3)).state == {"app:key": "a"}
    assert (await reread(session_service, elsewhere)).state == {}


async def test_new_session_merges_app_and_user_state(session_service: SessionService) -> None:
    """test_create_new_session_will_merge_states: shared keys in, old session keys out."""
    s1 = await create(session_service, state={"own": 1})
    await session_service.append_event(s1, event({"app:a": 1, "user:b": 2, "temp:c": 3, "own2": 4}))

    fresh = await create(session_service, state={"mine": 5})

    assert fresh.state == {"mine": 5, "app:a": 1, "user:b": 2}
    assert (await reread(session_service, fresh)).state == fresh.state


async def test_merged_state_keeps_each_scope_under_its_prefix(
    session_service: SessionService,
) -> None:
    """R-ST-6: one name in three scopes gives three keys; later writes overwrite per scope.

    A true clash is impossible through the service (session keys never carry a scope prefix);
    the clash order itself is tested on ``merged_state`` in tests/test_state.py.
    """
    session = await create(session_service, state={"x": "session", "app:x": "app"})
    await session_service.append_event(session, event({"user:x": "user", "app:x": "app2"}))

    assert (await reread(session_service, session)).state == {
        "x": "session",
        "app:x": "app2",
        "user:x": "user",
    }


# -- revisions and stale writes (ARCHITECTURE §4, R-SS-6) ----------------------------------------


async def test_revision_increments_per_committed_event(session_service: SessionService) -> None:
    session = await create(session_service)
    revisions = [session.revision]
    for i in range(3):
        await session_service.append_event(session, event({"i": i}))
        revisions.append(session.revision)
        assert (await reread(session_service, session)).revision == session.revision
    await session_service.append_event(session, event({"p": 1}, partial=True))

    assert revisions == [revisions[0] + i for i in range(4)]
    assert (await reread(session_service, session)).revision == revisions[-1]


async def test_append_through_stale_copy_raises_and_stores_nothing(
    session_service: SessionService,
) -> None:
    """S-ST-4, required of every backend: the second of two copies is stale."""
    created = await create(session_service, state={"a": 0})
    copy1, copy2 = await reread(session_service, created), await reread(session_service, created)
    first = await session_service.append_event(copy1, event({"a": 1}))
    copy2_before = attrs.evolve(copy2, state=dict(copy2.state))

    with pytest.raises(StaleSessionError) as info:
        await session_service.append_event(copy2, event({"a": 2, "temp:t": 1}))

    assert info.value.session_id == created.id
    assert copy2 == copy2_before
    stored = await reread(session_service, created)
    assert list(stored.events) == [first]
    assert stored.state == {"a": 1}


async def test_append_after_reload_succeeds(session_service: SessionService) -> None:
    """A stale snapshot is never reloaded silently; the caller reloads and retries."""
    created = await create(session_service)
    await session_service.append_event(await reread(session_service, created), event({"a": 1}))
    with pytest.raises(StaleSessionError):
        await session_service.append_event(created, event({"b": 1}))

    fresh = await reread(session_service, created)
    await session_service.append_event(fresh, event({"b": 1}))
    assert (await reread(session_service, created)).state == {"a": 1, "b": 1}


async def test_append_to_deleted_session_raises_not_found(
    session_service: SessionService,
) -> None:
    session = await create(session_service)
    await session_service.delete_session(app_name=APP, user_id=USER, session_id=session.id)

    with pytest.raises(SessionNotFoundError) as info:
        await session_service.append_event(session, event({"a": 1}))
    assert info.value.session_id == session.id
    assert isinstance(info.value, LookupError)


async def _recreated(svc: SessionService, session: Session, events: int) -> Session:
    """Delete ``session`` and create it again under its id, with ``events`` events."""
    ids = {"app_name": session.app_name, "user_id": session.user_id, "session_id": session.id}
    await svc.delete_session(**ids)
    again = await svc.create_session(**ids, state={"new": True})
    await append_all(svc, again, [event({"n": i}) for i in range(events)])
    return again


@pytest.mark.parametrize("events", [0, 2])
async def test_append_through_a_snapshot_of_a_deleted_and_recreated_session_is_stale(
    session_service: SessionService, events: int
) -> None:
    """A session deleted and created again under the same id is another session: a snapshot of
    the old one is stale for it, even when the revisions agree, and nothing of it is stored."""
    old = await create(session_service, session_id="same")
    await append_all(session_service, old, [event({"o": i}) for i in range(events)])
    listed = (await session_service.list_sessions(app_name=APP, user_id=USER))[0]
    again = await _recreated(session_service, old, events)
    assert (old.revision, listed.revision) == (again.revision, again.revision) == (events, events)

    for snapshot in (old, listed):
        before = attrs.evolve(snapshot, state=dict(snapshot.state))
        with pytest.raises(StaleSessionError, match="deleted and created again") as info:
            await session_service.append_event(snapshot, event({"late": 1}))
        assert (info.value.session_id, info.value.recreated) == ("same", True)
        assert snapshot == before
    stored = await reread(session_service, again)
    assert (stored.state, list(stored.events)) == (again.state, list(again.events))
    await session_service.append_event(stored, event({"late": 1}))  # a fresh snapshot appends
    last = {"n": events - 1} if events else {}
    assert (await reread(session_service, again)).state == {"new": True, **last, "late": 1}


async def test_a_snapshot_built_by_hand_is_checked_by_its_revision_alone(
    session_service: SessionService,
) -> None:
    """A ``Session`` built by the caller carries no incarnation: its revision is its check."""
    old = await create(session_service, session_id="same")
    await _recreated(session_service, old, 1)
    stale = Session(id="same", app_name=APP, user_id=USER, revision=0)
    with pytest.raises(StaleSessionError) as info:
        await session_service.append_event(stale, event({"a": 1}))
    assert not info.value.recreated
    current = Session(id="same", app_name=APP, user_id=USER, revision=1)
    await session_service.append_event(current, event({"a": 1}))
    assert (await reread(session_service, old)).state == {"new": True, "n": 0, "a": 1}


async def test_cancelled_append_stores_nothing(session_service: SessionService) -> None:
    """SessionService: if append_event is cancelled, nothing is appended."""
    session = await create(session_service)
    with trio.CancelScope() as scope:
        scope.cancel()
        await session_service.append_event(session, event({"a": 1}))
    assert scope.cancelled_caught
    stored = await reread(session_service, session)
    assert (len(stored.events), stored.state, stored.revision) == (0, {}, session.revision)


# -- reading with GetSessionConfig (R-ST-8) and commit order (ARCHITECTURE §4) --------------------


@pytest.fixture
async def five_events(session_service: SessionService) -> tuple[Session, list[Event]]:
    """A session with five events whose timestamps are 1..5."""
    session = await create(session_service)
    events = await append_all(
        session_service, session, [event({"n": i}, timestamp=float(i)) for i in range(1, 6)]
    )
    return session, events


CONFIG_CASES = [
    (3, None, [3, 4, 5]),
    (0, None, []),
    (2, None, [4, 5]),
    (9, None, [1, 2, 3, 4, 5]),
    (None, 4.0, [4, 5]),
    (None, 3.5, [4, 5]),
    (None, 9.0, []),
    (3, 4.0, [4, 5]),
    (1, 2.0, [5]),
    (None, None, [1, 2, 3, 4, 5]),
]


@pytest.mark.parametrize(
    ("recent", "after", "expected"),
    [pytest.param(*case, id=f"recent={case[0]}-after={case[1]}") for case in CONFIG_CASES],
)
async def test_get_session_with_config(
    session_service: SessionService,
    five_events: tuple[Session, list[Event]],
    recent: int | None,
    after: float | None,
    expected: list[int],
) -> None:
    """test_get_session_with_config, S-ST-7, R-ST-8: recent N, inclusive timestamp, combined;
    the state is always the full current state."""
    config = GetSessionConfig(num_recent_events=recent, after_timestamp=after)
    session, events = five_events
    got = await reread(session_service, session, config)
    assert list(got.events) == [events[i - 1] for i in expected]
    assert got.state == {"n": 5}
    assert got.revision == session.revision


def test_negative_num_recent_events_is_rejected() -> None:
    """R-ST-8: a negative num_recent_events is a validation error."""
    with pytest.raises(ConfigurationError, match="num_recent_events"):
        GetSessionConfig(num_recent_events=-1)


async def test_events_are_read_in_commit_order_not_timestamp_order(
    session_service: SessionService,
) -> None:
    """ARCHITECTURE §4 'event order on read': commit order, never timestamps."""
    session = await create(session_service)
    events = await append_all(
        session_service, session, [event({"n": i}, timestamp=t) for i, t in enumerate([5, 1, 3, 2])]
    )
    assert list((await reread(session_service, session)).events) == events
    recent = await reread(session_service, session, GetSessionConfig(num_recent_events=2))
    assert list(recent.events) == events[2:]
    since = await reread(session_service, session, GetSessionConfig(after_timestamp=2.0))
    assert list(since.events) == [events[0], events[2], events[3]]


async def test_append_through_a_recent_events_snapshot(session_service: SessionService) -> None:
    session = await create(session_service)
    events = await append_all(session_service, session, [event({"n": i}) for i in range(4)])
    for config in [GetSessionConfig(num_recent_events=2), GetSessionConfig(after_timestamp=0.0)]:
        window = await reread(session_service, session, config)
        shown = list(window.events)
        new = await session_service.append_event(window, event({"w": len(events)}))
        events.append(new)
        assert list(window.events) == [*shown, new]
        assert list((await reread(session_service, session)).events) == events
        assert window.revision == (await reread(session_service, session)).revision


async def test_session_events_behave_like_a_sequence(session_service: SessionService) -> None:
    session = await create(session_service)
    events = await append_all(session_service, session, [event({"n": i}) for i in range(4)])
    full = await reread(session_service, session)
    recent = await reread(session_service, session, GetSessionConfig(num_recent_events=3))

    for log, expected in [(full.events, events), (recent.events, events[1:])]:
        assert len(log) == len(expected)
        assert log == expected
        assert expected == log
        assert log != expected[:-1]
        assert list(log) == expected
        assert log[0] == expected[0]
        assert log[-1] == expected[-1]
        assert log[-len(expected)] == expected[0]
        assert list(log[1:]) == expected[1:]
        assert list(log[::-1]) == expected[::-1]
        with pytest.raises(IndexError):
            log[len(expected)]
        with pytest.raises(IndexError):
            log[-len(expected) - 1]


# -- what is stored is what was given ------------------------------------------------------------


def complete_event() -> Event:
    """An event with every field set (test_append_event_complete, test_append_event_bytes)."""
    return Event(
        id="ev-1",
        invocation_id="e-42",
        author="agent",
        branch="root.par.a",
        timestamp=1700000000.25,
        content=Content(
            role="model",
            parts=(
                Part(text="thinking", thought=True, thought_signature=b"\x00sig\xff"),
                Part.from_text("answer"),
                Part(function_call=FunctionCall(name="f", args={"x": [1, {"y": None}]}, id="c1")),
                Part(function_response=FunctionResponse(name="f", response={"r": 1.5}, id="c1")),
                Part.from_bytes(b"\x89PNG\r\n\x1a\n\x00\xff", "image/png"),
                Part(inline_data=Blob(mime_type="text/plain", data=b"", display_name="empty")),
                Part(file_data=FileData(file_uri="gs://b/f", mime_type="a/b", display_name="f")),
                Part(executable_code=ExecutableCode(code="print(1)", language="PYTHON")),
                Part(code_execution_result=CodeExecutionResult(outcome="OK", output="1")),
            ),
        ),
        partial=False,
        turn_complete=True,
        finish_reason="STOP",
        error_code="E_CODE",
        error_message="it failed",
        interrupted=True,
        custom_metadata={"trace": {"ids": [1, 2]}, "flag": True},
        usage_metadata=UsageMetadata(
            prompt_token_count=1,
            candidates_token_count=2,
            total_token_count=3,
            cached_content_token_count=4,
            thoughts_token_count=5,
            tool_use_prompt_token_count=6,
        ),
        long_running_tool_ids={"c1", "c2"},
        actions=EventActions(
            state_delta={"k": "v", "app:a": 1, "user:u": [1, 2]},
            artifact_delta={"f.txt": 3},
            transfer_to_agent="other",
            escalate=True,
            skip_summarization=True,
            requested_auth_configs={"c1": {"scheme": "oauth2"}},
        ),
    )


async def test_event_with_every_field_round_trips(session_service: SessionService) -> None:
    """test_append_event_complete / test_append_event_bytes: re-read equals what was stored."""
    session = await create(session_service)
    e = complete_event()

    assert await session_service.append_event(session, e) == e

    stored = await reread(session_service, session)
    assert list(stored.events) == [e]
    assert stored.events[0].content.parts[4].inline_data.data == b"\x89PNG\r\n\x1a\n\x00\xff"
    assert stored == session


# -- bad state is rejected before anything is stored --------------------------------------------


BAD_STATES = [
    pytest.param({7: "x"}, "7", id="int-key"),
    pytest.param({"bad_key": {1, 2}}, "bad_key", id="set-value"),
    pytest.param({"bad_key": object()}, "bad_key", id="object-value"),
    pytest.param({"ok": 1, "bad_key": {"inner": [object()]}}, "bad_key", id="nested-object"),
]


def assert_names(error: SerializationError, key: str) -> None:
    assert key in str(error)
    assert key in error.path


@pytest.mark.parametrize(("state", "key"), BAD_STATES)
async def test_create_with_bad_state_raises_and_stores_nothing(
    session_service: SessionService, state: dict[Any, Any], key: str
) -> None:
    with pytest.raises(SerializationError) as info:
        await create(session_service, session_id="s", state={"app:a": 1, "user:b": 1, **state})
    assert_names(info.value, key)
    assert await session_service.get_session(app_name=APP, user_id=USER, session_id="s") is None
    assert (await create(session_service)).state == {}


@pytest.mark.parametrize(("state", "key"), BAD_STATES)
async def test_append_with_bad_state_raises_and_stores_nothing(
    session_service: SessionService, state: dict[Any, Any], key: str
) -> None:
    session = await create(session_service, state={"a": 0})
    before = attrs.evolve(session, state=dict(session.state))

    with pytest.raises(SerializationError) as info:
        await session_service.append_event(
            session, event({"temp:t": 1, "a": 1, "app:a": 1, **state})
        )

    assert_names(info.value, key)
    assert session == before
    assert await reread(session_service, session) == before
    assert (await create(session_service)).state == {}


# -- every public async method is a checkpoint ---------------------------------------------------


async def test_every_method_is_a_checkpoint(session_service: SessionService) -> None:
    svc = session_service
    with trio.testing.assert_checkpoints():
        session = await create(svc)
    with trio.testing.assert_checkpoints():
        await svc.get_session(app_name=APP, user_id=USER, session_id=session.id)
    with trio.testing.assert_checkpoints():
        await svc.get_session(app_name=APP, user_id=USER, session_id="missing")
    with trio.testing.assert_checkpoints():
        await svc.list_sessions(app_name=APP, user_id=USER)
    with trio.testing.assert_checkpoints():
        await svc.append_event(session, event({"a": 1}))
    with trio.testing.assert_checkpoints():
        await svc.append_event(session, event({"a": 1}, partial=True))
    with trio.testing.assert_checkpoints():
        await svc.delete_session(app_name=APP, user_id=USER, session_id=session.id)
    with trio.testing.assert_checkpoints():
        await svc.delete_session(app_name=APP, user_id=USER, session_id=session.id)


# -- run leases ----------------------------------------------------------------------------------


async def test_lease_rejects_a_second_holder(session_service: SessionService) -> None:
    key = {"app_name": APP, "user_id": USER, "session_id": "s"}
    async with session_service.lease(**key):
        with pytest.raises(SessionBusyError):
            async with session_service.lease(**key):
                pass  # pragma: no cover
        async with session_service.lease(app_name=APP, user_id=USER, session_id="other"):
            pass
    async with session_service.lease(**key):
        pass


async def test_lease_with_wait_queues_in_arrival_order(session_service: SessionService) -> None:
    key = {"app_name": APP, "user_id": USER, "session_id": "s"}
    order: list[str] = []
    entered, release = trio.Event(), trio.Event()

    async def holder(name: str) -> None:
        async with session_service.lease(**key, wait=True):
            order.append(f"{name} in")
            entered.set()
            await release.wait()  # held until every caller has queued behind it
            order.append(f"{name} out")

    async with trio.open_nursery() as nursery:
        for name in "abc":
            nursery.start_soon(holder, name)
            await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(10):  # a hang guard
            await entered.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["a in"]  # b and c wait in the queue
        release.set()
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_one_is_served(
    session_service: SessionService,
) -> None:
    key = {"app_name": APP, "user_id": USER, "session_id": "s"}
    served: list[str] = []

    async def waiter(name: str, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            async with session_service.lease(**key, wait=True):
                served.append(name)

    async with trio.open_nursery() as nursery, session_service.lease(**key):
        quitter = await nursery.start(waiter, "quitter")
        await trio.testing.wait_all_tasks_blocked()
        await nursery.start(waiter, "next")
        await trio.testing.wait_all_tasks_blocked()
        quitter.cancel()
        await trio.testing.wait_all_tasks_blocked()
    assert served == ["next"]
    async with session_service.lease(**key):  # nothing is left holding it
        pass


async def test_a_lease_cancelled_on_the_way_in_is_not_held(session_service: SessionService) -> None:
    key = {"app_name": APP, "user_id": USER, "session_id": "s"}
    with trio.CancelScope() as scope:
        scope.cancel()
        async with session_service.lease(**key):
            pass  # pragma: no cover
    async with session_service.lease(**key):
        pass


# -- property: the stored state is the fold of the committed deltas ------------------------------

state_keys = st.builds(
    str.__add__, st.sampled_from(["", "app:", "user:", "temp:"]), st.sampled_from("abc")
)
state_deltas = shipped_state_deltas(keys=state_keys, values=json_values(max_leaves=8))
# Each step appends one delta to one of three sessions: two of user "u", one of user "v".
steps = st.lists(st.tuples(st.integers(0, 2), state_deltas), max_size=8)


def fold(steps: list[tuple[int, dict[str, Any]]], owners: list[str]) -> list[dict[str, Any]]:
    """The merged state each session must show, from the deltas alone (R-ST-4..6)."""
    own: list[dict[str, Any]] = [{} for _ in owners]
    app: dict[str, Any] = {}
    user: dict[str, dict[str, Any]] = {o: {} for o in owners}
    for index, delta in steps:
        for key, value in delta.items():
            if key.startswith("app:"):
                app[key] = value
            elif key.startswith("user:"):
                user[owners[index]][key] = value
            elif not key.startswith("temp:"):
                own[index][key] = value
    return [{**own[i], **app, **user[o]} for i, o in enumerate(owners)]


@settings(deadline=None)
@given(
    initial=st.lists(state_deltas, min_size=3, max_size=3),
    steps=steps,
    _random=st.random_module(),
)
def test_stored_state_is_the_fold_of_committed_deltas(
    service_factory: Any,
    initial: list[dict[str, Any]],
    steps: list[tuple[int, dict[str, Any]]],
    _random: Any,
) -> None:
    """R-ST-4/5/6: re-read state = fold of the create states and the temp-stripped committed
    deltas, per scope; no temp: key is ever stored."""
    owners = [USER, USER, "v"]

    async def check() -> None:
        async with service_factory() as svc:
            sessions = [
                await create(svc, user_id=owner, state=state)
                for owner, state in zip(owners, initial, strict=True)
            ]
            committed = list(enumerate(initial))
            for index, delta in steps:
                session = await reread(svc, sessions[index])
                out = await svc.append_event(session, event(delta))
                temp = {k: v for k, v in delta.items() if k.startswith("temp:")}
                assert out.actions.state_delta == {k: v for k, v in delta.items() if k not in temp}
                assert temp.items() <= session.state.items()
                committed.append((index, dict(out.actions.state_delta)))
            for session, expected in zip(sessions, fold(committed, owners), strict=True):
                stored = await reread(svc, session)
                assert stored.state == expected
                assert not any(k.startswith("temp:") for k in stored.state)
                for e in stored.events:
                    assert not any(k.startswith("temp:") for k in e.actions.state_delta)

    trio.run(check)


async def test_get_user_state_reads_the_user_scope_without_a_session(
    session_service: SessionService,
) -> None:
    """As google-adk 2.13's ``get_user_state``: the user's scope with the ``user:`` prefix
    removed, from creation and from appends, for that app and user only; ``{}`` for a user with
    none; a copy of what is stored."""
    svc = session_service
    assert await svc.get_user_state(app_name=APP, user_id=USER) == {}
    session = await create(svc, state={"user:name": "Ada", "app:a": 1, "k": 2, "temp:t": 3})
    await create(svc, user_id="other", state={"user:name": "Bob"})
    event = Event(author="user", actions=EventActions(state_delta={"user:n": {"x": [1]}, "j": 1}))
    await svc.append_event(session, event)
    state = await svc.get_user_state(app_name=APP, user_id=USER)
    assert state == {"name": "Ada", "n": {"x": [1]}}
    state["n"]["x"].append(2)
    assert await svc.get_user_state(app_name=APP, user_id=USER) == {"name": "Ada", "n": {"x": [1]}}
    assert await svc.get_user_state(app_name=APP, user_id="other") == {"name": "Bob"}
    assert await svc.get_user_state(app_name="elsewhere", user_id=USER) == {}
    await svc.delete_session(app_name=APP, user_id=USER, session_id=session.id)
    assert await svc.get_user_state(app_name=APP, user_id=USER) == {"name": "Ada", "n": {"x": [1]}}


async def test_list_sessions_answers_sessions_as_adk_response(
    session_service: SessionService,
) -> None:
    """google-adk 2.13's ``list_sessions`` returns a response whose ``.sessions`` is the list;
    here the list itself answers ``.sessions`` too, so code written either way works."""
    first = await create(session_service, session_id="s1", state={"user:u": 1})
    listed = await session_service.list_sessions(app_name=APP, user_id=USER)
    assert isinstance(listed, ListSessionsResponse) and isinstance(listed, list)
    assert listed.sessions is listed
    assert [(s.id, s.state, len(s.events)) for s in listed.sessions] == [("s1", {"user:u": 1}, 0)]
    assert listed == [attrs.evolve(first, events=[])]
    assert (await session_service.list_sessions(app_name="none")).sessions == []


async def test_flush_is_a_checkpoint_after_which_everything_is_stored(
    session_service: SessionService,
) -> None:
    """google-adk 2.13's ``flush()``: nothing is buffered, so after it (as before it) every
    appended event is stored; it is a checkpoint, as every service method."""
    session = await create(session_service)
    await session_service.append_event(session, Event(author="user"))
    with trio.testing.assert_checkpoints():
        await session_service.flush()
    stored = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert stored is not None and len(stored.events) == 1


async def test_an_equal_redelivery_of_the_last_event_is_not_stored_twice(
    session_service: SessionService,
) -> None:
    """As google-adk 2.13's in-memory store: appending the same event again (the same object,
    or an equal copy; ``temp:`` keys aside) stores nothing and changes nothing; an event that
    only shares the id is a new event, stored."""
    session = await create(session_service)
    event = Event(id="e1", author="user", actions=EventActions(state_delta={"n": 1, "temp:t": 1}))
    committed = await session_service.append_event(session, event)
    assert await session_service.append_event(session, event) == committed
    assert await session_service.append_event(session, attrs.evolve(event)) == committed
    assert (session.revision, len(session.events)) == (1, 1)
    stored = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert stored is not None
    assert (stored.revision, [e.id for e in stored.events], stored.state) == (1, ["e1"], {"n": 1})
    other = Event(id="e1", author="user", actions=EventActions(state_delta={"n": 2}))
    await session_service.append_event(stored, other)
    again = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert again is not None
    assert ([e.id for e in again.events], again.state) == (["e1", "e1"], {"n": 2})


async def test_a_redelivery_to_a_deleted_or_stale_session_is_refused(
    session_service: SessionService,
) -> None:
    """A re-delivered event is checked as any append: the session must still be as the
    snapshot saw it."""
    session = await create(session_service, session_id="s1")
    event = Event(id="e1", author="user")
    await session_service.append_event(session, event)
    behind = attrs.evolve(session)
    await session_service.append_event(session, Event(author="user"))
    with pytest.raises(StaleSessionError):
        await session_service.append_event(behind, event)
    await session_service.delete_session(app_name=APP, user_id=USER, session_id="s1")
    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(session, Event(id=session.events[-1].id))
    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(behind, event)
