"""Crash safety of SqliteSessionService (issue 7, item 4): real runner processes killed with
SIGKILL at random points lose nothing committed and leave a history the next run can repair.

Two worker processes (``sqlite_worker.py crash``) run a multi-agent app (a loop of a parallel
pair and a third agent, each committing session, ``app:``, ``user:`` and ``temp:`` deltas,
function calls and long-running calls) on two sessions of one user in one file, so commits of
both processes interleave and contend for the ``app:`` and ``user:`` rows. Each is killed after
a random number of received events plus a random pause. After every kill the file must hold:
every event id a consumer printed; rows that all parse; per agent and invocation no hole in the
emission sequence; each session's revision equal to its event count; state equal to the fold of
the stored deltas, scope by scope, in commit order. Then a run in this process, started right
after the kill with ``concurrent_runs="reject"`` (the lease died with its holder: no waiting),
must first close the calls the dead invocation left open (R-LRO: long-running calls
excepted), leaving every call answered. Several rounds continue the same sessions, so workers
also start on repaired files.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agents import BaseAgent, Event, InvocationContext, Runner
from trio_agents._runner import ABANDONED_REASON
from trio_agents.sessions import SqliteSessionService

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ("s1", "s2")


def spawn(*args: str) -> subprocess.Popen[str]:
    """A ``sqlite_worker.py`` process with its standard output piped to us."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sessions.sqlite_worker", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


async def run_and_kill(db: Path, session: str, rng: random.Random) -> list[str]:
    """Start a crash worker, SIGKILL it at a random point; every id it printed, to the end."""
    wanted = rng.choice([0, rng.randint(1, 10), rng.randint(10, 80)])
    pause = rng.uniform(0, 0.02)
    proc = spawn("crash", str(db), session)
    assert proc.stdout is not None
    printed: list[str] = []
    try:
        while len(printed) < wanted:
            line = await trio.to_thread.run_sync(proc.stdout.readline)
            assert line, f"the worker on {session} stopped early (exit {proc.poll()})"
            printed.append(line.strip())
        await trio.sleep(pause)
        proc.send_signal(signal.SIGKILL)
        rest = await trio.to_thread.run_sync(proc.stdout.read)  # printed before it died
        printed += rest.split()
    finally:
        proc.kill()
        await trio.to_thread.run_sync(proc.wait)
        proc.stdout.close()
    return printed


def stored_rows(db: Path) -> list[tuple[str, Event]]:
    """(session id, event) for every stored event in commit order; each row must parse."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT session_id, body FROM events ORDER BY seq").fetchall()
    return [(session, Event.from_json(body)) for session, body in rows]


def fold(rows: list[tuple[str, Event]], session: str) -> dict[str, Any]:
    """The merged state ``session`` must have: its own keys from its own events, ``app:`` and
    ``user:`` keys from every session's events, in commit order."""
    state: dict[str, Any] = {}
    for owner, event in rows:
        for key, value in event.actions.state_delta.items():
            assert not key.startswith("temp:"), f"a temp: key was stored: {key}"
            if owner == session or key.startswith(("app:", "user:")):
                state[key] = value
    return state


def check_sequences(events: list[Event]) -> None:
    """Each agent emitted 1, 2, 3… per invocation, awaiting each commit: no hole may be stored."""
    seen: dict[tuple[str, str], list[int]] = {}
    for event in events:
        seq = (event.custom_metadata or {}).get("seq")
        if seq is not None:
            seen.setdefault((event.author, event.invocation_id), []).append(seq)
    for key, seqs in seen.items():
        assert seqs == list(range(1, len(seqs) + 1)), f"{key}: {seqs}"


def open_calls(events: list[Event], *, long_running: bool) -> list[str | None]:
    """Calls without a response, in order; long-running ones only if asked for."""
    answered = {r.id for e in events for r in e.get_function_responses()}
    waiting: list[str | None] = []
    for event in events:
        slow = event.long_running_tool_ids or frozenset()
        for call in event.get_function_calls():
            if call.id not in answered and (long_running or call.id not in slow):
                waiting.append(call.id)
    return waiting


class Quiet(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await trio.lowlevel.checkpoint()


async def check_and_repair(db: Path, printed: dict[str, list[str]]) -> None:
    rows = stored_rows(db)
    async with SqliteSessionService(db) as service:
        for session in SESSIONS:
            stored = await service.get_session(app_name="app", user_id="u", session_id=session)
            assert stored is not None
            events = list(stored.events)
            assert events == [e for owner, e in rows if owner == session]
            assert set(printed[session]) <= {e.id for e in events}
            assert stored.revision == len(events)
            assert stored.state == fold(rows, session)
            check_sequences(events)

            left_open = open_calls(events, long_running=False)
            runner = Runner(
                agent=Quiet(name="quiet"),
                app_name="app",
                session_service=service,
                concurrent_runs="reject",  # the dead worker's lease died with it: no waiting
            )
            async with runner.run(user_id="u", session_id=session, new_message="next") as stream:
                async for _ in stream:
                    pass
            after = await service.get_session(app_name="app", user_id="u", session_id=session)
            assert after is not None
            repaired = list(after.events)
            assert open_calls(repaired, long_running=False) == []
            closing = [
                r
                for e in repaired[len(events) :]
                for r in e.get_function_responses()
                if r.response.get("reason") == ABANDONED_REASON
            ]
            assert sorted(map(str, (r.id for r in closing))) == sorted(map(str, left_open))
            assert all(r.response.get("error") == "cancelled" for r in closing)
            waiting = set(open_calls(events, long_running=True)) - set(left_open)
            assert set(open_calls(repaired, long_running=True)) == waiting  # R-LRO: the client
            # answers long-running calls, so they stay open


@pytest.mark.parametrize("seed", range(3))
async def test_sigkilled_runners_lose_nothing_and_the_next_run_repairs_the_history(
    tmp_path: Path, seed: int
) -> None:
    db = tmp_path / "crash.db"
    async with SqliteSessionService(db) as service:
        for session in SESSIONS:
            await service.create_session(app_name="app", user_id="u", session_id=session)
    rng = random.Random(seed)
    total = 0
    for _ in range(2):
        printed: dict[str, list[str]] = {}

        async def one(session: str, printed: dict[str, list[str]]) -> None:
            printed[session] = await run_and_kill(db, session, rng)

        async with trio.open_nursery() as nursery:
            for session in SESSIONS:
                nursery.start_soon(one, session, printed)
        await check_and_repair(db, printed)
        total += sum(map(len, printed.values()))
    assert total > 0  # the kills did land inside runs
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
