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
    _addressed,
    _end_message,
    cluster_of,
)
from trio_agents.server._core import ServerCore
from trio_agents.server._live import Frame, invocation_of, terminal_frame
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
    assert "key" not in message and len(message["digest"]) == 32
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
        self.who = "a"
        """The process holding it (while held)."""

    async def lease_held(self, **key: str) -> bool:
        await trio.lowlevel.checkpoint()
        return self.held

    async def lease_holder(self, **key: str) -> str | None:
        await trio.lowlevel.checkpoint()
        return self.who if self.held else None


@settings(max_examples=80, deadline=None)
@given(
    random_module=st.random_module(),
    events=st.integers(1, 6),  # a run stores its user message first
    already=st.integers(0, 2),
    after=st.integers(0, 9),
    pauses=st.lists(st.sampled_from([0, 0, 0.05, 0.1, 0.3]), min_size=10, max_size=10),
    ending=st.sampled_from(["done", "cancelled", "error", None]),  # None: the process died
    next_turn=st.booleans(),  # a third process runs the next turn as soon as the lease is free
    known=st.booleans(),  # this process heard how the earlier turns ended
)
def test_a_follower_on_another_process_sees_each_event_once_then_one_end(
    random_module: Any,
    events: int,
    already: int,
    after: int,
    pauses: list[float],
    ending: str | None,
    next_turn: bool,
    known: bool,
) -> None:
    """The follower sends the followed run's events once each and ends with its end, never with
    the next turn's, which may begin in a third process the moment the lease is free.

    A follower that comes after the run took its lease but before it stored anything, from a
    process that never heard how the previous turn ended, may not tell that turn from the run in
    flight: when it sees the lease free before it has read the run's first event, it ends with
    the previous turn's end (a dead run's next turn looks the same to it)."""

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
        if already and known:
            core.remember(KEY, terminal_frame("done", f"e-{already - 1}"))
        out, received = trio.open_memory_channel[Frame](math.inf)

        async def announce() -> None:
            await trio.sleep(pauses[7])
            if ending is not None:
                frame = terminal_frame(ending, "e-run")  # type: ignore[arg-type]
                cluster._ended_there(core, KEY, frame)

        async def third_process() -> None:
            await trio.sleep(pauses[9])
            flag.held, flag.who = True, "b"
            for _ in range(2):
                await store.append_event(session, Event(author="b", invocation_id="e-next"))
            flag.held = False
            cluster._ended_there(core, KEY, terminal_frame("done", "e-next"))

        async def other_process(nursery: trio.Nursery) -> None:
            for i in range(events):
                await trio.sleep(pauses[i] + (0.001 if i == 0 else 0))  # never a tie with a come
                await store.append_event(session, Event(author="a", invocation_id="e-run"))
            await trio.sleep(pauses[6])
            flag.held = False  # the lease goes first, then the announcement
            nursery.start_soon(announce)
            if next_turn:
                nursery.start_soon(third_process)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_process, nursery)
            await trio.sleep(pauses[8] / 10)
            await follow(core, KEY, after, out)
        return [frame async for frame in received]

    frames = trio.run(main, clock=MockClock(autojump_threshold=0))
    body, end = frames[:-1], frames[-1]
    assert all(f.kind == "event" for f in body)
    assert end.terminal
    gap = already and not known and pauses[8] / 10 < pauses[0] + 0.001  # came before it stored
    previous = [f.seq for f in body] == list(range(after + 1, already + 1))
    if gap and previous and end == terminal_frame("done", f"e-{already - 1}"):
        return
    released = sum(pauses[:events]) + 0.001 + pauses[6]
    late = pauses[8] / 10 >= released  # came once e-run let go: it may follow a later turn
    if next_turn and (ending is None or late):  # e-run's end unknown here, or not followed
        assert [f.seq for f in body] == list(range(after + 1, after + 1 + len(body)))
        assert not body or invocation_of(end) == invocation_of(body[-1])
        return
    total = already + events
    assert [f.seq for f in body] == list(range(after + 1, total + 1))
    assert {invocation_of(f) for f in body[max(0, already - after) :]} <= {"e-run"}
    if ending is not None:
        assert end == terminal_frame(ending, "e-run")  # type: ignore[arg-type]
    else:
        assert end == terminal_frame("done", "e-run")


LONG = ("app", "u" * 9000, "s")
"""A session whose key alone is longer than a notification may be (ids are as long as a
request allows)."""


def test_every_end_message_fits_a_notification_whatever_its_session_and_calls() -> None:
    calls = [FunctionCall(id=f"c{n}", name="approve", args={"doc": "x" * 3000}) for n in range(4)]
    paused = terminal_frame("done", "e-1", waiting_for=calls)
    for key in (KEY, LONG):
        text = _end_message(key, paused)
        assert text is not None and len(text.encode()) <= MAX_MESSAGE
        message = json.loads(text)
        assert message.get("key", list(LONG)) == list(key)
        data = json.loads(message["data"])
        assert data["paused"] and data["invocationId"] == "e-1"
        assert [c["id"] for c in data["waitingFor"]] == ["c0", "c1", "c2", "c3"]
    short = json.loads(_end_message(KEY, terminal_frame("done", "e-1")) or "")
    assert short["key"] == list(KEY)


async def test_a_session_with_a_long_key_is_cancelled_and_its_end_reaches_followers(
    dsn: str,
) -> None:
    """Two clusters on one database, as two processes: a cancel and an end announced by one
    reach the run and the follower of the other, for a key too long to name in a message."""
    async with PostgresSessionService(dsn) as service, trio.open_nursery() as nursery:
        here, there = PostgresCluster(service), PostgresCluster(service)
        core = FakeCore()
        for cluster in (here, there):
            await nursery.start(cluster.serve, core)
        core.live[LONG] = run = FakeRun("e-1")
        there.registered(cast(ServerCore, core), LONG)
        with here.watch(LONG) as remote:
            await service.signal(
                json.dumps({"op": "cancel", **_addressed(LONG), "invocationId": "e-1"})
            )
            there.ended(LONG, terminal_frame("cancelled", "e-1"))
            with trio.fail_after(10):
                frame = await remote.wait("e-1")
        assert frame == terminal_frame("cancelled", "e-1")
        assert run.cancelled == [CANCEL_REASON]
        nursery.cancel_scope.cancel()


class FailingOnce:
    """A store whose ``signal`` refuses a batch holding ``bad`` (as PostgreSQL refuses a too
    long payload), and records what it sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def signal(self, *messages: str) -> None:
        await trio.lowlevel.checkpoint()
        if "bad" in messages:
            raise ValueError("payload string too long")
        self.sent.extend(messages)


async def test_a_message_that_cannot_be_sent_does_not_sink_the_others() -> None:
    service = FailingOnce()
    cluster = PostgresCluster(cast(PostgresSessionService, service))
    for message in ("m0", "bad", "m1"):
        cluster._outbox.send_nowait(message)
    cluster._outbox.close()
    await cluster._send_all()
    assert service.sent == ["m0", "m1"]
