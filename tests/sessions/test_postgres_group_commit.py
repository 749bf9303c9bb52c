"""Group commit on PostgreSQL: appends made while a transaction of appends is in flight share the
next one; each caller hears back only once the COMMIT holding its event is done, a refused or
failing append fails alone, a failed COMMIT fails the whole batch and stores nothing of it.

To put appends in one batch for certain, a test holds the row lock of a "blocker" session on a
connection of its own: the blocker's append starts a batch that waits for that lock (the server
says when), the appends made meanwhile queue behind it, and releasing the lock lets the next batch
take them all.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from tests.pg_cluster import ensure_cluster
from tests.sessions.pg_waits import until_blocked, until_gone
from trio_agents import (
    ConfigurationError,
    Content,
    Event,
    EventActions,
    SessionNotFoundError,
    StaleSessionError,
    StoreUnavailableError,
)
from trio_agents.sessions import PostgresSessionService, Session

APP = "app"
LOCK_QUERY = "SELECT s.app_name"  # how a batch's first statement (its row locks) starts


@pytest.fixture
async def dsn() -> str:
    return await trio.to_thread.run_sync(ensure_cluster)


def text_event(text: str, n: int) -> Event:
    return Event(
        author="a",
        invocation_id=f"e-{text}",
        content=Content.from_text(text, role="model"),
        actions=EventActions(state_delta={"n": n, "user:last": text, "app:seen": True}),
    )


async def create(service: PostgresSessionService, user_id: str = "u") -> Session:
    return await service.create_session(app_name=APP, user_id=user_id)


async def stored(dsn: str, *sessions: Session) -> list[Session]:
    """The sessions as a fresh service (no cached history) reads them."""
    found = []
    async with PostgresSessionService(dsn, cached_sessions=0) as fresh:
        for session in sessions:
            back = await fresh.get_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
            assert back is not None
            found.append(back)
    return found


async def sql(dsn: str, query: str) -> list[Any]:
    def run() -> list[Any]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cursor = conn.execute(query)
            return cursor.fetchall() if cursor.description else []

    return await trio.to_thread.run_sync(run)


async def writing_transactions(dsn: str) -> int:
    """How many distinct transactions wrote the stored events (as the database counts them)."""
    rows = await sql(dsn, "SELECT count(DISTINCT xmin::text) FROM trio_agents_events")
    return int(rows[0][0])


@contextlib.asynccontextmanager
async def held_row(dsn: str, session: Session) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Hold ``session``'s row lock on a connection of our own; yields the function releasing it
    (else it is released on the way out)."""
    conn = await trio.to_thread.run_sync(functools.partial(psycopg.connect, dsn))
    await trio.to_thread.run_sync(
        lambda: conn.execute(
            "SELECT 1 FROM trio_agents_sessions WHERE id = %s FOR UPDATE", (session.id,)
        )
    )

    async def release() -> None:
        await trio.to_thread.run_sync(conn.commit)

    try:
        yield release
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(conn.close)


class Outcomes:
    """What each append call did, by label."""

    def __init__(self) -> None:
        self.got: dict[str, object] = {}

    async def append(self, service: PostgresSessionService, label: str, session: Any) -> None:
        try:
            await service.append_event(session, text_event(label, session.revision + 1))
            self.got[label] = session.revision
        except (StaleSessionError, SessionNotFoundError, StoreUnavailableError) as exc:
            self.got[label] = exc
        except psycopg.Error as exc:
            self.got[label] = exc


async def behind_a_blocker(
    dsn: str,
    service: PostgresSessionService,
    appends: Callable[[trio.Nursery], None],
    release_first: Callable[[], Awaitable[None]] | None = None,
) -> Outcomes:
    """Append to a blocker session whose batch waits for its row lock, start ``appends`` (they
    queue behind it), then release the lock; every append ends before this returns."""
    blocker = await create(service, "blocker")
    outcomes = Outcomes()
    async with held_row(dsn, blocker) as release, trio.open_nursery() as nursery:
        nursery.start_soon(outcomes.append, service, "blocker", blocker)
        await until_blocked(dsn, LOCK_QUERY)
        appends(nursery)
        await trio.testing.wait_all_tasks_blocked()
        if release_first is not None:
            await release_first()
        await release()
    assert outcomes.got.pop("blocker") == 1
    return outcomes


# -- batches -------------------------------------------------------------------------------------


async def test_concurrent_appends_share_transactions_and_read_back_in_order(dsn: str) -> None:
    async with PostgresSessionService(dsn) as service:
        sessions = [await create(service, f"u{i}") for i in range(30)]
        before = service._appends.transactions

        async def four(session: Session) -> None:
            for k in range(4):
                await service.append_event(session, text_event(f"{session.user_id}-{k}", k))

        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(four, session)
        transactions = service._appends.transactions - before
    assert 1 <= transactions < 120  # several appends per transaction
    assert await writing_transactions(dsn) == transactions
    for session, back in zip(sessions, await stored(dsn, *sessions), strict=True):
        assert [e.text for e in back.events] == [f"{session.user_id}-{k}" for k in range(4)]
        assert list(back.events) == list(session.events)
        assert back.state == {"n": 3, "user:last": f"{session.user_id}-3", "app:seen": True}
        assert back.revision == session.revision == 4


async def test_appends_queued_behind_a_batch_go_together_and_refusals_fail_alone(
    dsn: str,
) -> None:
    async with PostgresSessionService(dsn) as service:
        good = [await create(service, f"u{i}") for i in range(6)]
        stale_one = await create(service)
        stale = await service.get_session(app_name=APP, user_id="u", session_id=stale_one.id)
        await service.append_event(stale_one, text_event("first", 1))  # `stale` is behind now
        gone = await create(service)
        await service.delete_session(app_name=APP, user_id="u", session_id=gone.id)
        twin = await create(service, "twin")  # two appends through one snapshot, one batch
        before = service._appends.transactions

        def appends(nursery: trio.Nursery) -> None:
            for i, session in enumerate(good):
                nursery.start_soon(outcomes_of.append, service, f"good{i}", session)
            nursery.start_soon(outcomes_of.append, service, "stale", stale)
            nursery.start_soon(outcomes_of.append, service, "gone", gone)
            nursery.start_soon(outcomes_of.append, service, "twin-a", twin)
            nursery.start_soon(outcomes_of.append, service, "twin-b", twin)

        outcomes_of = Outcomes()
        got = (await behind_a_blocker(dsn, service, appends)).got | outcomes_of.got
        assert service._appends.transactions - before == 2  # the blocker's, then all the rest
    assert [got[f"good{i}"] for i in range(6)] == [1] * 6
    assert isinstance(got["stale"], StaleSessionError)
    assert (got["stale"].expected, got["stale"].actual) == (0, 1)
    assert isinstance(got["gone"], SessionNotFoundError)
    twins = sorted(type(got[twin]).__name__ for twin in ("twin-a", "twin-b"))
    assert twins == ["StaleSessionError", "int"]
    *goods, first, twins_back = await stored(dsn, *good, stale_one, twin)
    assert [[e.text for e in back.events] for back in goods] == [[f"good{i}"] for i in range(6)]
    assert [e.text for e in first.events] == ["first"]
    winner = "twin-a" if got["twin-a"] == 1 else "twin-b"
    assert [e.text for e in twins_back.events] == [winner]
    assert twins_back.state["user:last"] == winner


async def one_poisoned_in_a_batch(
    dsn: str, service: PostgresSessionService, sessions: list[Session]
) -> Outcomes:
    """An append to each of ``sessions`` in one batch, the third one's event holding "poison"."""
    outcomes_of = Outcomes()

    def appends(nursery: trio.Nursery) -> None:
        for i, session in enumerate(sessions):
            label = "poison" if i == 2 else f"fine{i}"
            nursery.start_soon(outcomes_of.append, service, label, session)

    await behind_a_blocker(dsn, service, appends)
    return outcomes_of


async def test_a_statement_failing_a_batch_fails_only_its_append(dsn: str) -> None:
    """The database refuses one event of a batch (a constraint added for the test): the batch is
    rolled back and each of its appends tried alone, so only that one fails."""
    async with PostgresSessionService(dsn) as service:
        sessions = [await create(service, f"u{i}") for i in range(5)]
        await sql(
            dsn,
            "ALTER TABLE trio_agents_events ADD CONSTRAINT no_poison"
            " CHECK (body NOT LIKE '%poison%')",
        )
        before = service._appends.transactions
        outcomes_of = await one_poisoned_in_a_batch(dsn, service, sessions)
        assert service._appends.transactions - before == 1 + 1 + 5  # blocker, batch, each alone
    assert isinstance(outcomes_of.got.pop("poison"), psycopg.errors.CheckViolation)
    assert outcomes_of.got == {f"fine{i}": 1 for i in (0, 1, 3, 4)}
    for i, (session, back) in enumerate(zip(sessions, await stored(dsn, *sessions), strict=True)):
        assert [e.text for e in back.events] == ([] if i == 2 else [f"fine{i}"])
        assert back.revision == (0 if i == 2 else 1) == session.revision


async def test_a_failed_commit_fails_every_append_of_its_batch_and_stores_none(dsn: str) -> None:
    """A check deferred to COMMIT (a constraint trigger added for the test) fails the batch's
    COMMIT: every append of it fails with StoreUnavailableError, nothing of it is stored."""
    async with PostgresSessionService(dsn) as service:
        sessions = [await create(service, f"u{i}") for i in range(5)]
        await sql(
            dsn,
            "CREATE FUNCTION poisoned() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.body LIKE '%poison%' THEN RAISE EXCEPTION 'poisoned event'; END IF;"
            " RETURN NULL; END $$;"
            " CREATE CONSTRAINT TRIGGER poisoned AFTER INSERT ON trio_agents_events"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION poisoned()",
        )
        outcomes_of = await one_poisoned_in_a_batch(dsn, service, sessions)
        # The connection works on: the next append commits.
        await service.append_event(sessions[0], text_event("later", 1))
    assert len(outcomes_of.got) == 5
    for error in outcomes_of.got.values():
        assert isinstance(error, StoreUnavailableError)
        assert "failed to commit" in str(error)
        assert "poisoned event" in str(error)
        assert "with 4 other appends" in str(error)
        assert "nothing of the transaction was stored" in str(error)
    for i, (session, back) in enumerate(zip(sessions, await stored(dsn, *sessions), strict=True)):
        assert [e.text for e in back.events] == (["later"] if i == 0 else [])
        assert back.revision == (1 if i == 0 else 0) == session.revision


async def test_a_batch_takes_at_most_max_batch_appends(dsn: str) -> None:
    async with PostgresSessionService(dsn, max_batch=3) as service:
        sessions = [await create(service, f"u{i}") for i in range(7)]
        outcomes_of = Outcomes()

        def appends(nursery: trio.Nursery) -> None:
            for i, session in enumerate(sessions):
                nursery.start_soon(outcomes_of.append, service, f"e{i}", session)

        before = service._appends.transactions
        await behind_a_blocker(dsn, service, appends)
        assert service._appends.transactions - before == 1 + 3  # 3 + 3 + 1 behind the blocker
    assert outcomes_of.got == {f"e{i}": 1 for i in range(7)}
    assert await writing_transactions(dsn) == 1 + 3  # as the database counts them


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_batch"):
        PostgresSessionService("postgresql://x", max_batch=0)


# -- cancellation --------------------------------------------------------------------------------


async def test_a_cancelled_caller_in_a_running_batch_waits_for_it_and_sees_it_committed(
    dsn: str,
) -> None:
    async with PostgresSessionService(dsn) as service:
        session = await create(service)
        steps: list[str] = []

        async def append(scope: trio.CancelScope) -> None:
            with scope:
                await service.append_event(session, text_event("kept", 1))
                steps.append("returned")
                await trio.lowlevel.checkpoint()
                steps.append("not reached")

        scope = trio.CancelScope()
        with trio.fail_after(60):  # a hang guard
            async with held_row(dsn, session) as release, trio.open_nursery() as nursery:
                nursery.start_soon(append, scope)
                await until_blocked(dsn, LOCK_QUERY)
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                assert steps == []  # still waiting for its batch
                await release()
        assert steps == ["returned"]
        assert scope.cancelled_caught
        assert session.revision == 1
    [back] = await stored(dsn, session)
    assert [e.text for e in back.events] == ["kept"]


async def test_a_cancelled_caller_still_queued_leaves_at_once_and_stores_nothing(
    dsn: str,
) -> None:
    async with PostgresSessionService(dsn) as service:
        queued = await create(service, "queued")
        left = trio.Event()
        scope = trio.CancelScope()

        async def append() -> None:
            try:
                with scope:
                    await service.append_event(queued, text_event("dropped", 1))
            finally:
                left.set()

        async def cancel_the_queued_one() -> None:
            scope.cancel()
            await left.wait()  # it left while the batch before it still waits for its lock

        def appends(nursery: trio.Nursery) -> None:
            nursery.start_soon(append)

        before = service._appends.transactions
        await behind_a_blocker(dsn, service, appends, release_first=cancel_the_queued_one)
        assert service._appends.transactions - before == 1  # the blocker's batch, and no other
        assert scope.cancelled_caught
        assert queued.revision == 0
    [back] = await stored(dsn, queued)
    assert (list(back.events), back.revision) == ([], 0)


# -- the invariant -------------------------------------------------------------------------------

Plan = list[tuple[int, int, bool, int]]  # (session, appends, on the second service, cancel after)


@settings(deadline=None, max_examples=25)
@given(
    plan=st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 4), st.booleans(), st.integers(-1, 6)),
        min_size=1,
        max_size=10,
    ),
    max_batch=st.sampled_from([1, 2, 256]),
    _r=st.random_module(),
)
def test_what_each_append_returned_is_what_each_session_reads_back(
    plan: Plan, max_batch: int, _r: object
) -> None:
    """Tasks append to four sessions through two services (two processes, as the database sees
    them), reloading on a stale snapshot, some cancelled after a few checkpoints: each session
    reads back exactly the events whose appends returned, in the revisions they returned, with
    the state they folded; an append that raised Cancelled stored nothing."""

    async def check() -> None:
        dsn = await trio.to_thread.run_sync(ensure_cluster)
        async with (
            PostgresSessionService(dsn, max_batch=max_batch) as one,
            PostgresSessionService(dsn, max_batch=max_batch) as two,
        ):
            sessions = [await create(one, f"u{i % 2}") for i in range(4)]
            returned: dict[str, list[tuple[int, str]]] = {s.id: [] for s in sessions}
            await _run_plan(plan, (one, two), sessions, returned)
        for session, back in zip(sessions, await stored(dsn, *sessions), strict=True):
            committed = sorted(returned[session.id])
            assert [r for r, _ in committed] == list(range(1, len(committed) + 1))
            assert [e.text for e in back.events] == [text for _, text in committed]
            assert back.revision == len(committed)
            assert back.state.get("n", 0) == len(committed)

    trio.run(check)


async def _run_plan(
    plan: Plan,
    services: tuple[PostgresSessionService, PostgresSessionService],
    sessions: list[Session],
    returned: dict[str, list[tuple[int, str]]],
) -> None:
    async def task(index: int, which: int, count: int, second: bool, cancel_after: int) -> None:
        service, session = services[second], sessions[which]
        snapshot = await reload(service, session)
        with trio.CancelScope() as scope:
            if cancel_after >= 0:
                nursery.start_soon(_cancel_after, scope, cancel_after)
            for k in range(count):
                label = f"t{index}-{k}"
                while True:  # a stale snapshot is reloaded and the append made again
                    try:
                        await service.append_event(
                            snapshot, text_event(label, snapshot.revision + 1)
                        )
                    except StaleSessionError:
                        snapshot = await reload(service, session)
                        continue
                    returned[session.id].append((snapshot.revision, label))
                    break

    async with trio.open_nursery() as nursery:
        for index, (which, count, second, cancel_after) in enumerate(plan):
            nursery.start_soon(task, index, which, count, second, cancel_after)


async def reload(service: PostgresSessionService, session: Session) -> Session:
    found = await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )
    assert found is not None
    return found


async def _cancel_after(scope: trio.CancelScope, checkpoints: int) -> None:
    for _ in range(checkpoints):
        await trio.lowlevel.checkpoint()
    scope.cancel()


async def test_a_cancelled_close_still_closes_every_connection_of_the_service(dsn: str) -> None:
    """The pool, the appends' connection and the shared lock connections all close, even when
    the caller of ``aclose`` is cancelled before it starts."""
    name = "trio_agents_close_probe"
    service = PostgresSessionService(f"{dsn} application_name={name}")
    session = await create(service)
    async with service.lease(app_name=APP, user_id="u", session_id=session.id):
        await service.append_event(session, text_event("one", 1))

    def named() -> int:
        with psycopg.connect(dsn, autocommit=True) as conn:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            return int(conn.execute(query, (name,)).fetchone()[0])  # type: ignore[index]

    assert await trio.to_thread.run_sync(named) >= 2  # the pool's and the appends' at least
    with trio.CancelScope() as scope:
        scope.cancel()
        await service.aclose()
    await until_gone(dsn, name)  # the server sees a closed connection go a moment later
