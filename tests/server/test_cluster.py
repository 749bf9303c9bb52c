"""The pieces servers on one PostgreSQL share: the lease seen from anywhere, signals, messages."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import trio

from tests.pg_cluster import ensure_cluster
from trio_agents.server._cluster import (
    CANCEL_REASON,
    MAX_MESSAGE,
    LocalCluster,
    PostgresCluster,
    _end_message,
    cluster_of,
)
from trio_agents.server._core import ServerCore
from trio_agents.server._live import terminal_frame
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


def test_an_end_message_fits_a_notification_and_keeps_the_terminal_kind() -> None:
    error = RuntimeError("x" * 50_000)
    message = json.loads(_end_message(KEY, terminal_frame("error", "e-1", error)))
    assert len(_end_message(KEY, terminal_frame("error", "e-1", error)).encode()) <= MAX_MESSAGE
    assert message["kind"] == "error" and message["key"] == list(KEY)
    data = json.loads(message["data"])
    assert data["invocationId"] == "e-1"
    assert data["error"].startswith("RuntimeError: xxx")
    assert data["errorDetails"]["type"] == "RuntimeError"
    short = json.loads(_end_message(KEY, terminal_frame("cancelled", "e-2")))
    assert short["data"] == terminal_frame("cancelled", "e-2").data


async def test_a_server_alone_sees_no_run_elsewhere(dsn: str) -> None:
    alone = cluster_of(InMemorySessionService())
    assert type(alone) is LocalCluster
    assert not await alone.in_flight_elsewhere(KEY)
    assert not await alone.cancel_elsewhere(KEY, "e-1")
    async with PostgresSessionService(dsn) as service:
        assert isinstance(cluster_of(service), PostgresCluster)
