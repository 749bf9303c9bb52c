"""Exclusivity across processes for SqliteSessionService (issue 7, item 3).

Real processes (``sqlite_worker.py``) share one file: while one runs an invocation on a session,
another is rejected (``concurrent_runs="reject"``) or waits (``"queue"``); a holder killed with
SIGKILL leaves a lease that expires, and the next run takes the session over.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_agents import Event, SessionBusyError
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


async def test_a_killed_holders_lease_expires_and_the_session_is_taken_over(db: Path) -> None:
    holder = spawn("hold", str(db), "s")
    try:
        assert await line(holder) == "held"
        async with SqliteSessionService(db) as service:
            with pytest.raises(SessionBusyError):
                async with service.lease(app_name="app", user_id="u", session_id="s"):
                    pass
            await kill(holder)  # SIGKILL: it dies holding the lease
            with trio.fail_after(30):  # a hang guard, not a speed check
                async with service.lease(app_name="app", user_id="u", session_id="s", wait=True):
                    pass
    finally:
        await kill(holder)
    after = spawn("try", str(db), "s")
    assert (await finish(after)).split() == ["ran"]


async def test_two_services_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    """Each service has its own owner id, as each process does."""
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


async def test_a_holder_whose_lease_was_taken_over_stops_with_session_busy(
    tmp_path: Path,
) -> None:
    """If another process took the session over (our lease had expired: say our event loop was
    blocked), the holder's next renewal notices, stops its run and leaves the new lease alone."""
    path = tmp_path / "lost.db"
    async with SqliteSessionService(path, lease_seconds=0.3) as service:
        with pytest.raises(SessionBusyError):
            async with service.lease(app_name="a", user_id="u", session_id="s"):
                with sqlite3.connect(path) as conn:  # what a rival process would write
                    conn.execute("UPDATE leases SET owner = 'rival', expires = 1e12")
                with trio.fail_after(30):  # a hang guard: the renewal must cancel us
                    await trio.sleep_forever()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT owner FROM leases").fetchall() == [("rival",)]
