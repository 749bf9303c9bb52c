"""A PostgreSQL server that is down: once the service has found it unreachable, callers hear
:class:`~trio_agents.StoreUnavailableError` at once (the server's 503), not after the pool's
whole timeout; a busy database is still waited for; the first success ends the outage.

These tests stop and start the shared test cluster: they run alone (pytest runs tests one at a
time in a process), and leave it running.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from tests.pg_cluster import ensure_cluster, start_cluster, stop_cluster
from tests.sessions.pg_waits import until_running
from trio_agents import Event, StoreUnavailableError
from trio_agents.sessions import PostgresSessionService
from trio_agents.sessions._pg_outage import OUTAGE_WAIT

KEY: dict[str, Any] = {"app_name": "app", "user_id": "u"}
PATIENT_POOL = 600.0
"""A pool timeout no test waits for: a caller that waits it out fails the test's deadline."""
DEADLINE = 60.0
"""Seconds a test may take at most (a bound, far above what the fast paths need)."""


@pytest.fixture
async def dsn() -> str:
    name = f"down_{uuid.uuid4().hex[:8]}"
    return f"{await trio.to_thread.run_sync(ensure_cluster)} application_name={name}"


async def until_reachable(service: PostgresSessionService) -> None:
    """Poll (bounded) until the restarted server answers the service again."""
    with trio.fail_after(DEADLINE):
        while True:
            try:
                await service.list_sessions(**KEY)
            except StoreUnavailableError:
                await trio.sleep(0.1)  # the server process is starting: poll it
            else:
                return


async def test_requests_during_an_outage_fail_fast_and_the_first_success_ends_it(
    dsn: str,
) -> None:
    async with PostgresSessionService(dsn, max_size=2) as service:
        session = await service.create_session(**KEY, session_id="s")
        service._pool.timeout = PATIENT_POOL
        await trio.to_thread.run_sync(stop_cluster)
        try:
            with trio.fail_after(DEADLINE):
                for _ in range(3):  # the first finds the pooled connection lost, then each waits
                    with pytest.raises(StoreUnavailableError, match="unreachable"):
                        await service.get_session(**KEY, session_id="s")
                with pytest.raises(StoreUnavailableError):
                    await service.append_event(session, Event(author="user"))
                with pytest.raises(StoreUnavailableError):
                    async with service.lease(**KEY, session_id="s"):
                        pass  # pragma: no cover
                with pytest.raises(StoreUnavailableError):
                    await trio.to_thread.run_sync(service.held_connection)
            assert service._reach.down is not None
        finally:
            await trio.to_thread.run_sync(start_cluster)
        await until_reachable(service)
        assert service._reach.down is None
        await service.append_event(session, Event(author="user"))
        stored = await service.get_session(**KEY, session_id="s")
        assert stored is not None and stored.revision == 1
        async with service.lease(**KEY, session_id="s"):
            assert await service.lease_held(**KEY, session_id="s")


async def test_a_new_service_finds_the_database_down_at_once(dsn: str) -> None:
    await trio.to_thread.run_sync(stop_cluster)
    try:
        async with PostgresSessionService(dsn) as service:
            with trio.fail_after(DEADLINE):
                with pytest.raises(StoreUnavailableError, match="unreachable"):
                    await service.list_sessions(**KEY)
            assert service._reach.down is not None
    finally:
        await trio.to_thread.run_sync(start_cluster)


async def test_a_busy_database_after_an_outage_is_waited_for(dsn: str) -> None:
    """Every pooled connection in use, the database reachable: a caller waits (longer than the
    outage wait) for a connection, as before the outage."""
    async with PostgresSessionService(dsn, max_size=1) as service:
        await service.create_session(**KEY, session_id="s")
        await trio.to_thread.run_sync(stop_cluster)
        try:
            with pytest.raises(StoreUnavailableError):
                await service.get_session(**KEY, session_id="s")
        finally:
            await trio.to_thread.run_sync(start_cluster)
        await until_reachable(service)
        query = f"SELECT pg_sleep({OUTAGE_WAIT * 2})"  # the server holds the only connection
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service._run, lambda conn: conn.execute(query))
                await until_running(dsn, query)
                session = await service.get_session(**KEY, session_id="s")
        assert session is not None and session.id == "s"
