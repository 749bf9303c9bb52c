"""A separate process for the store tests: ``python -m tests.sessions.store_worker MODE STORE``.

``STORE`` is a SQLite file path, or a PostgreSQL DSN (``host=...``).

``hold``: take the lease of session ``s`` and keep it until standard input closes.
``run``: run a multi-agent app on session ``s`` forever-ish, printing each received event id.
"""

from __future__ import annotations

import sys

import trio

from tests.apps import Probe, ScriptAgent
from trio_agents import LoopAgent, ParallelAgent, Runner, SequentialAgent
from trio_agents.sessions import PostgresSessionService, SessionService, SqliteSessionService


def open_store(store: str) -> SessionService:
    if store.startswith("host="):
        return PostgresSessionService(store)
    return SqliteSessionService(store, lease_seconds=0.5)


async def hold(path: str) -> None:
    service = open_store(path)
    async with service, service.lease(app_name="app", user_id="u", session_id="s"):
        print("held", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


def app() -> SequentialAgent:
    probe = Probe()
    steps = ("emit", "call", "emit", "partial", "emit", "call", "sleep")
    leaves = [ScriptAgent(name=f"leaf{i}", script=steps, probe=probe) for i in range(3)]
    return SequentialAgent(
        name="root",
        sub_agents=[
            LoopAgent(
                name="loop",
                max_iterations=1000,
                sub_agents=[ParallelAgent(name="fan", sub_agents=leaves)],
            )
        ],
    )


async def run(path: str) -> None:
    async with open_store(path) as service:  # type: ignore[attr-defined]
        runner = Runner(agent=app(), app_name="app", session_service=service)
        async with runner.run(user_id="u", session_id="s", new_message="go") as events:
            async for event in events:
                if not event.partial:
                    print(event.id, flush=True)


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    trio.run(hold if mode == "hold" else run, path)
