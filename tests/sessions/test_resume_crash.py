"""Resuming across processes that die: real workers SIGKILLed on SQLite and PostgreSQL.

A worker (``tests/sessions/resume_worker.py``) runs a resumable app (an LLM agent calling an
ordinary tool then a long-running approval, a parallel pair of such agents, a last agent calling
the ordinary tool then a refund that needs the user's confirmation) on a durable store; every
tool execution appends a fsynced line to a log. A first process starts the invocation and is
killed once it reports the pause is stored; then new processes resume it with
``run(invocation_id=...)`` and are killed at seeded random points (after a number of received
events, or from inside the k-th tool execution) until one finishes. After every kill the store
is read again, and at the end:

- every event committed before a kill is still there, in order (the final history starts with it);
- no tool whose result was committed ran again (the log, by process, against the results stored
  at each kill; a confirmed call's provisional response is no result), and no long-running call
  ran twice;
- the final history equals an uninterrupted run's, ids and timestamps dropped, the runtime's
  closing responses dropped, parallel branches compared branch by branch;
- the user's message and each answer are stored once.

Two processes resuming the same invocation at once: one runs it, the other gets
``SessionBusyError``. The seed of each case is its test id; ``RESUME_CRASH_SEEDS=N`` runs N
seeds per store.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.pg_cluster import ensure_cluster
from tests.sessions.resume_worker import KEY, ToolLog, build_app, drive, open_store, run_once
from trio_agents import Event, Runner
from trio_agents._aftermath import is_closing_response
from trio_agents.sessions import InMemorySessionService, PostgresSessionService

ROOT = Path(__file__).resolve().parents[2]
KILLS = 3
"""Kills during the resumed part per case (the process after the last kill runs to the end)."""
SEEDS = int(os.environ.get("RESUME_CRASH_SEEDS", "2"))
"""Seeded cases per store (``RESUME_CRASH_SEEDS=50`` for a longer hunt)."""

_names = itertools.count()


class Store:
    """A durable store the workers share: its spec, and a way to wait out a dead worker."""

    def __init__(self, spec: str, application: str | None = None) -> None:
        self.spec = spec
        """What the test process opens."""
        self.application = application
        self.worker_spec = spec if application is None else f"{spec} application_name={application}"
        """What the workers open: on PostgreSQL, their connections carry a name to wait on."""

    async def settle(self) -> None:
        """On PostgreSQL, wait until the server has ended the killed worker's connections: its
        last COMMIT lands before we look, and its advisory lock is released."""
        if self.application is None:
            return  # SQLite: the kernel drops a dead process's file lock at once
        name = self.application

        def alive(conn: Any) -> int:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            return int(conn.execute(query, (name,)).fetchone()[0])

        async with open_store(self.spec) as service:
            assert isinstance(service, PostgresSessionService)
            with trio.fail_after(10):
                while True:  # polling another system: no event to wait for
                    if not await service._run(alive):
                        return
                    await trio.sleep(0.01)

    async def events(self) -> list[Event]:
        """The session's history, read by a fresh service (nothing cached)."""
        async with open_store(self.spec) as service:
            session = await service.get_session(**KEY)
        assert session is not None
        return list(session.events)


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        made = Store(f"sqlite:{tmp_path / 'resume.db'}")
    else:
        dsn = await trio.to_thread.run_sync(ensure_cluster)
        name = f"trio_agents_resume_{next(_names)}"
        made = Store(f"pg:{dsn}", name)
    async with open_store(made.spec) as service:
        await service.create_session(**KEY)
    return made


class Worker:
    """A worker process; its standard output read line by line."""

    def __init__(self, store: Store, log: Path, mode: str, attempt: int, *extra: str) -> None:
        args = [
            "-m",
            "tests.sessions.resume_worker",
            mode,
            store.worker_spec,
            str(log),
            str(attempt),
        ]
        self.proc = subprocess.Popen(
            [sys.executable, *args, *extra],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    async def line(self) -> list[str]:
        """The next line's words ([] once the process has ended); a worker silent for a minute
        fails the test (and is killed by :meth:`reap`)."""
        assert self.proc.stdout is not None
        with trio.fail_after(60):
            text = await trio.to_thread.run_sync(self.proc.stdout.readline, abandon_on_cancel=True)
        return text.split()

    async def reap(self) -> int:
        """Kill the process if it still runs and wait for it; its exit status."""
        self.proc.kill()
        status = await trio.to_thread.run_sync(self.proc.wait)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        return status


# -- what is compared --------------------------------------------------------------------------


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def shape(event: Event) -> dict[str, Any]:
    """Author, branch, content and actions; ids (call ids too) and timestamps dropped."""
    data = json.loads(event.to_json())
    for key in ("invocationId", "timestamp"):
        data.pop(key)
    data["longRunningToolIds"] = len(data.get("longRunningToolIds", ()))
    confirmations = data["actions"].get("requestedToolConfirmations")
    if confirmations:  # keyed by call id: the requests alone
        data["actions"]["requestedToolConfirmations"] = list(confirmations.values())
    shaped: dict[str, Any] = _without_ids(data)
    return shaped


def closes(event: Event) -> bool:
    """Whether the event only holds the runtime's closing responses."""
    responses = event.get_function_responses()
    return bool(responses) and all(is_closing_response(r) for r in responses)


def by_branch(events: list[Event]) -> dict[str | None, list[dict[str, Any]]]:
    """The shapes of ``events`` per branch, closing responses dropped."""
    grouped: dict[str | None, list[dict[str, Any]]] = {}
    for event in events:
        if not closes(event):
            grouped.setdefault(event.branch, []).append(shape(event))
    return grouped


def tool_results(events: list[Event]) -> set[str]:
    """Call ids with a committed tool result: the runtime's closing responses are none, nor is
    the provisional response of a call that waits for the user's confirmation."""
    return {
        r.id
        for e in events
        if e.author != "user"
        for r in e.get_function_responses()
        if r.id
        and not is_closing_response(r)
        and r.id not in e.actions.requested_tool_confirmations
    }


def log_lines(log: Path) -> list[tuple[int, str, str]]:
    """(attempt, tool, call id) per tool execution."""
    if not log.exists():
        return []
    return [(int(a), t, c) for a, t, c in (line.split() for line in log.read_text().splitlines())]


async def uninterrupted(tmp_path: Path) -> list[Event]:
    """The history of the same invocation driven to its end in one process, in memory."""
    service = InMemorySessionService()
    await service.create_session(**KEY)
    runner = Runner(
        app=build_app(ToolLog(str(tmp_path / "reference.log"), 0)), session_service=service
    )
    invocation, paused = await run_once(runner, "go", None, lambda e: None)
    assert paused
    await drive(runner, invocation, lambda e: None)
    session = await service.get_session(**KEY)
    assert session is not None
    return list(session.events)


# -- one case: start, kill after the pause, resume and kill, resume to the end -----------------


class Case:
    """The kills of one seeded case and what the store held after each."""

    def __init__(self, store: Store, log: Path, rng: random.Random) -> None:
        self.store = store
        self.log = log
        self.rng = rng
        self.snapshots: list[list[Event]] = []
        """The stored history after attempt 0, 1, 2, ... ended."""
        self.invocation = ""

    async def start(self) -> None:
        """Attempt 0 runs until the pause is stored; then it is killed."""
        worker = Worker(self.store, self.log, "start", 0)
        printed = set()
        try:
            while (words := await worker.line())[:1] != ["paused"]:
                assert words, "the starting worker ended before it paused"
                printed.add(words[1])
            self.invocation = words[1]
            worker.proc.send_signal(signal.SIGKILL)
        finally:
            assert await worker.reap() == -signal.SIGKILL
        await self.snapshot(printed)

    async def resume(self, attempt: int, *, kill: bool, die_in_tool: int = 0) -> bool:
        """One resuming process, killed at a random point if ``kill`` (inside its
        ``die_in_tool``-th tool execution if given); whether it finished."""
        extra: list[str] = [self.invocation]
        after_events = None
        if kill and (die_in_tool or self.rng.random() < 0.5):
            extra += ["--die-in-tool", str(die_in_tool or self.rng.randint(1, 6))]
        elif kill:
            after_events = self.rng.randint(1, 12)
        worker = Worker(self.store, self.log, "drive", attempt, *extra)
        finished, printed = False, set()
        try:
            while words := await worker.line():
                if words == ["finished"]:
                    finished = True
                    break
                printed.add(words[1])
                if len(printed) == after_events:
                    await trio.sleep(self.rng.uniform(0, 0.01))  # lands anywhere after it
                    worker.proc.send_signal(signal.SIGKILL)
                    break
        finally:
            status = await worker.reap()
        assert finished or status == -signal.SIGKILL, f"attempt {attempt} failed ({status})"
        await self.store.settle()
        await self.snapshot(printed)
        return finished

    async def snapshot(self, printed: set[str]) -> None:
        """Read the store after a process ended: what its consumer received was committed, and
        what was committed before is still there, in order."""
        events = await self.store.events()
        assert printed <= {e.id for e in events}, "an event the consumer received is not stored"
        if self.snapshots:
            before = self.snapshots[-1]
            assert events[: len(before)] == before, "a committed event was lost or moved"
        self.snapshots.append(events)

    def check_tools_ran_once(self) -> None:
        """No execution by a process started after a tool's result was stored; every
        long-running call executed at most once; every stored result came from an execution."""
        committed_by: dict[str, int] = {}
        for attempt, events in enumerate(self.snapshots):
            for call_id in tool_results(events):
                committed_by.setdefault(call_id, attempt)
        lines = log_lines(self.log)
        for attempt, tool, call_id in lines:
            stored = committed_by.get(call_id)
            assert stored is None or attempt <= stored, (
                f"{tool} {call_id} ran in attempt {attempt}; its result was stored by {stored}"
            )
        approvals = [c for _, t, c in lines if t == "approve"]
        assert len(approvals) == len(set(approvals)), "a long-running call ran twice"
        assert set(committed_by) <= {c for _, _, c in lines}


def same_as(final: list[Event], reference: list[Event]) -> None:
    """``final`` equals ``reference`` branch by branch; a difference names its first event."""
    got, want = by_branch(final), by_branch(reference)
    assert got.keys() == want.keys()
    for branch, events in want.items():
        for index, (mine, theirs) in enumerate(zip(got[branch], events, strict=False)):
            assert mine == theirs, f"branch {branch}, event {index}:\n{mine}\n!=\n{theirs}"
        assert len(got[branch]) == len(events), f"branch {branch}: {got[branch][len(events) :]}"


def provisional(event: Event) -> bool:
    """Whether the event is the provisional response of a call that asks for confirmation."""
    return bool(event.actions.requested_tool_confirmations)


def without_lost_provisional(final: list[Event], reference: list[Event]) -> list[Event]:
    """``reference``, less its provisional response if ``final`` has none.

    A confirmation request is committed before the provisional response of its call; a process
    killed between the two leaves the call without a response, and the next run closes it
    (a closing response, not compared) before the user confirms it. Then the final history has
    no provisional response, and the call it confirmed must have been closed.
    """
    if any(map(provisional, final)):
        return reference
    confirmed = {
        call.args["originalFunctionCall"]["id"]
        for event in final
        for call in event.get_function_calls()
        if call.name == "adk_request_confirmation"
    }
    closed = {r.id for e in final if closes(e) for r in e.get_function_responses()}
    assert confirmed and confirmed <= closed, "a provisional response was lost, its call not closed"
    return [e for e in reference if not provisional(e)]


def check_final(final: list[Event], reference: list[Event], invocation: str) -> None:
    assert {e.invocation_id for e in final} == {invocation}
    same_as(final, without_lost_provisional(final, reference))
    openings = [e for e in final if e.author == "user" and e.content and e.text == "go"]
    assert len(openings) == 1, "the user message was stored more than once"
    answers = [r.id for e in final if e.author == "user" for r in e.get_function_responses()]
    assert len(answers) == len(set(answers)) == 4, "an answer was stored twice (or missing)"


async def crash_and_resume(store: Store, tmp_path: Path, seed: int, kills: int) -> None:
    """Start, kill after the pause, resume ``kills`` times killed at random, resume to the end;
    then check everything the module's docstring lists."""
    reference = await uninterrupted(tmp_path)
    case = Case(store, tmp_path / "tools.log", random.Random(seed))
    await case.start()
    paused = case.snapshots[0]
    assert paused[-1].long_running_tool_ids, "attempt 0 was killed after its pause was stored"
    attempt, finished = 0, False
    while not finished:
        attempt += 1
        assert attempt <= kills + 1
        finished = await case.resume(attempt, kill=attempt <= kills)
    assert (attempt > 1) == (kills > 0), "a kill did not land in the resumed part"
    final = case.snapshots[-1]
    for snapshot in case.snapshots:
        assert final[: len(snapshot)] == snapshot
    case.check_tools_ran_once()
    check_final(final, reference, case.invocation)


async def test_a_confirmed_call_killed_inside_its_tool_runs_again_then_never_after(
    store: Store, tmp_path: Path
) -> None:
    """The resumed part runs six tools; the sixth is the refund, confirmed before it runs."""
    reference = await uninterrupted(tmp_path)
    case = Case(store, tmp_path / "tools.log", random.Random(0))
    await case.start()
    assert not await case.resume(1, kill=True, die_in_tool=6)
    assert [t for _, t, _ in log_lines(case.log)][-1] == "refund"
    assert await case.resume(2, kill=False)
    refunds = [(a, c) for a, t, c in log_lines(case.log) if t == "refund"]
    assert [a for a, _ in refunds] == [1, 2] and refunds[0][1] == refunds[1][1]
    case.check_tools_ran_once()
    final = case.snapshots[-1]
    check_final(final, reference, case.invocation)
    results = [dict(r.response) for e in final for r in e.get_function_responses()]
    assert {"refunded": 50, "confirmed": True} in results  # it ran again with its confirmation


async def test_sigkill_after_the_pause_then_a_new_process_answers_and_finishes(
    store: Store, tmp_path: Path
) -> None:
    await crash_and_resume(store, tmp_path, seed=0, kills=0)


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_sigkill_at_random_points_of_the_resumed_part_loses_and_repeats_nothing(
    store: Store, tmp_path: Path, seed: int
) -> None:
    await crash_and_resume(store, tmp_path, seed, kills=KILLS)


async def test_two_processes_resuming_one_invocation_one_runs_the_other_is_busy(
    store: Store, tmp_path: Path
) -> None:
    reference = await uninterrupted(tmp_path)
    case = Case(store, tmp_path / "tools.log", random.Random(0))
    await case.start()
    holder = Worker(store, case.log, "drive", 1, case.invocation, "--hold")
    try:
        while (words := await holder.line()) != ["held"]:
            assert words, "the resuming worker ended before its first tool ran"
        other = Worker(store, case.log, "try", 2, case.invocation)
        try:
            assert await other.line() == ["busy"]
            assert await other.line() == []
        finally:
            assert await other.reap() == 0
        assert holder.proc.stdin is not None
        holder.proc.stdin.close()
        while (words := await holder.line()) != ["finished"]:
            assert words, "the resuming worker ended without finishing"
    finally:
        await holder.reap()
    final = await store.events()
    assert final[: len(case.snapshots[0])] == case.snapshots[0]
    check_final(final, reference, case.invocation)
    calls = [c for _, _, c in log_lines(case.log)]
    assert len(calls) == len(set(calls)) == 8  # every tool call ran once, all by one process
    assert {a for a, _, _ in log_lines(case.log)} == {0, 1}


@pytest.mark.xfail(
    strict=True,
    reason="a long-running call committed before its tool ran (the process died in between) "
    "is never run on resume: it is taken as waiting for the client, so the operation it starts "
    "never starts and the invocation waits for an answer nobody was asked for",
)
async def test_a_long_running_call_whose_tool_never_ran_runs_when_resumed(
    store: Store, tmp_path: Path
) -> None:
    log = tmp_path / "tools.log"
    starter = Worker(store, log, "start", 0, "--die-before", "approve")
    try:
        while await starter.line():
            pass
    finally:
        assert await starter.reap() == -signal.SIGKILL
    await store.settle()
    events = await store.events()
    (call,) = [c for e in events for c in e.get_function_calls() if c.name == "approve"]
    assert set(events[-1].long_running_tool_ids or ()) == {call.id}  # the call is committed...
    assert call.id not in {c for _, _, c in log_lines(log)}  # ... and its tool never ran
    resumer = Worker(store, log, "try", 1, events[0].invocation_id)
    try:
        while (words := await resumer.line())[:1] == ["event"]:
            pass
        assert words == ["ran"]
        assert await resumer.line() == []
    finally:
        assert await resumer.reap() == 0
    assert call.id in {c for _, t, c in log_lines(log) if t == "approve"}


async def _to_the_end(worker: Worker) -> list[list[str]]:
    """Every line the worker prints until it ends."""
    lines = []
    while words := await worker.line():
        lines.append(words)
    return lines


def _answers_to(events: list[Event], call_id: str | None) -> int:
    return sum(
        r.id == call_id for e in events if e.author == "user" for r in e.get_function_responses()
    )


async def test_an_answer_sent_again_after_a_crash_is_not_stored_twice(
    store: Store, tmp_path: Path
) -> None:
    case = Case(store, tmp_path / "tools.log", random.Random(0))
    await case.start()
    # The answer is stored, the first agent ends, the process dies in the next tool it runs.
    crashed = Worker(store, case.log, "drive", 1, case.invocation, "--die-in-tool", "1")
    try:
        await _to_the_end(crashed)
    finally:
        assert await crashed.reap() == -signal.SIGKILL
    await store.settle()
    events = await store.events()
    (call,) = [c for e in events if e.author == "first" for c in e.get_function_calls()][1:]
    assert call.name == "approve" and _answers_to(events, call.id) == 1
    retry = Worker(store, case.log, "again", 2, case.invocation)
    try:
        assert (await _to_the_end(retry))[-1] in (["refused"], ["ran"])
    finally:
        assert await retry.reap() == 0
    assert _answers_to(await store.events(), call.id) == 1
