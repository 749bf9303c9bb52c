"""SqliteSessionService beyond the contract suite (issue 7, item 1): files and schema versions,
durability settings, windows read in SQL, concurrent appends, cancellation, and the one thread
that owns each connection. Cross-process leases: test_sqlite_lease.py; SIGKILL:
test_sqlite_crash.py."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings, strategies as st

from trio_agents import (
    ConfigurationError,
    Event,
    EventActions,
    SessionNotFoundError,
    StaleSessionError,
)
from trio_agents.sessions import (
    GetSessionConfig,
    Session,
    SqliteSessionService,
    _sqlite_schema as schema,
)
from trio_agents.sessions._sqlite import _transaction

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def worker(mode: str, store: Path | str) -> Iterator[subprocess.Popen[str]]:
    """A ``store_worker.py`` process, killed and reaped at the end (test_postgres.py uses it)."""
    with subprocess.Popen(
        [sys.executable, "-m", "tests.sessions.store_worker", mode, str(store)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            yield proc
        finally:
            proc.kill()
            proc.wait()


async def read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return (await trio.to_thread.run_sync(proc.stdout.readline)).strip()


def event(**delta: Any) -> Event:
    return Event(author="agent", actions=EventActions(state_delta=delta))


async def get(service: SqliteSessionService, session_id: str, **config: Any) -> Session:
    found = await service.get_session(
        app_name="a",
        user_id="u",
        session_id=session_id,
        config=GetSessionConfig(**config) if config else None,
    )
    assert found is not None
    return found


def pragma(path: Path, name: str) -> Any:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


# -- files and schema versions ------------------------------------------------------------------


async def test_a_new_file_is_marked_as_ours_at_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with SqliteSessionService(path) as service:
        await service.create_session(app_name="a", user_id="u", session_id="s")
    assert pragma(path, "application_id") == schema.APPLICATION_ID
    assert pragma(path, "user_version") == schema.SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert pragma(path, "journal_mode") == "wal"


async def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hello, I am not a database" * 100)
    before = path.read_bytes()
    async with SqliteSessionService(path) as service:
        with pytest.raises(ConfigurationError, match=r"notes\.txt.*not a trio_agents session"):
            await service.get_session(app_name="a", user_id="u", session_id="s")
        with pytest.raises(ConfigurationError):  # every call, not just the first
            await service.list_sessions(app_name="a")
    assert path.read_bytes() == before


@pytest.mark.parametrize("app_id", [0, 0x12345678, 0x74726D6D])  # none, another, our memory's
async def test_another_applications_database_is_refused_untouched(
    tmp_path: Path, app_id: int
) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA application_id = {app_id}")
        conn.execute("CREATE TABLE things (x)")
        conn.execute("INSERT INTO things VALUES (1)")
    before = path.read_bytes()
    async with SqliteSessionService(path) as service:
        with pytest.raises(ConfigurationError, match=r"other\.db.*not a trio_agents session"):
            await service.create_session(app_name="a", user_id="u")
    assert path.read_bytes() == before


async def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
        conn.execute("CREATE TABLE future (x)")
    before = path.read_bytes()
    async with SqliteSessionService(path) as service:
        with pytest.raises(ConfigurationError, match=r"schema version 2, newer .* upgrade"):
            await service.list_sessions(app_name="a")
    assert path.read_bytes() == before


async def test_an_unreachable_path_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "missing-directory" / "s.db"
    async with SqliteSessionService(path) as service:
        with pytest.raises(ConfigurationError, match="missing-directory"):
            await service.list_sessions(app_name="a")


@pytest.fixture
def version_2(monkeypatch: pytest.MonkeyPatch) -> Callable[[tuple[str, ...]], None]:
    """Pretend a release added migration ``1 -> 2`` with the given statements."""

    def install(statements: tuple[str, ...]) -> None:
        monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, statements])
        monkeypatch.setattr(schema, "SCHEMA_VERSION", len(schema.MIGRATIONS))

    return install


async def test_an_older_schema_is_migrated_in_order_keeping_its_data(
    tmp_path: Path, version_2: Callable[[tuple[str, ...]], None]
) -> None:
    path = tmp_path / "old.db"
    async with SqliteSessionService(path) as service:
        session = await service.create_session(app_name="a", user_id="u", state={"k": 1})
        await service.append_event(session, event(k=2))
    version_2(("CREATE TABLE notes (x)", "INSERT INTO notes SELECT revision FROM sessions"))
    async with SqliteSessionService(path) as service:
        again = await get(service, session.id)
        assert (again.state, again.revision, len(again.events)) == ({"k": 2}, 1, 1)
    assert pragma(path, "user_version") == 2
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT x FROM notes").fetchall() == [(1,)]


async def test_a_failed_migration_leaves_the_file_at_its_version(
    tmp_path: Path, version_2: Callable[[tuple[str, ...]], None]
) -> None:
    path = tmp_path / "old.db"
    async with SqliteSessionService(path) as service:
        session = await service.create_session(app_name="a", user_id="u")
    version_2(("CREATE TABLE notes (x)", "THIS IS NOT SQL"))
    async with SqliteSessionService(path) as service:
        with pytest.raises(sqlite3.OperationalError, match="syntax error"):
            await service.list_sessions(app_name="a")
    assert pragma(path, "user_version") == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'notes'").fetchall() == []
        assert conn.execute("SELECT id FROM sessions").fetchall() == [(session.id,)]


def test_a_schema_made_by_another_connection_meanwhile_is_not_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes open a fresh file at once: both see version 0, one migrates first. The
    other re-reads the version inside its write transaction and finds nothing left to do."""
    path = str(tmp_path / "fresh.db")
    checked = schema._checked_version

    def rival_migrates_after_we_looked(conn: sqlite3.Connection, where: str) -> int:
        version = checked(conn, where)
        if version == 0:
            with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as rival:
                monkeypatch.setattr(schema, "_checked_version", checked)
                schema.check_and_migrate(rival, path)
                monkeypatch.setattr(schema, "_checked_version", rival_migrates_after_we_looked)
        return version

    monkeypatch.setattr(schema, "_checked_version", rival_migrates_after_we_looked)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        schema.check_and_migrate(conn, path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION


# -- durability -----------------------------------------------------------------------------


@pytest.mark.parametrize(("durable", "level"), [(True, 2), (False, 1)])  # FULL, NORMAL
async def test_durability_setting_of_the_connection(
    tmp_path: Path, durable: bool, level: int
) -> None:
    async with SqliteSessionService(tmp_path / "d.db", durable=durable) as service:
        await service.list_sessions(app_name="a")
        got = await service._db.run(
            lambda conn: (
                conn.execute("PRAGMA synchronous").fetchone()[0],
                conn.execute("PRAGMA journal_mode").fetchone()[0],
            )
        )
    assert got == (level, "wal")


async def test_sessions_survive_the_service_in_both_modes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionService(path, durable=False) as service:
        session = await service.create_session(app_name="a", user_id="u", state={"app:x": 1})
        await service.append_event(session, event(k=2, **{"user:y": 3}))
    async with SqliteSessionService(path) as service:
        again = await get(service, session.id)
    assert (again.state, again.revision) == ({"app:x": 1, "user:y": 3, "k": 2}, 1)
    assert again.events == session.events


# -- windows read in SQL ------------------------------------------------------------------------


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text ``Event.from_json`` parses from now on."""
    texts: list[str] = []
    original = Event.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Event], text: str) -> Event:
        texts.append(text)
        return original(cls, text)  # type: ignore[no-any-return]

    monkeypatch.setattr(Event, "from_json", classmethod(counting))
    return texts


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"num_recent_events": 3}, [47.0, 48.0, 49.0]),
        ({"num_recent_events": 0}, []),
        ({"after_timestamp": 45.0}, [45.0, 46.0, 47.0, 48.0, 49.0]),
        ({"after_timestamp": 10.0, "num_recent_events": 2}, [48.0, 49.0]),
        ({"after_timestamp": 48.5, "num_recent_events": 9}, [49.0]),
    ],
)
async def test_a_window_parses_only_the_events_it_returns(
    tmp_path: Path, parsed: list[str], config: dict[str, Any], expected: list[float]
) -> None:
    """Issue 7 speed: reading a session does not parse more events than asked for (R-ST-8)."""
    async with SqliteSessionService(tmp_path / "w.db") as service:
        session = await service.create_session(app_name="a", user_id="u")
        for i in range(50):
            await service.append_event(session, Event(author="a", timestamp=float(i)))
        parsed.clear()
        window = await get(service, session.id, **config)
    assert [e.timestamp for e in window.events] == expected
    assert len(parsed) == len(expected)
    assert window.revision == 50


async def test_listing_parses_no_events(tmp_path: Path, parsed: list[str]) -> None:
    async with SqliteSessionService(tmp_path / "l.db") as service:
        for _ in range(3):
            session = await service.create_session(app_name="a", user_id="u")
            await service.append_event(session, event(k=1))
        parsed.clear()
        listed = await service.list_sessions(app_name="a")
    assert [len(s.events) for s in listed] == [0, 0, 0]
    assert [s.revision for s in listed] == [1, 1, 1]
    assert parsed == []


# -- concurrency --------------------------------------------------------------------------------


async def test_many_tasks_appending_to_many_sessions(tmp_path: Path) -> None:
    async with SqliteSessionService(tmp_path / "c.db") as service:
        sessions = [
            await service.create_session(app_name="a", user_id="u", session_id=f"s{i}")
            for i in range(8)
        ]

        async def writer(session: Session) -> None:
            for n in range(15):
                await service.append_event(session, event(n=n, **{"user:last": session.id}))

        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(writer, session)
        for session in sessions:
            stored = await get(service, session.id)
            assert [e.actions.state_delta["n"] for e in stored.events] == list(range(15))
            assert stored.revision == 15
            assert stored.state["n"] == 14
        assert stored.state["user:last"] in {s.id for s in sessions}


async def test_two_tasks_appending_through_one_snapshot_one_wins(tmp_path: Path) -> None:
    """The revision is read when the call is made: both calls carry revision 0, so exactly one
    commits and the other is stale, whatever the interleaving."""
    async with SqliteSessionService(tmp_path / "one.db") as service:
        session = await service.create_session(app_name="a", user_id="u")
        outcomes: list[str] = []

        async def append(name: str) -> None:
            try:
                await service.append_event(session, event(who=name))
                outcomes.append("ok")
            except StaleSessionError:
                outcomes.append("stale")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, "x")
            nursery.start_soon(append, "y")
        stored = await get(service, session.id)
    assert sorted(outcomes) == ["ok", "stale"]
    assert stored.revision == 1 == len(stored.events)


@settings(deadline=None, max_examples=15)
@given(
    plan=st.lists(st.tuples(st.integers(0, 1), st.booleans()), min_size=1, max_size=12),
    _random=st.random_module(),
)
def test_two_connections_racing_on_one_session_keep_it_consistent(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[int, bool]], _random: Any
) -> None:
    """Two services (two connections on two threads, as two processes) append concurrently,
    each through a snapshot it reloads or not. Every read is one consistent snapshot
    (revision == number of events), the stored history is exactly the successful appends, and
    the state is the fold of their deltas."""
    path = tmp_path_factory.mktemp("race") / "race.db"

    async def main() -> None:
        async with SqliteSessionService(path) as one, SqliteSessionService(path) as two:
            services = (one, two)
            session = await one.create_session(app_name="a", user_id="u", session_id="s")
            snapshots = [session, await get(two, "s")]
            committed: list[str] = []

            async def step(i: int, which: int, reload: bool) -> None:
                if reload:
                    snapshots[which] = await get(services[which], "s")
                seen = await get(services[1 - which], "s")
                assert seen.revision == len(seen.events)
                try:
                    stored = await services[which].append_event(
                        snapshots[which], event(step=i, **{"app:by": which})
                    )
                except StaleSessionError:
                    return
                committed.append(stored.id)

            async with trio.open_nursery() as nursery:
                for i, (which, reload) in enumerate(plan):
                    nursery.start_soon(step, i, which, reload)
            final = await get(one, "s")
            assert sorted(e.id for e in final.events) == sorted(committed)
            assert final.revision == len(committed)
            fold: dict[str, Any] = {}
            for e in final.events:
                fold.update(e.actions.state_delta)
            assert final.state == fold

    trio.run(main)


# -- cancellation -------------------------------------------------------------------------------


async def test_a_cancelled_append_either_returned_or_stored_nothing(tmp_path: Path) -> None:
    """A caller that sees Cancelled knows the append changed nothing (its job was skipped or
    interrupted); one that got a result knows it is stored."""
    async with SqliteSessionService(tmp_path / "c.db") as service:
        sessions = [await service.create_session(app_name="a", user_id="u") for _ in range(30)]
        returned: set[str] = set()
        first = trio.Event()

        async def append(session: Session) -> None:
            await service.append_event(session, event(k=1))
            returned.add(session.id)
            first.set()

        for pause in (0, 1, 3, 10, None):
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(append, session)
                if pause is None:  # the last round: cancel right after the first success
                    await first.wait()
                for _ in range(pause or 0):
                    await trio.lowlevel.checkpoint()
                nursery.cancel_scope.cancel()
        for session in sessions:
            stored = await get(service, session.id)
            assert stored.revision == session.revision == len(stored.events)
        assert returned  # the mix holds both outcomes


async def test_an_append_waiting_for_another_writer_is_released_when_cancelled(
    tmp_path: Path,
) -> None:
    """Another connection holds the write lock; the waiting append is cancelled. The caller is
    released although busy_timeout is an hour, nothing is stored, and the service stays usable."""
    path = tmp_path / "busy.db"
    async with SqliteSessionService(path, busy_timeout=3600) as service:
        session = await service.create_session(app_name="a", user_id="u")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # the rival writer
        try:
            with trio.fail_after(30):  # a hang guard, not a speed check
                with trio.move_on_after(0.3) as scope:
                    await service.append_event(session, event(k=1))
            assert scope.cancelled_caught
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert session.revision == 0
        stored = await get(service, session.id)
        assert (stored.revision, stored.state) == (0, {})
        await service.append_event(session, event(k=2))
        assert (await get(service, session.id)).state == {"k": 2}


async def test_a_waiting_append_gives_up_after_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    async with SqliteSessionService(path, busy_timeout=0.2) as service:
        session = await service.create_session(app_name="a", user_id="u")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                await service.append_event(session, event(k=1))
        finally:
            other.execute("ROLLBACK")
            other.close()
        await service.append_event(session, event(k=2))  # the snapshot is still current
        assert (await get(service, session.id)).revision == 1


async def test_a_long_read_is_interrupted_when_its_caller_is_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Connection.interrupt`` stops the statement mid-way (its read transaction is rolled
    back) instead of parsing the whole history for a caller that left."""
    path = tmp_path / "long.db"
    async with SqliteSessionService(path) as service:
        session = await service.create_session(app_name="a", user_id="u", session_id="s")
        await service.append_event(session, event(k=0))
    body = session.events[0].to_json()
    total = 20_000
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO events (app_name, user_id, session_id, timestamp, body)"
            " VALUES ('a', 'u', 's', 0, ?)",
            [(body,)] * (total - 1),
        )
        conn.execute(f"UPDATE sessions SET revision = {total}")
    token = trio.lowlevel.current_trio_token()
    scope = trio.CancelScope()
    count = 0
    original = Event.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Event], text: str) -> Event:
        nonlocal count
        count += 1
        if count == 100:  # on the connection's thread, mid-read
            token.run_sync_soon(scope.cancel)
        return original(cls, text)  # type: ignore[no-any-return]

    monkeypatch.setattr(Event, "from_json", classmethod(counting))
    async with SqliteSessionService(path) as service:
        with scope:
            await service.get_session(app_name="a", user_id="u", session_id="s")
        assert scope.cancelled_caught
        assert 100 <= count < total
        monkeypatch.undo()
        stored = await get(service, "s", num_recent_events=1)  # the connection still works
        await service.append_event(stored, event(k=1))
        assert (await get(service, "s", num_recent_events=0)).revision == total + 1


def test_a_failure_sqlite_already_rolled_back_propagates_as_itself() -> None:
    """SQLite rolls a transaction back by itself when an INSERT is interrupted; the transaction
    helper must then not issue its own ROLLBACK (which would fail and hide the interrupt)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    with pytest.raises(sqlite3.OperationalError, match="interrupted"), _transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("ROLLBACK")  # what SQLite did
        raise sqlite3.OperationalError("interrupted")
    with pytest.raises(sqlite3.OperationalError, match="boom"), _transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise sqlite3.OperationalError("boom")
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


# -- the thread that owns a connection ------------------------------------------------------


async def test_each_connection_is_used_by_one_dedicated_thread_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every statement of a service's connection runs on the same thread, which is neither the
    Trio thread nor one of ``trio.to_thread``'s reused workers; two services, two threads."""
    used: dict[int, set[int]] = {}
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        threads = used.setdefault(id(conn), set())
        conn.set_trace_callback(lambda _: threads.add(threading.get_ident()))
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    path = tmp_path / "t.db"
    workers: set[int] = set()
    async with SqliteSessionService(path) as one, SqliteSessionService(path) as two:

        async def busy(service: SqliteSessionService) -> None:
            session = await service.create_session(app_name="a", user_id="u")
            for i in range(10):
                await service.append_event(session, event(i=i))
                await get(service, session.id)
                workers.add(await trio.to_thread.run_sync(threading.get_ident))

        async with trio.open_nursery() as nursery:
            for service in (one, two, one, two):
                nursery.start_soon(busy, service)
    assert all(len(threads) == 1 for threads in used.values())  # (a connection whose set-up
    owners = set().union(*used.values())  # lost the race to migrate is closed and reopened)
    assert len(owners) == 2
    assert threading.get_ident() not in owners
    assert not workers & owners


async def test_appending_never_completes_synchronously(tmp_path: Path) -> None:
    async with SqliteSessionService(tmp_path / "n.db") as service:
        session = await service.create_session(app_name="a", user_id="u")
        with pytest.raises(trio.WouldBlock):
            service.append_event_nowait(session, event(k=1))
        assert (await get(service, session.id)).revision == 0


async def test_missing_and_stale_appends_are_told_apart(tmp_path: Path) -> None:
    async with SqliteSessionService(tmp_path / "m.db") as service:
        session = await service.create_session(app_name="a", user_id="u", session_id="s")
        copy = await get(service, "s")
        await service.append_event(session, event(k=1))
        with pytest.raises(StaleSessionError) as stale:
            await service.append_event(copy, event(k=2))
        assert (stale.value.expected, stale.value.actual) == (0, 1)
        await service.delete_session(app_name="a", user_id="u", session_id="s")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(session, event(k=3))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="busy_timeout must be >= 0, got -1"):
        SqliteSessionService("x.db", busy_timeout=-1)
