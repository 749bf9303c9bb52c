"""Whatever a session service accepts it can read back, equal, and write as UTF-8 JSON.

Every backend (``conftest.SERVICE_FACTORIES``) is fed states, deltas, event contents and ids
drawn with lone surrogates, NUL characters, deep nesting and values JSON cannot carry. Each call
either raises :class:`SerializationError` naming where, having stored nothing, or succeeds; then
``get_session`` (and ``list_sessions``) return exactly what was accepted, and the session
serializes to UTF-8 JSON.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings, strategies as st

from trio_agents import (
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    SerializationError,
)
from trio_agents._serde import MAX_DEPTH, check_event, check_storable, loads
from trio_agents.sessions import Session, SessionService

APP = "app"

# Every code point, lone surrogates included; NUL and other controls too.
any_text = st.text(st.characters(exclude_categories=()), max_size=6)
plain_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    any_text,
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(any_text, inner, max_size=3)
    ),
    max_leaves=8,
)
values = st.one_of(
    json_like,
    st.integers(MAX_DEPTH - 6, MAX_DEPTH + 2).map(nested),
    st.sampled_from([b"bytes", {1, 2}, object(), {1: "int key"}]),
)
keys = st.one_of(plain_text, any_text, st.sampled_from(["app:k", "user:k", "temp:k", "k"]))
states = st.dictionaries(keys, values, max_size=3)


@st.composite
def events(draw: st.DrawFn) -> Event:
    """An event whose text, call arguments, response, metadata and delta may be unstorable."""
    kind = draw(st.sampled_from(["text", "call", "response"]))
    if kind == "text":
        part = Part(text=draw(any_text))
    elif kind == "call":
        part = Part(function_call=FunctionCall(name=draw(any_text), args=draw(states), id="c1"))
    else:
        response = draw(states)
        part = Part(function_response=FunctionResponse(name="f", response=response, id="c1"))
    return Event(
        author=draw(st.sampled_from(["agent", "user", "\udc80", "ag\x00ent"])),
        invocation_id="e-1",
        content=Content(role="model", parts=(part,)),
        custom_metadata=draw(st.none() | states),
        actions=EventActions(state_delta=draw(states)),
    )


ids = st.one_of(st.sampled_from(["s", "s-\udc80", "s\x00", "\ud800"]), plain_text)


def _read_back(session: Session) -> dict[str, Any]:
    """What a client would get: the session as UTF-8 JSON, parsed again."""
    data = {
        "state": session.state,
        "events": [event.to_dict() for event in session.events],
    }
    text = json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
    parsed: dict[str, Any] = loads(text)
    return parsed


async def _create(svc: SessionService, user: str, sid: str, state: dict[Any, Any]) -> Any:
    try:
        return await svc.create_session(app_name=APP, user_id=user, session_id=sid, state=state)
    except SerializationError as exc:
        return exc


@settings(deadline=None, max_examples=40)
@given(
    user=ids, sid=ids, state=states, appended=st.lists(events(), max_size=3), _r=st.random_module()
)
def test_what_a_service_accepts_reads_back_equal(
    service_factory: Any,
    user: str,
    sid: str,
    state: dict[Any, Any],
    appended: list[Event],
    _r: Any,
) -> None:
    async def check() -> None:
        async with service_factory() as svc:
            created = await _create(svc, user, sid, state)
            if isinstance(created, SerializationError):
                assert created.path, "the error names where"
                assert await svc.list_sessions(app_name=APP) == []
                return
            accepted: list[Event] = []
            for event in appended:
                try:
                    accepted.append(await svc.append_event(created, event))
                except SerializationError as exc:
                    refused = exc
                else:
                    continue
                assert refused.path
            found = await svc.get_session(app_name=APP, user_id=user, session_id=created.id)
            assert found is not None
            assert list(found.events) == accepted
            kept = {k: v for k, v in created.state.items() if not k.startswith("temp:")}
            assert found.state == kept  # temp: keys reach the caller's snapshot only
            assert _read_back(found) == _read_back(attrs.evolve(created, state=kept))
            listed = await svc.list_sessions(app_name=APP, user_id=user)
            assert [s.state for s in listed] == [kept]

    trio.run(check)


@settings(max_examples=200)
@given(value=values)
def test_storable_values_survive_utf8_json(value: Any) -> None:
    """What :func:`check_storable` passes is written as UTF-8 JSON and read back equal."""
    try:
        check_storable(value, "v")
    except SerializationError as exc:
        refused = exc
    else:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        assert loads(text) == json.loads(json.dumps(value))
        return
    assert refused.path.startswith("v")


@settings(max_examples=200)
@given(event=events())
def test_checked_events_survive_utf8_json(event: Event) -> None:
    try:
        check_event(event)
    except SerializationError as exc:
        refused = exc
    else:
        assert Event.from_json(event.to_json().encode("utf-8").decode()) == event
        return
    assert refused.path.startswith("event")


# -- regressions from the server trial ------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "path"),
    [
        ({"app:x": "\udc80"}, "state['app:x']"),
        ({"user:\ud800": 1}, "state['user:\\ud800']"),
        ({"k": nested(MAX_DEPTH)}, "state['k']"),
        ({"k": float("nan")}, "state['k']"),
    ],
)
async def test_create_refuses_unstorable_state_and_stores_nothing(
    session_service: SessionService, state: dict[str, Any], path: str
) -> None:
    with pytest.raises(SerializationError) as info:
        await session_service.create_session(app_name=APP, user_id="u", session_id="s", state=state)
    assert info.value.path.startswith(path)
    assert await session_service.list_sessions(app_name=APP) == []
    fresh = await session_service.create_session(app_name=APP, user_id="v", session_id="s")
    assert fresh.state == {}


@pytest.mark.parametrize("field", ["session_id", "user_id", "app_name"])
@pytest.mark.parametrize("bad", ["\udc80", "a\x00b"])
async def test_create_refuses_unstorable_ids(
    session_service: SessionService, field: str, bad: str
) -> None:
    ids = {"app_name": APP, "user_id": "u", "session_id": "s", field: bad}
    with pytest.raises(SerializationError) as info:
        await session_service.create_session(**ids)
    assert info.value.path == field


@pytest.mark.parametrize(
    ("event", "path"),
    [
        (Event(author="a", content=Content(parts=(Part(text="\ud800"),))), "event['content']"),
        (
            Event(
                author="a",
                content=Content(
                    parts=(Part(function_call=FunctionCall(name="f", args={"x": nested(99)})),)
                ),
            ),
            "event['content']['parts'][0]['functionCall']['args']['x']",
        ),
        (Event(author="\udc80"), "event['author']"),
        (Event(author="a", custom_metadata={"m": b"x"}), "event['customMetadata']['m']"),
        (
            Event(author="a", actions=EventActions(state_delta={"k": nested(MAX_DEPTH - 2)})),
            "state_delta['k']",
        ),
    ],
)
async def test_append_refuses_unstorable_events_and_stores_nothing(
    session_service: SessionService, event: Event, path: str
) -> None:
    session = await session_service.create_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SerializationError) as info:
        await session_service.append_event(session, event)
    assert info.value.path.startswith(path)
    found = await session_service.get_session(app_name=APP, user_id="u", session_id="s")
    assert found is not None and list(found.events) == [] and found.revision == 0
    ok = await session_service.append_event(found, Event(author="a", invocation_id="e"))
    assert ok.author == "a"


async def test_values_at_the_depth_limit_are_stored_and_read_back(
    session_service: SessionService,
) -> None:
    deepest = nested(MAX_DEPTH - 3)  # a state value sits 3 levels deep in its event
    session = await session_service.create_session(
        app_name=APP, user_id="u", state={"k": deepest, "app:é": "ü€😀"}
    )
    await session_service.append_event(
        session, Event(author="a", actions=EventActions(state_delta={"user:d": deepest}))
    )
    found = await session_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert found is not None
    assert found.state == {"k": deepest, "app:é": "ü€😀", "user:d": deepest}
    assert _read_back(found)["state"] == found.state
