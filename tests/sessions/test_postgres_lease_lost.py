"""A shared lock connection that breaks under the runs holding their locks on it (an operator's
``pg_terminate_backend``, a failover): the service notices at once, each run takes its lock
again on another connection, and a run whose lock another holder took meanwhile is cancelled
with :class:`~trio_agents.LeaseLostError` instead of going on without its lease.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import psycopg
import pytest
import trio

from tests.pg_cluster import ensure_cluster
from tests.server.helpers import Gated
from trio_agents import LeaseLostError, Runner, SessionBusyError
from trio_agents.sessions import PostgresSessionService
from trio_agents.sessions._pg_locks import LockConnection, SharedLockConnections
from trio_agents.sessions._postgres import _lock_id

KEY: dict[str, Any] = {"app_name": "app", "user_id": "u"}
DEADLINE = 30.0
"""Seconds a test may take at most (a bound far above what noticing a broken socket takes)."""


@pytest.fixture
async def dsn() -> str:
    name = f"lost_{uuid.uuid4().hex[:8]}"
    return f"{await trio.to_thread.run_sync(ensure_cluster)} application_name={name}"


def terminate(dsn: str, pid: int) -> None:
    """Terminate the server process ``pid`` and wait until it has exited (blocking)."""
    name = dsn.rsplit("application_name=", 1)[1]
    with psycopg.connect(dsn.replace(name, "admin"), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()[0]:
            pass


def terminate_and_take(dsn: str, pid: int, lock: int) -> psycopg.Connection[Any]:
    """Terminate ``pid`` and take ``lock`` on a connection of the test's (blocking: called on
    the Trio thread, so the service cannot take its lock again first)."""
    terminate(dsn, pid)
    thief = psycopg.connect(dsn, autocommit=True)
    thief.execute("SELECT pg_advisory_lock(%s)", (lock,))
    return thief


async def holder(service: PostgresSessionService, session_id: str) -> int | None:
    return await service.lease_holder(**KEY, session_id=session_id)


async def until_held_again(service: PostgresSessionService, session_id: str, pid: int) -> int:
    """Poll (bounded) until ``session_id``'s lock is held by another server process than
    ``pid``: the service has to notice the terminated one, which the server ends on its own."""
    with trio.fail_after(DEADLINE):
        while True:
            now = await holder(service, session_id)
            if now is not None and now != pid:
                return now
            await trio.sleep(0.01)  # the server is still ending the old connection: poll it


async def test_runs_whose_lock_connection_is_terminated_take_their_locks_again(dsn: str) -> None:
    ids = ["s1", "s2", "s3"]
    async with PostgresSessionService(dsn) as service, PostgresSessionService(dsn) as other:
        async with contextlib.AsyncExitStack() as leases:
            for session_id in ids:  # three runs, their locks on one shared connection
                await leases.enter_async_context(service.lease(**KEY, session_id=session_id))
            pids = {await holder(service, session_id) for session_id in ids}
            assert len(pids) == 1 and service._shared.connections == 1
            (pid,) = pids
            assert pid is not None
            await trio.to_thread.run_sync(terminate, dsn, pid)
            for session_id in ids:
                await until_held_again(service, session_id, pid)
                with pytest.raises(SessionBusyError):
                    async with other.lease(**KEY, session_id=session_id):
                        pass  # pragma: no cover
        for session_id in ids:  # the runs ended: their locks were let go on the new connection
            assert not await other.lease_held(**KEY, session_id=session_id)
        assert service._shared.connections == 1  # the broken one was closed


async def test_a_queued_run_whose_own_lock_connection_is_terminated_takes_its_lock_again(
    dsn: str,
) -> None:
    """A run that queued for its lock holds it on a connection of its own: watched too."""
    async with PostgresSessionService(dsn) as service, PostgresSessionService(dsn) as other:
        async with service.lease(**KEY, session_id="s", wait=True):
            pid = await holder(service, "s")
            assert pid is not None
            await trio.to_thread.run_sync(terminate, dsn, pid)
            await until_held_again(service, "s", pid)
            with pytest.raises(SessionBusyError):
                async with other.lease(**KEY, session_id="s"):
                    pass  # pragma: no cover
        assert not await other.lease_held(**KEY, session_id="s")
        assert service._shared.connections == 1  # the lock moved to a shared one, kept spare


@pytest.mark.parametrize("wait", [False, True], ids=["shared", "queued"])
async def test_a_run_whose_lock_was_taken_meanwhile_is_cancelled_with_lease_lost(
    dsn: str, wait: bool
) -> None:
    async with PostgresSessionService(dsn) as service:
        lock = _lock_id(await service._ensure_open(), ("app", "u", "s"))
        with (
            trio.fail_after(DEADLINE),
            contextlib.ExitStack() as thieves,
            pytest.raises(LeaseLostError, match=r"Session s: .*another holder") as caught,
        ):
            async with service.lease(**KEY, session_id="s", wait=wait):
                pid = await holder(service, "s")
                assert pid is not None
                thieves.enter_context(terminate_and_take(dsn, pid, lock))
                await trio.sleep_forever()
        assert caught.value.session_id == "s"
        async with service.lease(**KEY, session_id="other"):  # the service goes on
            assert await service.lease_held(**KEY, session_id="other")


async def test_a_runner_run_that_loses_its_lease_ends_with_lease_lost(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        entered = trio.Event()
        runner = Runner(
            agent=Gated(name="gated", entered=entered), app_name="app", session_service=service
        )
        await service.create_session(**KEY, session_id="s")
        lock = _lock_id(await service._ensure_open(), ("app", "u", "s"))
        with (
            trio.fail_after(DEADLINE),
            contextlib.ExitStack() as thieves,
            pytest.raises(LeaseLostError, match="Session s"),
        ):
            async with runner.run(user_id="u", session_id="s", new_message="hi") as events:
                await events.receive()  # the agent's call: it now waits forever
                await entered.wait()
                pid = await holder(service, "s")
                assert pid is not None
                thieves.enter_context(terminate_and_take(dsn, pid, lock))
                async for _ in events:
                    pass


async def test_a_service_watched_only_for_a_block_watches_connections_opened_before(
    dsn: str,
) -> None:
    """A server watches its service's lock connections for its lifespan (``watching()``), the
    service itself not entered: connections opened before the block are watched too."""
    service = PostgresSessionService(dsn)
    try:
        async with service.lease(**KEY, session_id="early"):
            pass  # a shared lock connection stays open, idle, unwatched
        async with service.watching(), service.lease(**KEY, session_id="s"):
            pid = await holder(service, "s")
            assert pid is not None
            await trio.to_thread.run_sync(terminate, dsn, pid)
            await until_held_again(service, "s", pid)
    finally:
        await service.aclose()


async def test_the_error_leaving_a_service_block_is_the_blocks_own(dsn: str) -> None:
    with pytest.raises(KeyError, match="mine"):
        async with PostgresSessionService(dsn) as service, service.lease(**KEY, session_id="s"):
            raise KeyError("mine")


class _LostConnection:
    """A driver connection whose socket is gone: ``fileno()`` raises, as psycopg's does."""

    closed = False
    broken = False

    def fileno(self) -> int:
        raise psycopg.OperationalError("the connection is lost")

    def close(self) -> None:
        self.closed = True


async def test_a_watched_connection_whose_driver_fails_is_lost_not_a_crash() -> None:
    """The watches never fail: a connection the driver gives up on counts as lost, and its runs
    are handed on to take their locks again (here: the ``on_lost`` the service gives)."""
    handed: list[LockConnection] = []

    async def on_lost(shared: LockConnection) -> None:
        await trio.lowlevel.checkpoint()
        handed.append(shared)

    shared = LockConnection(_LostConnection())
    connections = SharedLockConnections(lambda: None, on_lost)
    connections._open.append(shared)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            connections.watch_all(nursery)
    assert handed == [shared]
    assert shared.broken
