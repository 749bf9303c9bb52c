"""A cancel sent while another process's listener is reconnecting still reaches its run: cancels
are recorded beside their ``NOTIFY`` and a listener that listens again reads those it missed.
Also the schema migration that brought the record (version 1 to 2)."""

from __future__ import annotations

import json
import uuid
from typing import Any, cast

import psycopg
import pytest
import trio

from tests.pg_cluster import ensure_cluster
from trio_agents import Event
from trio_agents.server import _cluster
from trio_agents.server._cluster import CANCEL_REASON, PostgresCluster, _addressed, _digest
from trio_agents.server._core import ServerCore
from trio_agents.sessions import PostgresSessionService
from trio_agents.sessions._postgres import MIGRATIONS, SCHEMA_VERSION

KEY = ("app", "u", "s")
NAMES: dict[str, Any] = {"app_name": "app", "user_id": "u", "session_id": "s"}
DEADLINE = 30.0
"""Seconds a test may take at most (far above a listener's reconnection, about 1.5 s)."""


class FakeRun:
    def __init__(self, invocation_id: str) -> None:
        self.invocation_id = invocation_id
        self.cancelled: list[str] = []
        self.cancelled_event = trio.Event()

    def cancel(self, reason: str) -> None:
        self.cancelled.append(reason)
        self.cancelled_event.set()


class FakeCore:
    def __init__(self) -> None:
        self.live: dict[Any, FakeRun] = {}


@pytest.fixture
async def base() -> str:
    return await trio.to_thread.run_sync(ensure_cluster)


def named(dsn: str) -> tuple[str, str]:
    name = f"p{uuid.uuid4().hex[:8]}"
    return f"{dsn} application_name={name}", name


def terminate_listener(dsn: str, name: str) -> None:
    """Terminate the ``LISTEN`` connection of ``name``'s process; wait until it is gone."""
    admin_dsn = dsn.replace(name, "admin")
    listening = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND query LIKE 'LISTEN%%'"
    )
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        while not admin.execute(listening, (name,)).fetchall():
            pass  # the listener's first LISTEN is on its way (it was started before)
        admin.execute(f"SELECT pg_terminate_backend(pid) FROM ({listening}) AS l", (name,))
        while admin.execute(listening, (name,)).fetchall():
            pass


def listeners(dsn: str, name: str) -> int:
    with psycopg.connect(dsn.replace(name, "admin"), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND query LIKE 'LISTEN%%'",
            (name,),
        ).fetchone()
    return int(row[0]) if row else 0


async def test_a_cancel_sent_while_the_runs_listener_reconnects_still_cancels_it(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cluster, "RECONNECT_WAIT", 3.0)  # room to send the cancel, under load
    here_dsn, _ = named(base)
    there_dsn, there_name = named(base)
    async with (
        PostgresSessionService(here_dsn) as one,
        PostgresSessionService(there_dsn) as two,
        trio.open_nursery() as nursery,
    ):
        here, there = PostgresCluster(one), PostgresCluster(two)
        here_core, there_core = FakeCore(), FakeCore()
        await nursery.start(here.serve, here_core)
        await nursery.start(there.serve, there_core)
        session = await two.create_session(**{k: NAMES[k] for k in ("app_name", "user_id")})
        key = ("app", "u", session.id)
        await two.append_event(session, Event(author="user", invocation_id="e-1"))
        async with two.lease(app_name="app", user_id="u", session_id=session.id):
            there_core.live[key] = run = FakeRun("e-1")
            there.registered(cast(ServerCore, there_core), key)
            await trio.to_thread.run_sync(terminate_listener, there_dsn, there_name)
            assert await here.cancel_elsewhere(key, "e-1")  # its NOTIFY reaches no one there
            assert await trio.to_thread.run_sync(listeners, there_dsn, there_name) == 0
            with trio.fail_after(DEADLINE):
                await run.cancelled_event.wait()
            assert run.cancelled == [CANCEL_REASON]
        nursery.cancel_scope.cancel()


async def test_a_listener_that_listens_again_skips_the_cancels_it_heard(
    base: str,
) -> None:
    async with PostgresSessionService(base) as service:
        cluster = PostgresCluster(service)
        core = FakeCore()
        heard = json.dumps({"op": "cancel", **_addressed(KEY), "invocationId": "e-1"})
        missed = json.dumps({"op": "cancel", **_addressed(KEY), "invocationId": "e-2"})
        for message, invocation_id in ((heard, "e-1"), (missed, "e-2")):
            await service.signal_cancel(message, invocation_id=invocation_id, digest=_digest(KEY))
        assert await service.cancels_since(60) == [heard, missed]
        cluster._dispatch(cast(ServerCore, core), heard)  # heard while listening: no run yet
        core.live[KEY] = run = FakeRun("e-1")  # a later run reusing the invocation id
        await cluster._catch_up(cast(ServerCore, core), 0.0)
        assert run.cancelled == []  # the cancel heard is not repeated
        core.live[KEY] = other = FakeRun("e-2")
        await cluster._catch_up(cast(ServerCore, core), 0.0)
        assert other.cancelled == [CANCEL_REASON]


def version_one(dsn: str) -> None:
    """Make the (empty) schema a trio_agents schema of version 1, with a session in it."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("CREATE TABLE trio_agents_meta (key TEXT PRIMARY KEY, value TEXT)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO trio_agents_meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO trio_agents_sessions VALUES ('app', 'u', 's', '{}', 0, 1, 1)")


def schema_state(dsn: str) -> tuple[str, bool]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT value FROM trio_agents_meta WHERE key = 'schema_version'")
        (version,) = row.fetchone() or ("",)
        (table,) = conn.execute("SELECT to_regclass('trio_agents_cancels') IS NOT NULL").fetchone()
    return str(version), bool(table)


async def test_a_version_one_schema_is_migrated_to_record_cancels(base: str) -> None:
    assert SCHEMA_VERSION == 2 == len(MIGRATIONS)
    await trio.to_thread.run_sync(version_one, base)
    assert await trio.to_thread.run_sync(schema_state, base) == ("1", False)
    for _ in range(2):  # a second service finds it migrated already
        async with PostgresSessionService(base) as service:
            session = await service.get_session(**NAMES)
            assert session is not None and session.id == "s"
            message = json.dumps({"op": "cancel", "key": list(KEY), "invocationId": "e-1"})
            await service.signal_cancel(message, invocation_id="e-1", digest=_digest(KEY))
    assert await trio.to_thread.run_sync(schema_state, base) == ("2", True)


async def test_the_migration_to_version_two_may_run_again(base: str) -> None:
    """Forward-only and idempotent: its statements run on a schema that has them change
    nothing (a migration interrupted after its DDL, before the version was written)."""
    async with PostgresSessionService(base) as service:
        await service.list_sessions(app_name="app")

    def again() -> None:
        with psycopg.connect(base) as conn, conn.transaction():
            for statement in MIGRATIONS[1]:
                conn.execute(statement)

    await trio.to_thread.run_sync(again)
    assert await trio.to_thread.run_sync(schema_state, base) == ("2", True)
