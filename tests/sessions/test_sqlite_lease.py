"""Exclusivity across processes for SqliteSessionService.

Real processes (``sqlite_worker.py``) share one file: while one runs an invocation on a session,
another is rejected (``concurrent_runs="reject"``) or waits (``"queue"``). The lease is a
``flock`` on a per-session lock file, so a holder killed with SIGKILL frees its session at once:
the next run takes it over without waiting. Services in one process exclude each other as
processes do, and one giving up a lock file never drops another's lock on it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_agents import ConfigurationError, Event, SessionBusyError
from trio_agents.sessions import SqliteSessionService

ROOT = Path(__file__).resolve().parents[2]


def spawn(*args: str) -> subprocess.Popen[str]:
    """A ``sqlite_worker.py`` process; its standard input and output are pipes to us."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sessions.sqlite_worker", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


async def line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return (await trio.to_thread.run_sync(proc.stdout.readline)).strip()


async def finish(proc: subprocess.Popen[str]) -> str:
    """Close its standard input, read the rest of its output and reap it."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    rest = await trio.to_thread.run_sync(proc.stdout.read)
    await trio.to_thread.run_sync(proc.wait)
    proc.stdout.close()
    return rest


async def kill(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    await trio.to_thread.run_sync(proc.wait)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "lease.db"
    async with SqliteSessionService(path) as service:
        await service.create_session(app_name="app", user_id="u", session_id="s")
    return path


def lock_files(db: Path) -> list[Path]:
    return list(Path(f"{db}-leases").iterdir())


def block_lock_directory(db: Path) -> None:
    Path(f"{db}-leases").write_text("not a directory")


def texts_in_commit_order(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT body FROM events WHERE session_id = 's' ORDER BY seq")
        return [Event.from_json(body).text or "" for (body,) in rows]


async def test_a_second_process_is_rejected_while_the_first_runs(db: Path) -> None:
    holder = spawn("hold", str(db), "s")
    try:
        assert await line(holder) == "held"
        rival = spawn("try", str(db), "s")
        assert (await finish(rival)).split() == ["busy"]
        assert (await finish(holder)).split() == ["done"]
        after = spawn("try", str(db), "s")
        assert (await finish(after)).split() == ["ran"]
    finally:
        await kill(holder)
    assert texts_in_commit_order(db) == ["go", "first", "last", "go", "once"]


async def test_a_queued_process_waits_for_the_run_in_flight(db: Path) -> None:
    holder = spawn("hold", str(db), "s")
    try:
        assert await line(holder) == "held"
        queued = spawn("queue", str(db), "s")
        try:
            assert await line(queued) == "busy"  # it found the session leased, and now waits
            assert (await finish(holder)).split() == ["done"]
            assert (await finish(queued)).split() == ["ran"]
        finally:
            await kill(queued)
    finally:
        await kill(holder)
    # the queued run started (its user message "go") only after the holder's last event
    assert texts_in_commit_order(db) == ["go", "first", "last", "go", "once"]


async def test_a_killed_holders_lease_dies_with_it(db: Path) -> None:
    holder = spawn("hold", str(db), "s")
    try:
        assert await line(holder) == "held"
        async with SqliteSessionService(db) as service:
            with pytest.raises(SessionBusyError):
                async with service.lease(app_name="app", user_id="u", session_id="s"):
                    pass
            await kill(holder)  # SIGKILL, then reaped: the kernel has dropped its lock
            async with service.lease(app_name="app", user_id="u", session_id="s"):
                pass  # taken at once, without waiting (wait=False)
    finally:
        await kill(holder)
    after = spawn("try", str(db), "s")
    assert (await finish(after)).split() == ["ran"]
    assert texts_in_commit_order(db) == ["go", "first", "go", "once"]


async def test_a_waiting_run_starts_within_a_second_of_the_holders_sigkill(db: Path) -> None:
    """The one timing requirement of the lease: a queued run polls at most every
    ``LEASE_POLL`` seconds, so it starts well within a second of the holder's death."""
    holder = spawn("hold", str(db), "s")
    try:
        assert await line(holder) == "held"
        async with SqliteSessionService(db) as service, trio.open_nursery() as nursery:
            started = trio.Event()

            async def queued() -> None:
                async with service.lease(app_name="app", user_id="u", session_id="s", wait=True):
                    started.set()

            nursery.start_soon(queued)
            await trio.sleep(0.3)  # let it find the session busy and start polling
            assert not started.is_set()
            holder.kill()
            killed_at = trio.current_time()
            with trio.fail_after(5):  # a hang guard; the bound is asserted below
                await started.wait()
            assert trio.current_time() - killed_at < 1.0
    finally:
        await kill(holder)


async def test_two_services_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    """Each service opens the lock file for itself, as each process does."""
    path = tmp_path / "two.db"
    async with SqliteSessionService(path) as one, SqliteSessionService(path) as two:
        async with one.lease(app_name="a", user_id="u", session_id="s"):
            with pytest.raises(SessionBusyError):
                async with two.lease(app_name="a", user_id="u", session_id="s"):
                    pass
            async with two.lease(app_name="a", user_id="u", session_id="other"):
                pass  # other sessions are free
        async with two.lease(app_name="a", user_id="u", session_id="s"):
            pass  # released on exit


async def test_a_rival_giving_up_in_this_process_leaves_the_holders_lock_alone(db: Path) -> None:
    """A second service that opened the holder's lock file, failed to lock it and closed it
    again must not drop the holder's lock (POSIX record locks would: they belong to the
    process, and closing any descriptor of the file releases them all)."""
    async with SqliteSessionService(db) as one, SqliteSessionService(db) as two:
        async with one.lease(app_name="app", user_id="u", session_id="s"):
            for _ in range(3):
                with pytest.raises(SessionBusyError):
                    async with two.lease(app_name="app", user_id="u", session_id="s"):
                        pass
            rival = spawn("try", str(db), "s")
            assert (await finish(rival)).split() == ["busy"]
        rival = spawn("try", str(db), "s")
        assert (await finish(rival)).split() == ["ran"]


async def test_a_cancelled_waiter_holds_nothing(db: Path) -> None:
    holder = spawn("hold", str(db), "s")
    try:
        assert await line(holder) == "held"
        async with SqliteSessionService(db) as service:
            with trio.move_on_after(0.2) as waited:
                async with service.lease(app_name="app", user_id="u", session_id="s", wait=True):
                    pytest.fail("the lease was taken while another process held it")
            assert waited.cancelled_caught
            assert (await finish(holder)).split() == ["done"]
            async with service.lease(app_name="app", user_id="u", session_id="s"):
                pass  # free: the cancelled waiter left no lock behind
    finally:
        await kill(holder)


async def test_lock_files_exist_only_while_held(db: Path) -> None:
    """One file per session leased right now: a holder removes its file on release, and a
    file left by a killed holder is taken over and removed by the next holder."""
    async with SqliteSessionService(db) as service:
        async with service.lease(app_name="app", user_id="u", session_id="s"):
            assert len(lock_files(db)) == 1
            async with service.lease(app_name="app", user_id="u", session_id="t"):
                assert len(lock_files(db)) == 2
        assert lock_files(db) == []
        holder = spawn("hold", str(db), "s")
        try:
            assert await line(holder) == "held"
            await kill(holder)
        finally:
            await kill(holder)
        assert len(lock_files(db)) == 1  # left behind, unlocked
        async with service.lease(app_name="app", user_id="u", session_id="s"):
            pass
        assert lock_files(db) == []


async def test_a_lease_in_a_directory_that_cannot_hold_lock_files_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d.db"
    block_lock_directory(path)
    async with SqliteSessionService(path) as service:
        with pytest.raises(ConfigurationError, match="cannot open the session lease file"):
            async with service.lease(app_name="a", user_id="u", session_id="s"):
                pass


async def test_a_private_database_needs_no_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``:memory:`` is seen by one connection only: the per-process lease is all it needs."""
    monkeypatch.chdir(tmp_path)
    async with SqliteSessionService(":memory:") as service:
        async with service.lease(app_name="a", user_id="u", session_id="s"):
            with pytest.raises(SessionBusyError):
                async with service.lease(app_name="a", user_id="u", session_id="s"):
                    pass
        async with service.lease(app_name="a", user_id="u", session_id="s"):
            pass
    assert os.listdir(tmp_path) == []
