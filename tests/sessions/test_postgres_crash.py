"""Crash safety on PostgreSQL (issue 7 item 4): a real runner process, SIGKILLed again and again.

The worker (``tests/sessions/pg_worker.py crash``) runs a multi-agent app on session ``s``: a
loop over three parallel leaves, each calling a tool (a call event, then its response) and
writing session, ``user:`` and ``app:`` state with values that change every step. Its consumer
prints the id of every event it receives. After each kill the store must hold every printed
event, state must equal the fold of the stored deltas, the revision must count the stored rows
(no half-written event), and the next run must first answer the calls the dead one left open,
with ``cancelled`` responses, before anything of its own.
"""

from __future__ import annotations

import itertools
import random
import signal
from typing import Any

import pytest
import trio

from tests.pg_cluster import ensure_cluster
from tests.sessions.pg_worker import read_line, spawn
from trio_agents import BaseAgent, Event, InvocationContext, Runner
from trio_agents._runner import ABANDONED_REASON
from trio_agents.sessions import PostgresSessionService

KEY: dict[str, Any] = {"app_name": "app", "user_id": "u", "session_id": "s"}
WORKER = "trio_agents_crash_worker"


async def _kill_after(dsn: str, lines: int, delay: float | None) -> list[str]:
    """Run a worker, SIGKILL it ``delay`` s after it printed ``lines`` ids (``delay=None``: at
    once after the next call it prints, so that call is still open); the printed ids."""
    printed: list[str] = []
    with spawn("crash", f"{dsn} application_name={WORKER}") as proc:
        while True:
            line = (await read_line(proc)).split()
            assert line, "the worker stopped early"
            printed.append(line[0])
            if len(printed) >= lines and (delay is not None or line[1] == "call"):
                break
        await trio.sleep(delay or 0)  # lands anywhere: between appends, or inside one
        proc.send_signal(signal.SIGKILL)
    return printed


async def _settle(service: PostgresSessionService) -> None:
    """Wait until the server has ended the dead worker's sessions: a COMMIT it sent just before
    dying lands before we look, and nothing of it lands after."""

    def alive(conn: Any) -> int:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        return int(conn.execute(query, (WORKER,)).fetchone()[0])

    with trio.fail_after(10):
        while True:  # polling another system: no event to wait for
            if not await service._run(alive):
                return
            await trio.sleep(0.01)


def _fold(events: list[Event]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for event in events:
        state.update(event.actions.state_delta)
    return state


def _open_calls(events: list[Event]) -> dict[str | None, str]:
    """Calls without a response: call id -> invocation id."""
    waiting: dict[str | None, str] = {}
    for event in events:
        waiting.update((c.id, event.invocation_id) for c in event.get_function_calls())
        for response in event.get_function_responses():
            waiting.pop(response.id, None)
    return waiting


def _abandoned(events: list[Event]) -> list[str | None]:
    return [
        r.id
        for e in events
        for r in e.get_function_responses()
        if r.response == {"error": "cancelled", "reason": ABANDONED_REASON}
    ]


async def _stored(service: PostgresSessionService) -> tuple[list[Event], dict[str, Any]]:
    session = await service.get_session(**KEY)
    assert session is not None
    events = list(session.events)
    rows = await service._run(
        lambda conn: conn.execute(
            "SELECT count(*) FROM trio_agents_events WHERE session_id = 's'"
        ).fetchone()[0]
    )
    assert session.revision == len(events) == rows  # every row counted, none half-written
    assert len({e.id for e in events}) == len(events)
    return events, session.state


def _check_closed_first(before: list[Event], after: list[Event]) -> None:
    """The run after a kill answered every call left open before doing anything else."""
    left_open = _open_calls(before)
    new = after[len(before) :]
    assert after[: len(before)] == before  # history is append-only
    closing = list(itertools.takewhile(lambda e: e.invocation_id == before[-1].invocation_id, new))
    assert sorted(map(str, _abandoned(closing))) == sorted(map(str, left_open))
    assert not _abandoned(new[len(closing) :])  # nothing else was closed as abandoned


@pytest.mark.parametrize("seed", range(2))
async def test_sigkill_again_and_again_loses_nothing_and_the_next_run_closes_open_calls(
    seed: int,
) -> None:
    dsn = await trio.to_thread.run_sync(ensure_cluster)
    rng = random.Random(seed)
    async with PostgresSessionService(dsn) as service:
        await service.create_session(**KEY)
        before: list[Event] = []
        kills_with_open_calls = 0
        for delay in rng.sample([None, None, 0, rng.random() / 100], 4):
            printed = await _kill_after(dsn, rng.randint(1, 40), delay)
            await _settle(service)
            events, state = await _stored(service)
            assert set(printed) <= {e.id for e in events}  # what the consumer saw is stored
            assert state == _fold(events)  # session, user: and app: state in step with deltas
            if before:
                _check_closed_first(before, events)
            open_calls = _open_calls(events)
            assert set(open_calls.values()) <= {events[-1].invocation_id}
            kills_with_open_calls += bool(open_calls)
            before = events
        runner = Runner(
            agent=_Quiet(name="quiet"),
            app_name="app",
            session_service=service,
            concurrent_runs="queue",
        )
        async with runner.run(user_id="u", session_id="s", new_message="again") as stream:
            async for _ in stream:
                pass
        after, _ = await _stored(service)
    assert kills_with_open_calls  # the closing check above was not vacuous
    _check_closed_first(before, after)
    assert _open_calls(after) == {}


class _Quiet(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await trio.lowlevel.checkpoint()
