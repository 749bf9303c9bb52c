"""PostgreSQL connections that die under the service: terminated server processes (an operator's
``pg_terminate_backend``, ``idle_session_timeout``, a restart), an unreachable database.

A connection found dead before anything was sent on it is replaced; anything else the database
cannot answer is :class:`~trio_agents.StoreUnavailableError` (the server's 503), never a raw
driver error (the server's 500).
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

import psycopg
import pytest
import trio

from tests.pg_cluster import ensure_cluster
from trio_agents import Event, SessionBusyError, StoreUnavailableError
from trio_agents.sessions import PostgresSessionService

KEY: dict[str, Any] = {"app_name": "app", "user_id": "u"}


@pytest.fixture
async def dsn() -> str:
    name = f"outage_{uuid.uuid4().hex[:8]}"
    return f"{await trio.to_thread.run_sync(ensure_cluster)} application_name={name}"


def terminate(dsn: str) -> int:
    """Terminate every server process of ``dsn``'s ``application_name``; how many there were."""
    name = dsn.rsplit("application_name=", 1)[1]
    with psycopg.connect(dsn.replace(name, "admin"), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (name,),
        ).fetchall()
        while admin.execute(  # gone from the server's view once each has exited
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()[0]:
            pass
    return len(rows)


async def test_pooled_connections_terminated_while_idle_are_replaced(dsn: str) -> None:
    async with PostgresSessionService(dsn, min_size=4, max_size=4) as service:
        async with trio.open_nursery() as nursery:  # four pooled connections in use once
            for n in range(8):
                nursery.start_soon(lambda n=n: service.create_session(**KEY, session_id=f"s{n}"))
        assert await trio.to_thread.run_sync(terminate, dsn) >= 4
        for n in range(8):  # each stale connection is found dead at BEGIN, and replaced
            session = await service.get_session(**KEY, session_id=f"s{n}")
            assert session is not None and session.id == f"s{n}"
        await service.create_session(**KEY, session_id="after")
        assert [s.id for s in await service.list_sessions(**KEY)][-1] == "after"


async def test_an_append_connection_terminated_while_idle_is_replaced(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        session = await service.create_session(**KEY, session_id="s")
        await service.append_event(session, Event(author="user", invocation_id="e-1"))
        assert await trio.to_thread.run_sync(terminate, dsn) >= 2  # the pool's, the appends'
        for _ in range(3):
            await service.append_event(session, Event(author="a", invocation_id="e-1"))
        stored = await service.get_session(**KEY, session_id="s")
    assert stored is not None and len(stored.events) == 4 and stored.revision == 4


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


async def test_an_unreachable_database_is_unavailable_not_a_driver_error() -> None:
    dsn = f"host=127.0.0.1 port={closed_port()} user=postgres dbname=x connect_timeout=2"
    async with PostgresSessionService(dsn) as service:
        with pytest.raises(StoreUnavailableError, match="unreachable"):
            await service.get_session(**KEY, session_id="s")


def with_options(dsn: str, options: str) -> str:
    """``dsn`` whose server options (the test schema's ``search_path``) include ``options``."""
    head, _, search_path = dsn.partition(" options=")
    name = search_path.split(" ", 1)
    return f"{head} options='{options} {name[0]}' {name[1] if len(name) > 1 else ''}".strip()


async def test_a_held_lease_outlives_the_databases_idle_session_timeout(dsn: str) -> None:
    """An operator's ``idle_session_timeout`` ends idle sessions: not a lock's connection,
    which idles while its run goes on (its lock would go with it, the run still in flight)."""
    idling = with_options(dsn, "-cidle_session_timeout=200")
    async with PostgresSessionService(idling) as holder, PostgresSessionService(dsn) as other:
        async with holder.lease(**KEY, session_id="s"):
            await trio.sleep(0.6)  # three timeouts of idling: the server's clock, not ours
            assert await other.lease_held(**KEY, session_id="s")
            with pytest.raises(SessionBusyError):
                async with other.lease(**KEY, session_id="s"):
                    pass  # pragma: no cover
        assert not await other.lease_held(**KEY, session_id="s")


async def test_a_lock_connection_terminated_while_idle_is_replaced(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        async with service.lease(**KEY, session_id="s"):
            pass  # a shared lock connection stays open, idle
        assert service._shared.connections == 1
        assert await trio.to_thread.run_sync(terminate, dsn) >= 2
        async with service.lease(**KEY, session_id="s"):
            assert await service.lease_held(**KEY, session_id="s")


async def test_lock_connections_are_ended_by_the_server_when_their_client_goes_silent(
    dsn: str,
) -> None:
    """A dead machine's locks are freed within seconds: the server probes a lock connection
    that idles (TCP keepalives), where the operating system's default waits for hours."""
    async with PostgresSessionService(dsn) as service, service.lease(**KEY, session_id="s"):
        conn = service._shared._open[0].conn
        row = await trio.to_thread.run_sync(
            lambda: conn.execute(
                "SELECT current_setting('tcp_keepalives_idle'),"
                " current_setting('tcp_keepalives_interval'),"
                " current_setting('tcp_keepalives_count'),"
                " current_setting('idle_session_timeout')"
            ).fetchone()
        )
    assert row == ("10", "5", "3", "0")
