"""A separate process for the SQLite cross-process and crash tests.

``python -m tests.sessions.sqlite_worker MODE DB SESSION`` (user ``u`` of app ``app``):

``hold``: run an invocation that commits one event, prints ``held``, waits until standard input
    closes, commits a last event and ends (printing ``done``).
``try``: run an invocation with ``concurrent_runs="reject"``; print ``busy`` or ``ran``.
``queue``: print ``busy`` if the session is leased right now, then run an invocation with
    ``concurrent_runs="queue"`` and print ``ran``.
``crash``: run a multi-agent app on the session until killed (invocation after invocation: a
    long-running call pauses one), printing the id of every event its consumer receives
    (partial events excepted), one per line, flushed.
"""

from __future__ import annotations

import sys
from typing import Any

import attrs
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
    SessionBusyError,
)
from trio_agents.sessions import SqliteSessionService

SEQUENCES: dict[tuple[str, str], int] = {}
"""(agent, invocation) -> how many events that agent emitted in that invocation so far."""


async def emit(ctx: InvocationContext, event: Event) -> Event:
    """Emit; committed events carry ``custom_metadata.seq``: 1, 2, 3… per agent and invocation,
    so a hole in the stored sequence is a lost event."""
    if event.partial:
        return await ctx.emit(event)
    key = (ctx.agent.name, ctx.invocation_id)
    SEQUENCES[key] = seq = SEQUENCES.get(key, 0) + 1
    return await ctx.emit(attrs.evolve(event, custom_metadata={"seq": seq}))


class Writer(BaseAgent):
    """Each run: a delta in every scope (``temp:`` too), a partial event, a call answered after a
    checkpoint, and every third run a long-running call nobody answers."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        i = int(ctx.session.state.get(f"n_{self.name}", 0)) + 1
        delta = {
            f"n_{self.name}": i,
            "app:last": f"{self.name}-{i}",
            f"user:{self.name}": i,
            "temp:scratch": i,
        }
        await emit(ctx, Event(actions=EventActions(state_delta=delta)))
        await emit(ctx, Event(partial=True, content=Content.from_text(f"{self.name} thinking")))
        call_id = f"{self.name}-{ctx.invocation_id}-{i}"
        call = Part.from_function_call("tool", {"i": i}, id=call_id)
        await emit(ctx, Event(content=Content(role="model", parts=[call])))
        await trio.lowlevel.checkpoint()
        answer = Part.from_function_response("tool", {"ok": i}, id=call_id)
        await emit(ctx, Event(content=Content(role="user", parts=[answer])))
        if i % 3 == 0:
            slow = Part.from_function_call("slow_tool", {}, id=f"lro-{call_id}")
            content = Content(role="model", parts=[slow])
            await emit(ctx, Event(content=content, long_running_tool_ids={f"lro-{call_id}"}))


class Holder(BaseAgent):
    """Commits an event, says ``held``, waits for standard input to close, commits another."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(content=Content.from_text("first")))
        print("held", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        await ctx.emit(Event(content=Content.from_text("last")))


class Once(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(content=Content.from_text("once")))


def crash_app() -> BaseAgent:
    return SequentialAgent(
        name="root",
        sub_agents=[
            LoopAgent(
                name="loop",
                max_iterations=1_000_000,
                sub_agents=[
                    ParallelAgent(name="fan", sub_agents=[Writer(name="w0"), Writer(name="w1")]),
                    Writer(name="w2"),
                ],
            )
        ],
    )


async def run(
    service: SqliteSessionService, agent: BaseAgent, session: str, *, echo: bool = False, **kw: Any
) -> None:
    runner = Runner(agent=agent, app_name="app", session_service=service, **kw)
    async with runner.run(user_id="u", session_id=session, new_message="go") as events:
        async for event in events:
            if echo and not event.partial:
                print(event.id, flush=True)


async def main(mode: str, db: str, session: str) -> None:
    async with SqliteSessionService(db) as service:
        if mode == "hold":
            await run(service, Holder(name="holder"), session)
            print("done", flush=True)
        elif mode == "try":
            try:
                await run(service, Once(name="once"), session)
            except SessionBusyError:
                print("busy", flush=True)
            else:
                print("ran", flush=True)
        elif mode == "queue":
            try:
                async with service.lease(app_name="app", user_id="u", session_id=session):
                    pass
            except SessionBusyError:
                print("busy", flush=True)
            await run(service, Once(name="once"), session, concurrent_runs="queue")
            print("ran", flush=True)
        elif mode == "crash":
            while True:  # a long-running call pauses an invocation: the next one goes on
                await run(service, crash_app(), session, echo=True)
        else:
            raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:4])
