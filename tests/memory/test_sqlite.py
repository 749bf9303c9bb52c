"""SqliteMemoryService beyond the contract: FTS5 tokens, bm25 ranking, durability, files."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import trio

from trio_agents import ConfigurationError, Content, Event, Session
from trio_agents.memory import SqliteMemoryService
from trio_agents.memory._sqlite import APPLICATION_ID, MIGRATIONS, _transaction


def session(sid: str, *texts: str, user: str = "u") -> Session:
    events = [
        Event(id=f"{sid}-{i}", author="user", timestamp=float(i), content=Content.from_text(t))
        for i, t in enumerate(texts)
    ]
    return Session(id=sid, app_name="app", user_id=user, events=events)


async def texts(service: SqliteMemoryService, query: str) -> list[str]:
    found = await service.search_memory(app_name="app", user_id="u", query=query)
    return [m.text for m in found.memories]


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        count: int = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    conn.close()
    return count


async def test_rarer_and_more_words_rank_first_by_bm25(tmp_path: Path) -> None:
    async with SqliteMemoryService(tmp_path / "m.db") as service:
        common = [f"weather talk number {i}" for i in range(8)]
        await service.add_session_to_memory(
            session("s", *common, "a zeppelin flew by", "weather zeppelin")
        )
        found = await texts(service, "weather zeppelin")
        assert found[:2] == ["weather zeppelin", "a zeppelin flew by"]
        assert set(found[2:]) <= set(common)


async def test_fts_tokens_fold_case_and_latin_accents_but_not_prefixes(tmp_path: Path) -> None:
    async with SqliteMemoryService(tmp_path / "m.db") as service:
        await service.add_session_to_memory(session("s", "An Émigré's category"))
        assert await texts(service, "emigre") == ["An Émigré's category"]
        assert await texts(service, "ÉMIGRÉ") == ["An Émigré's category"]
        assert await texts(service, "cat") == []  # whole tokens only
        assert await texts(service, "cat*") == []  # "*" is text, not a prefix query


async def test_memories_survive_closing_and_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with SqliteMemoryService(path) as service:
        await service.add_session_to_memory(session("s", "the spare key is under the mat"))
    async with SqliteMemoryService(path) as again:
        found = await again.search_memory(app_name="app", user_id="u", query="key")
        assert [m.id for m in found.memories] == ["s-0"]
        assert found.memories[0].custom_metadata == {"session_id": "s"}


async def test_re_adding_a_session_leaves_one_copy_of_each_event(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with SqliteMemoryService(path) as service:
        for _ in range(3):
            await service.add_session_to_memory(session("s", "one fact", "two facts"))
        await service.add_session_to_memory(session("t", "other"))
        assert await texts(service, "fact facts") == ["one fact", "two facts"]
    assert await trio.to_thread.run_sync(_count, path, "memories") == 3
    assert await trio.to_thread.run_sync(_count, path, "memory_text") == 3


@pytest.mark.parametrize("round_", range(5))
async def test_services_opening_one_new_file_at_once_share_it(tmp_path: Path, round_: int) -> None:
    """Several connections (as several processes would have) create the file at once: each
    sees either no schema or the whole of it, one migrates, and every add lands."""
    path = tmp_path / "m.db"
    services = [SqliteMemoryService(path) for _ in range(6)]
    try:
        async with trio.open_nursery() as nursery:
            for n in range(12):
                svc = services[n % len(services)]
                nursery.start_soon(svc.add_session_to_memory, session(f"s{n}", f"shared {n}"))
        assert len(await texts(services[0], "shared")) == 10  # the limit
        assert await trio.to_thread.run_sync(_count, path, "memories") == 12
    finally:
        for svc in services:
            await svc.aclose()


async def test_a_call_waits_out_another_connections_lock_and_a_cancelled_one_leaves(
    tmp_path: Path,
) -> None:
    """Another process's write lock: a call keeps trying (SQLite gives up at once in some
    cases, e.g. while a new file switches to WAL), a cancelled call leaves having written
    nothing, and a call made while the lock is released lands."""
    path = tmp_path / "m.db"
    async with SqliteMemoryService(path) as service:
        await service.add_session_to_memory(session("a", "first fact"))
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        async with SqliteMemoryService(path) as service:
            with trio.move_on_after(1.0) as scope:
                await service.add_session_to_memory(session("b", "second fact"))
            assert scope.cancelled_caught
            assert await texts(service, "fact") == ["first fact"]

            async def release_soon() -> None:
                await trio.sleep(0.3)
                holder.execute("ROLLBACK")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(release_soon)
                await service.add_session_to_memory(session("b", "second fact"))
            assert await texts(service, "fact") == ["first fact", "second fact"]
    finally:
        holder.close()


@pytest.mark.parametrize("make", ["text", "other-sqlite", "newer"])
async def test_a_file_that_is_not_ours_is_refused_and_left_untouched(
    tmp_path: Path, make: str
) -> None:
    path = tmp_path / "m.db"
    await trio.to_thread.run_sync(_make_foreign, path, make)
    before = await trio.to_thread.run_sync(path.read_bytes)
    service = SqliteMemoryService(path)
    with pytest.raises(ConfigurationError, match=r"not a trio_agents memory|newer"):
        await service.search_memory(app_name="app", user_id="u", query="x")
    with pytest.raises(ConfigurationError):
        await service.add_session_to_memory(session("s", "x"))
    await service.aclose()
    assert await trio.to_thread.run_sync(path.read_bytes) == before
    assert await trio.to_thread.run_sync(os.listdir, tmp_path) == ["m.db"]  # no -wal / -shm either


def _make_foreign(path: Path, make: str) -> None:
    if make == "text":
        path.write_text("this is not a database, just some notes\n" * 200)
        return
    conn = sqlite3.connect(path)
    if make == "other-sqlite":
        conn.execute("CREATE TABLE notes (x)")
    else:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


async def test_a_file_of_the_first_release_is_upgraded_in_place(tmp_path: Path) -> None:
    """Version 0 (our application id, tables, no user_version): kept and stamped version 1."""
    path = tmp_path / "m.db"

    def first_release() -> None:
        conn = sqlite3.connect(path)
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(
            "INSERT INTO memories VALUES (1, 'app', 'u', 's', 'e1', 'user', 't', ?)",
            ('{"role": "user", "parts": [{"text": "old memory"}]}',),
        )
        conn.execute("INSERT INTO memory_text (rowid, text) VALUES (1, 'old memory')")
        conn.commit()
        conn.close()

    await trio.to_thread.run_sync(first_release)
    async with SqliteMemoryService(path) as service:
        assert await texts(service, "memory") == ["old memory"]

    def version() -> int:
        with sqlite3.connect(path) as conn:
            value: int = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        return value

    assert await trio.to_thread.run_sync(version) == 1


def test_an_error_after_sqlite_rolled_back_by_itself_is_the_one_raised() -> None:
    """An interrupted write (a cancelled caller) is rolled back by SQLite; the transaction must
    not try again and hide "interrupted" -- that word is how the caller learns it was cancelled.
    """
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    with pytest.raises(sqlite3.OperationalError, match=r"^interrupted$"), _transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("ROLLBACK")  # what SQLite does on an interrupted write
        raise sqlite3.OperationalError("interrupted")
    with pytest.raises(ValueError, match="boom"), _transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise ValueError("boom")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    assert not conn.in_transaction
    conn.close()


async def test_a_closed_service_refuses_work(tmp_path: Path) -> None:
    service = SqliteMemoryService(tmp_path / "m.db")
    await service.add_session_to_memory(session("s", "x"))
    await service.aclose()
    await service.aclose()  # twice is fine
    with pytest.raises(trio.ClosedResourceError, match="closed"):
        await service.search_memory(app_name="app", user_id="u", query="x")


async def test_delete_memory_is_not_supported(tmp_path: Path) -> None:
    """As google-adk 2.13's SQLite memory, which has no ``delete_memory``: the base contract's
    NotImplementedError, and nothing is forgotten."""
    async with SqliteMemoryService(tmp_path / "m.db") as service:
        await service.add_session_to_memory(
            Session(
                id="s",
                app_name="app",
                user_id="u",
                events=[Event(id="e", author="user", content=Content.from_text("kept memory"))],
            )
        )
        with pytest.raises(NotImplementedError, match="delete_memory"):
            await service.delete_memory(app_name="app", user_id="u", memory_id="e")
        assert await texts(service, "memory") == ["kept memory"]
