"""PostgresSessionService beyond the contract suite (issue 7 items 2 and 3): prompt server-side
cancellation, schema versions, windows read in SQL, revision checks across processes, and
exclusivity across real processes through advisory locks. Crash safety under SIGKILL:
test_postgres_crash.py."""

from __future__ import annotations

import random
import signal
from typing import Any

import psycopg
import pytest
import trio

from tests.pg_cluster import ensure_cluster
from tests.sessions.pg_waits import until_blocked, until_running
from tests.sessions.pg_worker import read_line, spawn
from trio_agents import (
    BaseAgent,
    ConfigurationError,
    Event,
    EventActions,
    InvocationContext,
    Runner,
    SessionBusyError,
    StaleSessionError,
    StoreUnavailableError,
)
from trio_agents.sessions import GetSessionConfig, PostgresSessionService

LEASE: dict[str, Any] = {"app_name": "app", "user_id": "u", "session_id": "s"}


@pytest.fixture
async def dsn() -> str:
    """A fresh, empty schema on the throwaway cluster."""
    return await trio.to_thread.run_sync(ensure_cluster)


def _running(conn: Any) -> int:
    """How many pg_sleep statements are executing on the server."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
        " AND query LIKE 'SELECT pg_sleep%%'"
    ).fetchone()
    return int(row[0])


# -- cancellation -------------------------------------------------------------------------------


async def test_a_cancelled_query_is_cancelled_on_the_server_and_the_connection_works(
    dsn: str,
) -> None:
    async with PostgresSessionService(dsn, max_size=1) as service:
        await service.list_sessions(app_name="a")  # opens the pool and the schema
        with trio.fail_after(10):  # a hang guard: the caller must not wait the 30 s out
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service._run, lambda conn: conn.execute("SELECT pg_sleep(30)"))
                await until_running(dsn, "SELECT pg_sleep(30)")  # cancelled while it runs
                nursery.cancel_scope.cancel()
        assert nursery.cancel_scope.cancelled_caught
        # The pool's one connection serves the next query: the statement is gone from the
        # server, not left running behind an abandoned thread.
        assert await service._run(_running) == 0
        created = await service.create_session(app_name="a", user_id="u")
        assert await service.get_session(app_name="a", user_id="u", session_id=created.id)


async def test_a_caller_queued_for_a_connection_can_be_cancelled(dsn: str) -> None:
    async with PostgresSessionService(dsn, max_size=1) as service:
        await service.list_sessions(app_name="a")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service._run, lambda conn: conn.execute("SELECT pg_sleep(30)"))
            await until_running(dsn, "SELECT pg_sleep(30)")  # the pool's one connection is busy
            with trio.fail_after(10):  # a hang guard: the queued caller must not wait 30 s
                with trio.move_on_after(0.1) as scope:
                    await service.list_sessions(app_name="a")
            assert scope.cancelled_caught
            nursery.cancel_scope.cancel()
        assert await service.list_sessions(app_name="a") == []


async def test_a_cancel_request_never_reaches_another_callers_query(dsn: str) -> None:
    """Cancelled callers race their queries' ends; a caller nobody cancelled never sees
    QueryCanceled (the request is sent only while the connection is still the caller's)."""
    rng = random.Random(7)
    async with PostgresSessionService(dsn, max_size=2) as service:
        await service.list_sessions(app_name="a")

        async def steady() -> None:
            for _ in range(200):
                await service._run(lambda conn: conn.execute("SELECT pg_sleep(0.001)"))

        async def cancelled() -> None:
            for _ in range(200):
                with trio.move_on_after(rng.random() * 0.004):
                    await service._run(lambda conn: conn.execute("SELECT pg_sleep(0.002)"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(steady)
            nursery.start_soon(cancelled)
            nursery.start_soon(cancelled)


async def test_a_cancelled_append_either_returned_or_stored_nothing(dsn: str) -> None:
    async with PostgresSessionService(dsn, max_size=4) as service:
        sessions = [await service.create_session(app_name="a", user_id="u") for _ in range(20)]
        returned: set[str] = set()

        async def append(session: Any) -> None:
            await service.append_event(session, Event(author="a", actions=_delta(session)))
            returned.add(session.id)

        for pause in (0, 0.001, 0.003, 0.01, 0.03):
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(append, session)
                await trio.sleep(pause)
                nursery.cancel_scope.cancel()
        for session in sessions:
            stored = await service.get_session(app_name="a", user_id="u", session_id=session.id)
            assert stored is not None
            assert stored.revision == session.revision == len(stored.events)
            assert stored.state.get("n", 0) == session.state.get("n", 0) == stored.revision
    assert returned  # the mix holds both outcomes


def _delta(session: Any) -> EventActions:
    return EventActions(state_delta={"n": session.revision + 1, "user:last": session.id})


# -- schema, windows, revisions ------------------------------------------------------------------


async def test_a_newer_schema_is_refused(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        await service.list_sessions(app_name="a")
        await service._run(
            lambda conn: conn.execute(
                "UPDATE trio_agents_meta SET value = '99' WHERE key = 'schema_version'"
            )
        )
    async with PostgresSessionService(dsn) as service:
        with pytest.raises(ConfigurationError, match="schema version 99"):
            await service.list_sessions(app_name="a")


async def test_services_starting_together_on_a_fresh_schema_all_work(dsn: str) -> None:
    """The first use creates the tables under an advisory lock: no process trips on another."""
    created: list[str] = []

    async def use() -> None:
        async with PostgresSessionService(dsn) as service:
            created.append((await service.create_session(app_name="a", user_id="u")).id)

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(use)
    async with PostgresSessionService(dsn) as service:
        listed = await service.list_sessions(app_name="a")
    assert sorted(s.id for s in listed) == sorted(created)


async def test_an_unreachable_server_is_an_error_naming_it() -> None:
    async with PostgresSessionService("host=127.0.0.1 port=1 user=postgres") as service:
        with pytest.raises(StoreUnavailableError, match="port 1") as raised:
            await service.list_sessions(app_name="a")
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)


async def test_a_window_parses_only_the_events_asked_for(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 7 speed: reading a session does not parse more events than asked for."""
    async with PostgresSessionService(dsn) as service:
        session = await service.create_session(app_name="a", user_id="u")
        for i in range(30):
            await service.append_event(session, Event(author="a", timestamp=float(i)))
        parsed: list[str] = []
        original = Event.from_json.__func__  # type: ignore[attr-defined]

        def counting(cls: type[Event], text: str) -> Event:
            parsed.append(text)
            return original(cls, text)  # type: ignore[no-any-return]

        monkeypatch.setattr(Event, "from_json", classmethod(counting))
        config = GetSessionConfig(num_recent_events=3, after_timestamp=10.0)
        window = await service.get_session(
            app_name="a", user_id="u", session_id=session.id, config=config
        )
    assert window is not None
    assert [e.timestamp for e in window.events] == [27.0, 28.0, 29.0]
    assert len(parsed) == 3


async def test_two_services_appending_one_revision_one_wins_the_other_is_stale(dsn: str) -> None:
    """The revision check is made by the database, not by a process's memory: of two pools
    (as two processes) appending through snapshots of the same revision, exactly one commits."""
    async with PostgresSessionService(dsn) as one, PostgresSessionService(dsn) as two:
        created = await one.create_session(app_name="a", user_id="u", session_id="s")
        copy = await two.get_session(app_name="a", user_id="u", session_id="s")
        assert copy is not None
        outcomes: list[str] = []

        async def append(service: PostgresSessionService, session: Any, who: str) -> None:
            try:
                await service.append_event(session, Event(author=who))
                outcomes.append(who)
            except StaleSessionError:
                outcomes.append("stale")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, one, created, "one")
            nursery.start_soon(append, two, copy, "two")
        stored = await one.get_session(app_name="a", user_id="u", session_id="s")
    assert stored is not None
    assert sorted(outcomes) in (["one", "stale"], ["stale", "two"])
    assert [e.author for e in stored.events] == [w for w in outcomes if w != "stale"]


async def test_two_tasks_appending_through_one_snapshot_one_wins(dsn: str) -> None:
    """The revision an append checks is the snapshot's when the call was made, not whatever
    the shared object holds by the time a connection is free."""
    async with PostgresSessionService(dsn, max_size=1) as service:
        session = await service.create_session(app_name="a", user_id="u")
        outcomes: list[str] = []

        async def append(who: str) -> None:
            try:
                await service.append_event(session, Event(author=who))
                outcomes.append(who)
            except StaleSessionError:
                outcomes.append("stale")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, "one")
            nursery.start_soon(append, "two")
        stored = await service.get_session(app_name="a", user_id="u", session_id=session.id)
    assert stored is not None
    assert sorted(outcomes) in (["one", "stale"], ["stale", "two"])
    assert session.revision == stored.revision == 1
    assert list(session.events) == list(stored.events)


# -- exclusivity across processes -----------------------------------------------------------------


class _Quiet(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(actions=EventActions(state_delta={"quiet": True})))


async def _run_quiet(service: PostgresSessionService, concurrent_runs: Any) -> None:
    runner = Runner(
        agent=_Quiet(name="quiet"),
        app_name="app",
        session_service=service,
        concurrent_runs=concurrent_runs,
    )
    async with runner.run(user_id="u", session_id="s", new_message="hi") as events:
        async for _ in events:
            pass


async def test_a_run_in_another_process_is_rejected_and_a_sigkilled_holder_releases(
    dsn: str,
) -> None:
    async with PostgresSessionService(dsn) as service:
        await service.create_session(**LEASE)
        with spawn("hold", dsn) as holder:
            assert await read_line(holder) == "held"
            with pytest.raises(SessionBusyError):
                await _run_quiet(service, "reject")
            holder.send_signal(signal.SIGKILL)  # its connection, and so its lock, dies with it
            await trio.to_thread.run_sync(holder.wait)
            with trio.fail_after(10):  # hang guard: the server notices the dead client
                await _run_quiet(service, "queue")
        stored = await service.get_session(**LEASE)
    assert stored is not None
    assert stored.state == {"held": True, "quiet": True}  # never interleaved, nothing lost


async def test_a_sigkilled_holders_lock_is_released_within_a_second(dsn: str) -> None:
    """The advisory lock lives on the holder's connection: when the kernel closes the dead
    process's socket, the server ends its backend and hands the lock to the queued run."""
    async with PostgresSessionService(dsn) as service:
        await service.create_session(**LEASE)
        with spawn("hold", dsn) as holder:
            assert await read_line(holder) == "held"
            async with trio.open_nursery() as nursery:
                started = trio.Event()

                async def queued() -> None:
                    async with service.lease(**LEASE, wait=True):
                        started.set()

                nursery.start_soon(queued)
                await until_blocked(dsn, "SELECT pg_advisory_lock")  # queued on the server
                assert not started.is_set()
                holder.send_signal(signal.SIGKILL)
                killed_at = trio.current_time()
                with trio.fail_after(10):  # a hang guard; the bound is asserted below
                    await started.wait()
                assert trio.current_time() - killed_at < 1.0


async def test_a_queued_run_waits_for_the_other_process_to_finish(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        await service.create_session(**LEASE)
        with spawn("hold", dsn) as holder:
            assert holder.stdin is not None
            assert await read_line(holder) == "held"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_run_quiet, service, "queue")
                await until_blocked(dsn, "SELECT pg_advisory_lock")  # ours waits for the holder
                stored = await service.get_session(**LEASE)
                assert stored is not None
                assert len(stored.events) == 2  # the holder's message and event; ours waits
                holder.stdin.close()  # the holder finishes its run and releases
            assert await read_line(holder) == "done"
        stored = await service.get_session(**LEASE)
    assert stored is not None
    authors = [e.author for e in stored.events]
    assert authors == ["user", "holder", "holder", "user", "quiet"]  # one run after the other


async def test_a_queued_lease_can_be_cancelled_and_leaves_no_lock_behind(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        await service.create_session(**LEASE)
        with spawn("hold", dsn) as holder:
            assert holder.stdin is not None
            assert await read_line(holder) == "held"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_lease_never_granted, service)
                await until_blocked(dsn, "SELECT pg_advisory_lock")  # queued on the server
                nursery.cancel_scope.cancel()
            assert nursery.cancel_scope.cancelled_caught
            holder.stdin.close()
            assert await read_line(holder) == "done"
        async with service.lease(**LEASE):  # free again: nothing kept the lock queued
            pass


async def _lease_never_granted(service: PostgresSessionService) -> None:
    async with service.lease(**LEASE, wait=True):
        pytest.fail("the lease was taken while another process held it")


async def test_the_same_session_key_in_two_schemas_is_two_sessions(dsn: str) -> None:
    """Advisory locks are per database; the lock id includes the schema, so two deployments
    sharing a database in different schemas never block each other."""
    other = await trio.to_thread.run_sync(ensure_cluster)
    async with (
        PostgresSessionService(dsn) as one,
        PostgresSessionService(other) as two,
        one.lease(**LEASE),
        two.lease(**LEASE),
    ):
        with pytest.raises(SessionBusyError):
            async with PostgresSessionService(dsn) as third, third.lease(**LEASE):
                pass
