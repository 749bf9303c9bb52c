"""The persistent services' history cache (``sessions/_event_cache.py``): reading a session the
service has read before parses only the events committed since, and returns exactly what an
uncached read returns, whoever wrote to the store meanwhile (another service, another process),
whatever happened to the session (deleted, created again), whatever window is asked for.

Each test runs on SQLite (a real file) and on PostgreSQL (a fresh schema on the test cluster),
except where it names one backend.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
from hypothesis import given, settings, strategies as st

from tests.pg_cluster import ensure_cluster
from tests.sessions.pg_waits import until_blocked
from trio_agents import (
    BaseAgent,
    ConfigurationError,
    Content,
    Event,
    EventActions,
    InvocationContext,
    Runner,
    SessionNotFoundError,
    StaleSessionError,
)
from trio_agents.sessions import (
    GetSessionConfig,
    PostgresSessionService,
    Session,
    SqliteSessionService,
)

ROOT = Path(__file__).resolve().parents[2]
WHERE: dict[str, str] = {"app_name": "app", "user_id": "u", "session_id": "s"}

Service = SqliteSessionService | PostgresSessionService
Opener = Callable[..., Service]
"""Opens one more service on the test's store: ``open_service(cached_sessions=...)``."""


def _opener(backend: str, place: Path) -> Opener:
    if backend == "sqlite":
        path = place / "sessions.db"
        return lambda **kwargs: SqliteSessionService(path, **kwargs)
    dsn = ensure_cluster()
    return lambda **kwargs: PostgresSessionService(dsn, **kwargs)


@pytest.fixture(params=["sqlite", "postgres"])
async def open_service(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Services sharing one store: a SQLite file or a PostgreSQL schema."""
    return await trio.to_thread.run_sync(_opener, request.param, tmp_path)


class Parses:
    """Counts ``Event.from_json`` calls (on any thread): how many stored events a read parsed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = Event.from_json.__func__  # type: ignore[attr-defined]

        def counting(cls: type[Event], text: str) -> Event:
            self.count += 1
            return original(cls, text)  # type: ignore[no-any-return]

        monkeypatch.setattr(Event, "from_json", classmethod(counting))

    def take(self) -> int:
        """The count so far, starting again from zero."""
        count, self.count = self.count, 0
        return count


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Parses:
    return Parses(monkeypatch)


def event(i: int, timestamp: float | None = None, **delta: Any) -> Event:
    return Event(
        author="agent",
        timestamp=timestamp,
        content=Content.from_text(f"event {i}", role="model"),
        actions=EventActions(state_delta=delta or {"i": i}),
    )


async def get(service: Service, config: GetSessionConfig | None = None) -> Session | None:
    return await service.get_session(**WHERE, config=config)


async def found(service: Service, config: GetSessionConfig | None = None) -> Session:
    session = await get(service, config)
    assert session is not None
    return session


async def uncached(open_service: Opener, config: GetSessionConfig | None = None) -> Session | None:
    """What a brand-new service reads: the reference every cached read must equal."""
    async with open_service() as fresh:
        return await get(fresh, config)


async def fill(service: Service, session: Session, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        await service.append_event(session, event(i))


# -- reading on ------------------------------------------------------------------------------


async def test_a_second_read_parses_only_the_events_committed_since(
    open_service: Opener, parses: Parses
) -> None:
    async with open_service() as service:
        session = await service.create_session(**_create())
        await fill(service, session, 20)
        parses.take()
        first = await found(service)
        assert parses.take() == 20
        await fill(service, first, 3, start=20)  # through the snapshot the cache handed out
        again = await found(service)
        assert parses.take() == 3
        assert again == await uncached(open_service)
        assert [e.actions.state_delta["i"] for e in again.events] == list(range(23))
        parses.take()
        assert await found(service) == again
        assert parses.take() == 0


async def test_events_another_service_appends_are_read_after_the_cached_ones(
    open_service: Opener, parses: Parses
) -> None:
    """Another connection (as another process) writing to the store: the cached service reads
    its events, and only those."""
    async with open_service() as one, open_service() as two:
        session = await one.create_session(**_create(), state={"k": 0})
        await fill(one, session, 5)
        await found(one)
        theirs = await found(two)
        await fill(two, theirs, 4, start=5)
        await two.append_event(theirs, event(9, **{"app:a": 1, "user:b": 2, "k": 3}))
        parses.take()
        mine = await found(one)
        assert parses.take() == 5
        assert mine == await uncached(open_service)
        assert mine.revision == len(mine.events) == 10
        assert mine.state == {"k": 3, "app:a": 1, "user:b": 2, "i": 8}


async def test_events_another_process_appends_are_read(tmp_path: Path) -> None:
    """A real second process (``sqlite_worker.py try``) runs an invocation on the file."""
    path = tmp_path / "sessions.db"
    async with SqliteSessionService(path) as service:
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        await fill(service, session, 3)
        before = await found(service)
        command = [sys.executable, "-m", "tests.sessions.sqlite_worker", "try", str(path), "s"]
        done = await trio.run_process(command, cwd=ROOT, capture_stdout=True)
        assert done.stdout.decode().split() == ["ran"]
        after = await found(service)
        async with SqliteSessionService(path) as fresh:
            assert after == await get(fresh)
    assert len(before.events) == 3  # the snapshot read before is as it was
    assert [e.author for e in after.events[3:]] == ["user", "once"]


async def test_app_and_user_state_changed_through_another_session_are_read_fresh(
    open_service: Opener,
) -> None:
    async with open_service() as service:
        await service.create_session(**_create())
        other = await service.create_session(app_name="app", user_id="u", session_id="t")
        assert (await found(service)).state == {}
        await service.append_event(other, event(0, **{"app:x": 1, "user:y": 2}))
        assert (await found(service)).state == {"app:x": 1, "user:y": 2}


# -- incarnations ----------------------------------------------------------------------------


@pytest.mark.parametrize("deleter", ["same", "other"])
@pytest.mark.parametrize("refill", [0, 2, 3, 5])
async def test_a_session_deleted_and_created_again_does_not_bring_back_old_events(
    open_service: Opener, deleter: str, refill: int
) -> None:
    """Whichever service deletes it, and however many events the new session gets (3: as many
    as the old one had, so the revision alone cannot tell them apart)."""
    async with open_service() as one, open_service() as two:
        session = await one.create_session(**_create())
        await fill(one, session, 3)
        old = await found(one)
        writer = one if deleter == "same" else two
        await writer.delete_session(**WHERE)
        assert await get(one) is None
        again = await writer.create_session(**_create(), state={"new": True})
        await fill(writer, again, refill, start=100)
        read = await found(one)
        assert read == await uncached(open_service)
        assert [e.actions.state_delta["i"] for e in read.events] == list(range(100, 100 + refill))
        assert not {e.id for e in old.events} & {e.id for e in read.events}


async def _read_then_recreated(one: Service, two: Service) -> Session:
    """``one``'s snapshot of a session of 2 events, which ``two`` then deletes and creates again
    with 2 others."""
    session = await one.create_session(**_create())
    await fill(one, session, 2)
    mine = await found(one)
    await two.delete_session(**WHERE)
    theirs = await two.create_session(**_create())
    await fill(two, theirs, 2, start=50)
    return mine


async def test_a_session_deleted_and_created_again_unseen_in_between(
    open_service: Opener,
) -> None:
    """The cached service never sees the session missing: another deletes and re-creates it
    between two of its reads. The old snapshot's append finds the same revision, and is refused
    all the same: the session it was read from is gone."""
    async with open_service() as one, open_service() as two:
        mine = await _read_then_recreated(one, two)
        with pytest.raises(StaleSessionError, match="deleted and created again") as caught:
            await one.append_event(mine, event(7))
        assert (caught.value.recreated, caught.value.expected, caught.value.actual) == (True, 2, 2)
        read = await found(one)
        assert read == await uncached(open_service)
        assert [e.actions.state_delta["i"] for e in read.events] == [50, 51]


async def test_a_snapshot_built_by_hand_appends_to_a_cached_view(open_service: Opener) -> None:
    """A snapshot built by hand carries no incarnation: only its revision is checked. Built on
    a cached view of the old incarnation, its append does not make the cache serve that
    incarnation's events."""
    async with open_service() as one, open_service() as two:
        mine = await _read_then_recreated(one, two)
        by_hand = Session(id="s", app_name="app", user_id="u", events=mine.events, revision=2)
        await one.append_event(by_hand, event(7))  # revision 2 again: the store takes it
        read = await found(one)
        assert read == await uncached(open_service)
        assert [e.actions.state_delta["i"] for e in read.events] == [50, 51, 7]


# -- windows ----------------------------------------------------------------------------------

CONFIGS = [
    None,
    GetSessionConfig(),
    GetSessionConfig(num_recent_events=0),
    GetSessionConfig(num_recent_events=1),
    GetSessionConfig(num_recent_events=4),
    GetSessionConfig(num_recent_events=100),
    GetSessionConfig(after_timestamp=3.0),
    GetSessionConfig(after_timestamp=0.0),
    GetSessionConfig(after_timestamp=99.0),
    GetSessionConfig(num_recent_events=2, after_timestamp=2.0),
    GetSessionConfig(num_recent_events=0, after_timestamp=2.0),
]
TIMESTAMPS = [5.0, 1.0, 3.0, 3.0, 8.0, 2.0, 4.0]  # not in commit order: windows follow commits


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
async def test_windows_are_those_of_an_uncached_read(
    open_service: Opener, config: GetSessionConfig | None
) -> None:
    async with open_service() as service, open_service(cached_sessions=0) as plain:
        session = await service.create_session(**_create())
        for i, stamp in enumerate(TIMESTAMPS[:4]):
            await service.append_event(session, event(i, stamp))
        windowed_first = await found(service, config)  # not cached yet: cut in SQL
        assert windowed_first == await found(plain, config)
        cached = await found(service)
        for i, stamp in enumerate(TIMESTAMPS[4:], start=4):
            await service.append_event(cached, event(i, stamp))
        window = await found(service, config)  # cached: cut in memory
        assert window == await found(plain, config) == await uncached(open_service, config)
        assert await found(service) == await found(plain)


# -- snapshots handed out ---------------------------------------------------------------------


async def test_a_snapshot_never_changes_under_its_holder(open_service: Opener) -> None:
    """Snapshots share the cached list; appending through one, or reading on, changes none of
    them, and an event JSON does not carry exactly (a tuple comes back a list) is read back as
    stored, not as appended."""
    async with open_service() as one, open_service() as two:
        session = await one.create_session(**_create())
        await fill(one, session, 2)
        first, second = await found(one), await found(one)
        appended = await one.append_event(first, event(2, pair=(1, "x")))
        assert appended.actions.state_delta == {"pair": (1, "x")}
        theirs = await found(two)
        await fill(two, theirs, 2, start=3)
        read = await found(one)
        assert read == await uncached(open_service)
        assert read.events[2].actions.state_delta == {"pair": [1, "x"]}
        assert read.events[2].id == appended.id
        assert [len(s.events) for s in (first, second, read)] == [3, 2, 5]
        assert first.events[-1] is appended
        await one.append_event(read, event(5))
        assert await found(one) == await uncached(open_service)


async def test_an_event_appended_only_to_a_snapshot_is_not_served(open_service: Opener) -> None:
    """A caller may extend its own snapshot without committing: the cache serves the store."""
    async with open_service() as service:
        session = await service.create_session(**_create())
        await fill(service, session, 1)
        snapshot = await found(service)
        snapshot.events = snapshot.events.appended(event(99))  # never committed
        assert len((await found(service)).events) == 1
        other = await found(service)
        await fill(service, other, 1, start=1)
        read = await found(service)
        assert read == await uncached(open_service)
        assert [e.actions.state_delta["i"] for e in read.events] == [0, 1]


async def test_concurrent_reads_of_one_session_agree(open_service: Opener) -> None:
    async with open_service() as one, open_service() as two:
        session = await one.create_session(**_create())
        await fill(one, session, 3)
        await found(one)
        await fill(two, await found(two), 2, start=3)
        reads: list[Session] = []

        async def read() -> None:
            reads.append(await found(one))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(read)
        expected = await uncached(open_service)
        assert reads == [expected] * 3
        await fill(one, reads[0], 1, start=5)
        assert await found(one) == await uncached(open_service)


# -- bounds and settings ----------------------------------------------------------------------


async def test_the_least_recently_read_sessions_are_dropped_first(
    open_service: Opener, parses: Parses
) -> None:
    async with open_service(cached_sessions=2) as service:
        for name in "abc":
            session = await service.create_session(app_name="app", user_id="u", session_id=name)
            await fill(service, session, 4)
        parses.take()
        for name in "abca":  # a is read again last: it was dropped when c came in
            await service.get_session(app_name="app", user_id="u", session_id=name)
        assert parses.take() == 16
        for name in "ca":
            await service.get_session(app_name="app", user_id="u", session_id=name)
        assert parses.take() == 0


async def test_without_a_cache_every_read_parses_the_whole_history(
    open_service: Opener, parses: Parses
) -> None:
    async with open_service(cached_sessions=0) as service:
        session = await service.create_session(**_create())
        await fill(service, session, 4)
        parses.take()
        await found(service)
        await found(service)
        assert parses.take() == 8


@pytest.mark.parametrize("backend", [SqliteSessionService, PostgresSessionService])
def test_a_negative_cache_size_is_refused(backend: type[Service], tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cached_sessions"):
        backend(str(tmp_path / "x.db"), cached_sessions=-1)


class Once(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(content=Content.from_text("once", role="model")))


async def test_an_invocation_parses_only_the_previous_invocations_events(
    open_service: Opener, parses: Parses
) -> None:
    """What benchmark W6 measures: a run's cost does not grow with the history."""
    async with open_service() as service:
        session = await service.create_session(**_create())
        await fill(service, session, 50)
        runner = Runner(agent=Once(name="once"), app_name="app", session_service=service)
        counts = []
        for _ in range(4):
            parses.take()
            async with runner.run(user_id="u", session_id="s", new_message="go") as events:
                assert [e.author async for e in events] == ["once"]
            counts.append(parses.take())
        assert counts == [50, 2, 2, 2]
        assert await found(service) == await uncached(open_service)


async def test_an_append_in_flight_when_its_session_is_deleted_is_deleted_too(
    tmp_path: Path,
) -> None:
    """PostgreSQL: deleting waits for an append holding the session row, then deletes its event
    as well, so a session created again under that id does not inherit it."""
    dsn = await trio.to_thread.run_sync(ensure_cluster)
    async with PostgresSessionService(dsn) as service:
        await service.create_session(**_create())
        body = event(0).to_json()
        conn = await trio.to_thread.run_sync(psycopg.connect, dsn)
        try:
            await trio.to_thread.run_sync(_begin_append, conn, body)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: service.delete_session(**WHERE))
                await until_blocked(dsn, "DELETE FROM trio_agents_sessions")  # on the row lock
                await trio.to_thread.run_sync(conn.commit)
        finally:
            await trio.to_thread.run_sync(conn.close)
        await service.create_session(**_create())
        assert (await found(service)).events == []
        async with PostgresSessionService(dsn) as fresh:
            assert (await found(fresh)).events == []


def _begin_append(conn: Any, body: str) -> None:
    """What an append does first, left uncommitted: the session row locked, the event in."""
    conn.execute(
        "UPDATE trio_agents_sessions SET revision = revision + 1"
        " WHERE app_name = 'app' AND user_id = 'u' AND id = 's'"
    )
    conn.execute(
        "INSERT INTO trio_agents_events (app_name, user_id, session_id, timestamp, body)"
        " VALUES ('app', 'u', 's', 0, %s)",
        (body,),
    )


def _create() -> dict[str, str]:
    return {"app_name": "app", "user_id": "u", "session_id": "s"}


# -- property: random interleavings against an uncached read ----------------------------------

DELTAS: list[dict[str, Any]] = [
    {"n": 1},
    {"n": 2, "app:a": "x"},
    {"user:u": [1, 2]},
    {"pair": (1, "x")},  # comes back from the store as a list
    {"nested": {"t": (2,)}},  # so does this one
    {"temp:scratch": 1, "n": 3},
    {},
]
windows = st.none() | st.builds(
    GetSessionConfig,
    num_recent_events=st.none() | st.integers(0, 4),
    after_timestamp=st.none() | st.sampled_from([0.5, 2.0, 3.5, 10.0]),
)
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.integers(0, 1),
            st.lists(
                st.tuples(st.sampled_from(DELTAS), st.sampled_from([1.0, 2.0, 3.0, 4.0])),
                min_size=1,
                max_size=3,
            ),
        ),
        st.tuples(st.just("get"), st.integers(0, 1), windows),
        st.tuples(st.just("twin"), st.integers(0, 1)),
        st.tuples(st.just("recreate"), st.integers(0, 1)),
    ),
    min_size=4,
    max_size=30,
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(deadline=None)
@given(plan=steps, _random=st.random_module())
def test_cached_reads_equal_uncached_reads_under_any_interleaving(
    tmp_path_factory: pytest.TempPathFactory, backend: str, plan: list[Any], _random: Any
) -> None:
    """Two services on one store append (through the snapshots they read, so into the cached
    lists), read with random windows, read twice at once, and delete and re-create the session;
    every read equals a read by a service without a cache, and a brand-new service agrees at
    the end."""
    open_service = _opener(backend, tmp_path_factory.mktemp("cache"))
    trio.run(_interleave, open_service, plan)


async def _interleave(open_service: Opener, plan: list[Any]) -> None:
    async with (
        open_service() as one,
        open_service() as two,
        open_service(cached_sessions=0) as plain,
    ):
        services = (one, two)
        snapshots: list[Session | None] = [await one.create_session(**_create()), None]
        counter = 0
        for step in plan:
            which = step[1]
            service = services[which]
            if step[0] == "append":
                snapshots[which] = await _append(service, snapshots[which], step[2], counter)
                counter += len(step[2])
            elif step[0] == "get":
                read = await get(service, step[2])
                assert read == await get(plain, step[2])
                snapshots[which] = read
            elif step[0] == "twin":
                reads: list[Session | None] = []

                async def read_into(into: list[Session | None], svc: Service = service) -> None:
                    into.append(await get(svc))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read_into, reads)
                    nursery.start_soon(read_into, reads)
                assert reads == [await get(plain)] * 2
            else:
                await service.delete_session(**WHERE)
                snapshots[which] = await service.create_session(**_create())
        expected = await uncached(open_service)
        assert await get(one) == await get(two) == await get(plain) == expected


async def _append(
    service: Service, snapshot: Session | None, batch: list[tuple[dict[str, Any], float]], i: int
) -> Session | None:
    """Append ``batch`` through ``snapshot`` (or a fresh read): the snapshot to go on with."""
    snapshot = snapshot or await get(service)
    for n, (delta, stamp) in enumerate(batch, start=i):
        if snapshot is None:
            return None
        try:
            await service.append_event(snapshot, event(n, stamp, **delta))
        except (StaleSessionError, SessionNotFoundError):
            snapshot = await get(service)
    return snapshot
