"""The pieces servers on one PostgreSQL share: the lease seen from anywhere, signals, messages."""

from __future__ import annotations

import json
import math
from typing import Any, cast

import httpx
import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given, settings, strategies as st
from trio.testing import MockClock

from tests.pg_cluster import ensure_cluster
from tests.server.conftest import Start
from tests.server.helpers import Gated, SseReader, user_text
from trio_agents import Event, FunctionCall
from trio_agents.artifacts import InMemoryArtifactService
from trio_agents.server import create_app
from trio_agents.server._cluster import (
    CANCEL_REASON,
    MAX_MESSAGE,
    LocalCluster,
    PostgresCluster,
    _end_message,
    cluster_of,
)
from trio_agents.server._core import ServerCore
from trio_agents.server._live import Frame, terminal_frame
from trio_agents.server._runs import follow
from trio_agents.sessions import InMemorySessionService
from trio_agents.sessions._postgres import PostgresSessionService

KEY = ("app", "u", "s")


@pytest.fixture
async def dsn() -> str:
    return await trio.to_thread.run_sync(ensure_cluster)


async def test_a_lease_is_seen_held_from_another_service_until_released(dsn: str) -> None:
    async with PostgresSessionService(dsn) as holder, PostgresSessionService(dsn) as onlooker:
        names = {"app_name": "app", "user_id": "u"}
        assert not await onlooker.lease_held(**names, session_id="s")
        async with holder.lease(**names, session_id="s"):
            assert await onlooker.lease_held(**names, session_id="s")
            assert await holder.lease_held(**names, session_id="s")
            assert not await onlooker.lease_held(**names, session_id="t")
        assert not await onlooker.lease_held(**names, session_id="s")


async def test_a_signal_reaches_a_listener_of_the_same_schema(dsn: str) -> None:
    import psycopg
    from psycopg import sql

    async with PostgresSessionService(dsn) as service:
        channel = await service.signal_channel()
        assert channel.startswith("trio_agents_") and len(channel) <= 63
        listener = await trio.to_thread.run_sync(
            lambda: psycopg.connect(service.dsn, autocommit=True)
        )
        try:
            listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
            await trio.to_thread.run_sync(listener.execute, listen)
            await service.signal('{"op": "x"}')
            got = await trio.to_thread.run_sync(
                lambda: [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
            )
        finally:
            await trio.to_thread.run_sync(listener.close)
    assert got == ['{"op": "x"}']


async def test_signals_sent_together_reach_a_listener_in_order(dsn: str) -> None:
    import psycopg
    from psycopg import sql

    messages = [json.dumps({"op": "x", "n": n}) for n in range(40)]
    async with PostgresSessionService(dsn) as service:
        channel = await service.signal_channel()
        listener = await trio.to_thread.run_sync(
            lambda: psycopg.connect(service.dsn, autocommit=True)
        )
        try:
            listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
            await trio.to_thread.run_sync(listener.execute, listen)
            await service.signal(*messages[:30])
            await service.signal(*messages[30:])
            got = await trio.to_thread.run_sync(
                lambda: [n.payload for n in listener.notifies(timeout=10, stop_after=40)]
            )
        finally:
            await trio.to_thread.run_sync(listener.close)
    assert got == messages


class RecordingService:
    """Records what each ``signal`` call sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, ...]] = []

    async def signal(self, *messages: str) -> None:
        await trio.lowlevel.checkpoint()
        self.sent.append(messages)


async def test_announcements_queued_while_one_is_sent_go_together_in_order() -> None:
    service = RecordingService()
    cluster = PostgresCluster(cast(PostgresSessionService, service))
    first = [f"m{n}" for n in range(3)]
    for message in first:
        cluster._outbox.send_nowait(message)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cluster._send_all)
        await trio.testing.wait_all_tasks_blocked()
        cluster._outbox.send_nowait("m3")
        await trio.testing.wait_all_tasks_blocked()
        cluster._outbox.close()
    assert service.sent == [tuple(first), ("m3",)]


class FakeRun:
    def __init__(self, invocation_id: str) -> None:
        self.invocation_id = invocation_id
        self.cancelled: list[str] = []

    def cancel(self, reason: str) -> None:
        self.cancelled.append(reason)


class FakeCore:
    def __init__(self) -> None:
        self.live: dict[Any, FakeRun] = {}


async def test_a_cancel_that_arrives_before_its_run_registers_cancels_it(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        cluster = PostgresCluster(service)
        core = FakeCore()
        message = json.dumps({"op": "cancel", "key": list(KEY), "invocationId": "e-1"})
        cluster._dispatch(cast(ServerCore, core), message)
        core.live[KEY] = other = FakeRun("e-0")  # another invocation: not cancelled
        cluster.registered(cast(ServerCore, core), KEY)
        assert other.cancelled == []
        core.live[KEY] = run = FakeRun("e-1")
        cluster.registered(cast(ServerCore, core), KEY)
        assert run.cancelled == [CANCEL_REASON]
        cluster.registered(cast(ServerCore, core), KEY)  # once
        assert run.cancelled == [CANCEL_REASON]
        cluster._dispatch(cast(ServerCore, core), message)  # a run in flight: cancelled at once
        assert run.cancelled == [CANCEL_REASON] * 2


def end_message(key: tuple[str, str, str], terminal: Frame) -> str:
    text = _end_message(key, terminal)
    assert text is not None
    assert len(text.encode()) <= MAX_MESSAGE
    return text


def test_an_end_message_fits_a_notification_and_keeps_the_terminal_kind() -> None:
    error = RuntimeError("x" * 50_000)
    message = json.loads(end_message(KEY, terminal_frame("error", "e-1", error)))
    assert message["kind"] == "error" and message["key"] == list(KEY)
    data = json.loads(message["data"])
    assert data["invocationId"] == "e-1"
    assert data["error"].startswith("RuntimeError: xxx")
    assert data["errorDetails"]["type"] == "RuntimeError"
    short = json.loads(end_message(KEY, terminal_frame("cancelled", "e-2")))
    assert short["data"] == terminal_frame("cancelled", "e-2").data


LONG_USER = "u" * 12_000
"""A user id a request head of the default limit holds, but longer than a notification may be."""


def test_a_message_about_a_session_with_a_long_key_names_it_by_digest() -> None:
    message = json.loads(end_message(("app", LONG_USER, "s"), terminal_frame("done", "e-1")))
    assert "key" not in message and len(message["keyDigest"]) == 64
    assert message["data"] == terminal_frame("done", "e-1").data


def test_a_paused_end_too_long_keeps_the_ids_and_names_of_the_calls_it_waits_for() -> None:
    calls = [FunctionCall(name="approve", args={"memo": "m" * 10_000}, id="c-1")]
    message = json.loads(end_message(KEY, terminal_frame("done", "e-1", waiting_for=calls)))
    assert json.loads(message["data"]) == {
        "invocationId": "e-1",
        "paused": True,
        "waitingFor": [{"id": "c-1", "name": "approve"}],
    }


async def test_a_run_of_a_session_with_a_long_key_is_cancelled_from_another_server(
    dsn: str, start_server: Start, client: httpx.AsyncClient
) -> None:
    """Sent whole, the cancel was longer than PostgreSQL lets a notification be: the cancel
    route answered 500, and the announcements sent along with it were lost."""
    async with PostgresSessionService(dsn) as one, PostgresSessionService(dsn) as two:
        here, there = [
            await start_server(create_app({"gated": Gated(name="gated")}, session_service=s))
            for s in (one, two)
        ]
        sessions = f"/apps/gated/users/{LONG_USER}/sessions"
        assert (await client.post(here + sessions, json={"sessionId": "s"})).status_code == 200
        run = {"appName": "gated", "userId": LONG_USER, "sessionId": "s"}
        body = {**run, "newMessage": user_text("hi")}
        async with client.stream("POST", there + "/run_sse", json=body) as running:
            frames = SseReader(running)
            invocation_id = (await frames.next()).data["invocationId"]
            cancel = f"{here}{sessions}/s/invocations/{invocation_id}/cancel"
            assert (await client.post(cancel)).status_code == 202
            rest = await frames.rest()
    assert [frame.event for frame in rest] == [None, "cancelled"]  # the call's closing answer


async def test_a_server_alone_sees_no_run_elsewhere(dsn: str) -> None:
    alone = cluster_of(InMemorySessionService())
    assert type(alone) is LocalCluster
    assert not await alone.in_flight_elsewhere(KEY)
    assert not await alone.cancel_elsewhere(KEY, "e-1")
    async with PostgresSessionService(dsn) as service:
        assert isinstance(cluster_of(service), PostgresCluster)


# -- following a run of another process, under many schedules ----------------------------------


class LeaseFlag:
    """Stands for the database: whether the other process holds the session's lease."""

    def __init__(self) -> None:
        self.held = True

    async def lease_held(self, **key: str) -> bool:
        await trio.lowlevel.checkpoint()
        return self.held


@settings(max_examples=60, deadline=None)
@given(
    random_module=st.random_module(),
    events=st.integers(1, 6),  # a run stores its user message first
    already=st.integers(0, 2),
    after=st.integers(0, 9),
    pauses=st.lists(st.sampled_from([0, 0, 0.05, 0.1, 0.3]), min_size=9, max_size=9),
    ending=st.sampled_from(["done", "cancelled", "error", None]),  # None: the process died
)
def test_a_follower_on_another_process_sees_each_event_once_then_one_end(
    random_module: Any,
    events: int,
    already: int,
    after: int,
    pauses: list[float],
    ending: str | None,
) -> None:
    async def main() -> list[Frame]:
        store = InMemorySessionService()
        session = await store.create_session(app_name="app", user_id="u", session_id="s")
        for i in range(already):
            await store.append_event(session, Event(author="user", invocation_id=f"e-{i}"))
        flag = LeaseFlag()
        cluster = PostgresCluster(cast(PostgresSessionService, flag))
        core = ServerCore({}, session_service=store, artifact_service=InMemoryArtifactService(),
                          memory_service=None, plugins=(), max_detached_runs=1,
                          cleanup_timeout=1, cluster=cluster)  # fmt: skip
        out, received = trio.open_memory_channel[Frame](math.inf)

        async def other_process() -> None:
            for i in range(events):
                await trio.sleep(pauses[i])
                await store.append_event(session, Event(author="a", invocation_id="e-run"))
            await trio.sleep(pauses[6])
            flag.held = False  # the lease goes first, then the announcement
            await trio.sleep(pauses[7])
            if ending is not None:
                frame = terminal_frame(ending, "e-run")  # type: ignore[arg-type]
                cluster._ended_there(core, KEY, frame)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_process)
            await trio.sleep(pauses[8] / 10)
            await follow(core, KEY, after, out)
        return [frame async for frame in received]

    frames = trio.run(main, clock=MockClock(autojump_threshold=0))
    total = already + events
    body, end = frames[:-1], frames[-1]
    assert [f.seq for f in body] == list(range(after + 1, total + 1))
    assert all(f.kind == "event" for f in body)
    assert end.terminal
    if ending is not None:
        assert end == terminal_frame(ending, "e-run")  # type: ignore[arg-type]
    else:
        assert end.kind == "done"
