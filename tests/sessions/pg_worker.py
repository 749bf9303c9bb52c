"""A separate process for the PostgreSQL cross-process and crash tests.

``python -m tests.sessions.pg_worker MODE DSN`` (session ``s`` of user ``u`` of app ``app``):

``hold``: run an invocation that commits one event, prints ``held``, waits until standard input
    closes, commits a last event and ends (printing ``done``).
``crash``: run a multi-agent app until killed: a loop over three parallel leaves, each calling a
    tool (the call, an open window of :data:`CALL_OPEN` seconds, the response) and writing session,
    ``user:`` and ``app:`` state whose values change every step. The consumer prints
    ``<event id> call`` or ``<event id> -`` for every event it receives (partial ones excepted).
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import trio

from trio_agents import (
    BaseAgent,
    Content,
    Event,
    EventActions,
    InvocationContext,
    LoopAgent,
    ParallelAgent,
    Part,
    Runner,
    SequentialAgent,
)
from trio_agents.sessions import PostgresSessionService

CALL_OPEN = 0.05
ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def spawn(mode: str, dsn: str) -> Iterator[subprocess.Popen[str]]:
    """A worker process in ``mode``, killed and reaped at the end."""
    with subprocess.Popen(
        [sys.executable, "-m", "tests.sessions.pg_worker", mode, dsn],
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
    """The worker's next line ("" once it has ended)."""
    assert proc.stdout is not None
    return (await trio.to_thread.run_sync(proc.stdout.readline)).strip()


class Holder(BaseAgent):
    """Commits an event, then holds the run until standard input closes."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(actions=EventActions(state_delta={"held": True})))
        print("held", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        await ctx.emit(Event(actions=EventActions(state_delta={"held": False})))


class Caller(BaseAgent):
    """Calls a tool (call ids unique across processes), answers it, then writes state."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        step = f"{self.name}-{secrets.token_hex(4)}"
        call = Part.from_function_call("tool", {"step": step}, id=f"call-{step}")
        await ctx.emit(Event(content=Content(role="model", parts=[call])))
        await trio.sleep(CALL_OPEN)
        answer = Part.from_function_response("tool", {"ok": step}, id=f"call-{step}")
        await ctx.emit(Event(content=Content(role="user", parts=[answer])))
        delta = {self.name: step, "user:last": step, f"app:{self.name}": step}
        await ctx.emit(Event(actions=EventActions(state_delta=delta)))


def crash_app() -> SequentialAgent:
    fan = ParallelAgent(name="fan", sub_agents=[Caller(name=f"leaf{i}") for i in range(3)])
    return SequentialAgent(
        name="root", sub_agents=[LoopAgent(name="loop", max_iterations=10_000, sub_agents=[fan])]
    )


async def main(mode: str, dsn: str) -> None:
    agent = Holder(name="holder") if mode == "hold" else crash_app()
    async with PostgresSessionService(dsn) as service:
        runner = Runner(
            agent=agent, app_name="app", session_service=service, concurrent_runs="queue"
        )
        async with runner.run(user_id="u", session_id="s", new_message=mode) as events:
            async for event in events:
                if mode == "crash" and not event.partial:
                    kind = "call" if event.get_function_calls() else "-"
                    print(event.id, kind, flush=True)
    if mode == "hold":
        print("done", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
