"""PostgreSQL run locks: released before the lease returns, and their connections bounded.

A lease released by one process is free at once for another (the lock is unlocked on the
server before the lease's connection closes), and runs in flight never open more lock
connections than ``max_lock_connections``: past it, or past the server's own connection limit,
a lease is refused with :class:`~trio_agents.StoreUnavailableError`.
"""

from __future__ import annotations

import contextlib
import uuid

import psycopg
import pytest
import trio
import trio.lowlevel
from hypothesis import given, settings, strategies as st

from tests.pg_cluster import ensure_cluster
from trio_agents import ConfigurationError, SessionBusyError, StoreUnavailableError
from trio_agents.sessions._postgres import PostgresSessionService


@pytest.fixture
async def dsn() -> str:
    return await trio.to_thread.run_sync(ensure_cluster)


def lease(
    service: PostgresSessionService, session_id: str, *, wait: bool = False
) -> contextlib.AbstractAsyncContextManager[None]:
    return service.lease(app_name="app", user_id="u", session_id=session_id, wait=wait)


async def test_a_released_lease_is_free_at_once_for_another_service(dsn: str) -> None:
    """Leases taken alternately by two services, each once the other's was released: never
    busy (with a close-only release, the server dropped the lock a moment later)."""
    async with PostgresSessionService(dsn) as first, PostgresSessionService(dsn) as second:
        for turn in range(300):
            service = first if turn % 2 else second
            async with lease(service, "s"):
                pass


async def test_lock_connections_are_bounded(dsn: str) -> None:
    async with PostgresSessionService(dsn, max_lock_connections=2) as service:
        async with lease(service, "a"), lease(service, "b"):
            with pytest.raises(StoreUnavailableError, match="2 runs") as info:
                async with lease(service, "c"):
                    pass
            assert info.value.session_id == "c"
            with pytest.raises(SessionBusyError):  # busy is still busy, not unavailable
                async with lease(service, "a"):
                    pass
        async with lease(service, "c"):
            pass


async def test_a_queued_lease_waits_for_a_lock_connection(dsn: str) -> None:
    async with PostgresSessionService(dsn, max_lock_connections=1) as service:
        order: list[str] = []
        held, release = trio.Event(), trio.Event()

        async def hold() -> None:
            async with lease(service, "a"):
                order.append("a")
                held.set()
                await release.wait()
            order.append("a released")

        async def queue() -> None:
            async with lease(service, "b", wait=True):
                order.append("b")

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await held.wait()
                nursery.start_soon(queue)
                while not service._lock_slots.statistics().tasks_waiting:  # ruff: ignore[async-busy-wait]
                    await trio.sleep(0.01)  # polls a state (the waiter is in a thread first)
                assert order == ["a"]
                release.set()
        assert order == ["a", "a released", "b"]


async def test_a_refused_connection_is_unavailable_not_a_crash(dsn: str) -> None:
    """Past the connections the database allows (here a role's ``CONNECTION LIMIT``, which
    refuses as ``max_connections`` does, SQLSTATE 53300, whatever other clients of the server
    hold) a lease is refused with the typed error."""
    role = f"limited_{uuid.uuid4().hex[:12]}"
    schema = dsn.rsplit("search_path=", 1)[1]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 3")
        admin.execute(f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}")
    limited = f"{dsn} user={role}"
    async with PostgresSessionService(limited) as service, contextlib.AsyncExitStack() as stack:
        with pytest.raises(StoreUnavailableError, match="refused another connection"):
            for index in range(32):  # four sessions' locks per connection: eight connections
                await stack.enter_async_context(lease(service, f"s{index}"))


def test_max_lock_connections_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_lock_connections"):
        PostgresSessionService("postgresql://x", max_lock_connections=0)


@settings(deadline=None, max_examples=20)
@given(sessions=st.lists(st.sampled_from("abcd"), min_size=1, max_size=8), _r=st.random_module())
def test_concurrent_leases_never_exceed_the_bound(sessions: list[str], _r: object) -> None:
    async def check() -> None:
        dsn = await trio.to_thread.run_sync(ensure_cluster)
        async with PostgresSessionService(dsn, max_lock_connections=2) as service:
            held = 0
            peak = 0

            async def one(session_id: str) -> None:
                nonlocal held, peak
                try:
                    async with lease(service, session_id):
                        held += 1
                        peak = max(peak, held)
                        await trio.lowlevel.checkpoint()
                        held -= 1
                except (SessionBusyError, StoreUnavailableError):
                    pass

            async with trio.open_nursery() as nursery:
                for session_id in sessions:
                    nursery.start_soon(one, session_id)
            assert peak <= 2

    trio.run(check)
