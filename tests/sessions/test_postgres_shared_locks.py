"""PostgreSQL run locks taken without queueing share connections, four runs each.

Every lock is still a real advisory lock (another service sees the session busy while it is
held, and free at once after), a burst of runs opens a connection per four runs and not one per
run, and the connections are reused by the next runs.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio
import trio.lowlevel
from hypothesis import given, settings, strategies as st

from tests.pg_cluster import ensure_cluster
from trio_agents import SessionBusyError
from trio_agents.sessions._pg_locks import LEASES_PER_CONNECTION, SPARE_CONNECTIONS
from trio_agents.sessions._postgres import DEFAULT_MAX_LOCK_CONNECTIONS, PostgresSessionService


@pytest.fixture
async def dsn() -> str:
    return await trio.to_thread.run_sync(ensure_cluster)


def lease(service: PostgresSessionService, session_id: str) -> Any:
    return service.lease(app_name="app", user_id="u", session_id=session_id)


def counting_connects(service: PostgresSessionService) -> list[int]:
    """Count the connections ``service`` opens for locks from now on."""
    opened = [0]
    connect = service._connect

    def counted() -> Any:
        opened[0] += 1
        return connect()

    service._connect = counted  # type: ignore[method-assign]
    service._shared._connect = counted
    return opened


async def test_held_locks_are_real_and_share_connections(dsn: str) -> None:
    sessions = [f"s{index}" for index in range(10)]
    async with PostgresSessionService(dsn) as one, PostgresSessionService(dsn) as other:
        opened = counting_connects(one)
        async with contextlib.AsyncExitStack() as stack:
            for session_id in sessions:
                await stack.enter_async_context(lease(one, session_id))
            assert opened[0] == -(-len(sessions) // LEASES_PER_CONNECTION)  # 3, not 10
            for session_id in sessions:
                with pytest.raises(SessionBusyError):
                    async with lease(other, session_id):
                        pass
        async with contextlib.AsyncExitStack() as stack:  # all free at once, for anyone
            for session_id in sessions:
                await stack.enter_async_context(lease(other, session_id))


async def test_the_next_runs_reuse_the_connections(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        opened = counting_connects(service)
        for turn in range(50):
            async with lease(service, f"s{turn % 3}"), lease(service, f"t{turn % 3}"):
                pass
        assert opened[0] == 1
        assert service._shared.connections <= SPARE_CONNECTIONS


async def test_a_cancelled_run_leaves_its_session_free(dsn: str) -> None:
    async with PostgresSessionService(dsn) as one, PostgresSessionService(dsn) as other:
        with trio.CancelScope() as scope:
            async with lease(one, "a"):
                scope.cancel()
                await trio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        async with lease(other, "a"):
            pass


async def hold_at_once(service: PostgresSessionService, runs: int) -> int:
    """Start ``runs`` leases on as many sessions at once, each held until all are; how many
    were held together."""
    all_held = trio.Event()
    held = 0

    async def run(session_id: str) -> None:
        nonlocal held
        async with lease(service, session_id):
            held += 1
            if held == runs:
                all_held.set()
            await all_held.wait()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for index in range(runs):
                nursery.start_soon(run, f"s{index}")
    return held


async def test_the_default_bound_admits_hundreds_of_runs_at_once(dsn: str) -> None:
    """200 runs at once on one service: no refusal, on 50 connections (one per run was 200,
    past the database's default ``max_connections`` of 100)."""
    assert DEFAULT_MAX_LOCK_CONNECTIONS >= 200
    async with PostgresSessionService(dsn) as service:
        assert await hold_at_once(service, 200) == 200


@settings(deadline=None, max_examples=15)
@given(
    plan=st.lists(st.tuples(st.sampled_from("abcdef"), st.booleans(), st.booleans()), max_size=24),
    _r=st.random_module(),
)
def test_two_services_never_hold_one_session_at_once(
    plan: list[tuple[str, bool, bool]], _r: object
) -> None:
    """Runs on two services, some cancelled while they hold their lock: a session is never held
    twice, and every session is free once all ended."""

    async def check() -> None:
        dsn = await trio.to_thread.run_sync(ensure_cluster)
        async with PostgresSessionService(dsn) as one, PostgresSessionService(dsn) as two:
            holders: dict[str, int] = {}

            async def run(service: PostgresSessionService, session_id: str, cancel: bool) -> None:
                with trio.CancelScope() as scope, contextlib.suppress(SessionBusyError):
                    async with lease(service, session_id):
                        holders[session_id] = holders.get(session_id, 0) + 1
                        assert holders[session_id] == 1
                        try:
                            if cancel:
                                scope.cancel()
                            await trio.lowlevel.checkpoint()
                        finally:
                            holders[session_id] -= 1

            async with trio.open_nursery() as nursery:
                for session_id, first, cancel in plan:
                    nursery.start_soon(run, one if first else two, session_id, cancel)
            for session_id in "abcdef":
                async with lease(one, session_id), lease(two, session_id + "-other"):
                    pass
                async with lease(two, session_id):
                    pass

    trio.run(check)


async def test_a_burst_of_runs_opens_one_connection_per_four(dsn: str) -> None:
    """40 runs starting at once: 10 connections (each run opening its own while the first
    connection was still being opened took the database past its connection limit)."""
    async with PostgresSessionService(dsn) as service:
        opened = counting_connects(service)
        assert await hold_at_once(service, 40) == 40
        assert opened[0] == 40 // LEASES_PER_CONNECTION
