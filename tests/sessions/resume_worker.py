"""A separate process for the resume crash tests: a resumable app, driven until killed or done.

``python -m tests.sessions.resume_worker MODE STORE LOG ATTEMPT [INVOCATION] [--die-in-tool K]
[--hold]`` on session ``s`` of user ``u`` of app ``shop``. ``STORE`` is ``sqlite:<path>`` or
``pg:<dsn>``; every tool execution appends ``ATTEMPT tool call-id`` to ``LOG`` (flushed and
fsynced) before it returns.

``start``: run a new invocation (message ``go``) printing ``event <id>`` for every event the
    consumer receives; once it paused, print ``paused <invocation id>`` and wait for standard
    input to close (the test kills it there).
``drive``: resume ``INVOCATION`` until it finishes: each run answers the first open
    long-running call (by its author's name), or resumes without a message when none is open;
    print ``event <id>`` per event and ``finished`` at the end. ``--die-in-tool K``: the K-th
    tool execution of this process logs, then SIGKILLs its own process. ``--hold``: the first
    tool execution prints ``held`` and waits for standard input to close. ``--die-before
    TOOL`` (any mode): SIGKILL the process when that tool is about to run.
``try``: resume ``INVOCATION`` once without a message; print ``busy`` on ``SessionBusyError``,
    else ``ran``.
``again``: send the answer to the invocation's first approval call once more (a client retrying
    after a crash); print ``refused`` on ``ResumeError``, else ``ran``.

The app is a sequence of an LLM agent calling an ordinary tool then a long-running approval, a
parallel pair of such agents, and a last agent calling the ordinary tool then a refund tool
that needs the user's confirmation. The scripted models
answer from the request alone, so every process makes the same decisions.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from trio_agents import (
    App,
    Content,
    Event,
    FunctionCall,
    LlmAgent,
    ParallelAgent,
    Part,
    ResumabilityConfig,
    ResumeError,
    Runner,
    SequentialAgent,
    SessionBusyError,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.sessions import PostgresSessionService, SessionService, SqliteSessionService
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool, ToolContext

REQUEST_CONFIRMATION = "adk_request_confirmation"
KEY: dict[str, Any] = {"app_name": "shop", "user_id": "u", "session_id": "s"}


class ToolLog:
    """Appends one line per tool execution to a file, durably, before the tool returns."""

    def __init__(
        self,
        path: str,
        attempt: int,
        die_in_tool: int = 0,
        hold: bool = False,
        die_before: str | None = None,
    ):
        self.path = path
        self.attempt = attempt
        self.die_in_tool = die_in_tool
        self.hold = hold
        self.die_before = die_before
        self.executions = 0

    def before_tool(self, tool: Any, args: dict[str, Any], tool_context: ToolContext) -> None:
        """Kill this process when the tool ``die_before`` names is about to run (its call is
        committed, the tool has not run)."""
        if tool.name == self.die_before:
            os.kill(os.getpid(), signal.SIGKILL)

    async def record(self, tool: str, call_id: str | None) -> None:
        with open(self.path, "a") as log:  # ruff: ignore[blocking-open-call-in-async-function]
            log.write(f"{self.attempt} {tool} {call_id}\n")
            log.flush()
            os.fsync(log.fileno())
        self.executions += 1
        if self.executions == self.die_in_tool:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.hold and self.executions == 1:
            print("held", flush=True)
            await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


def _responses(request: LlmRequest) -> dict[str, dict[str, Any]]:
    """The agent's own function responses in the request, by tool name (newest wins)."""
    found: dict[str, dict[str, Any]] = {}
    for content in request.contents:
        for part in content.parts:
            if part.function_response is not None:
                found[part.function_response.name] = dict(part.function_response.response)
    return found


def _call(name: str, args: dict[str, Any]) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=[Part.from_function_call(name, args)]))


def approver(name: str) -> Callable[[LlmRequest], LlmResponse | str]:
    """Look the item up, ask for approval of its price, then report the answer."""

    def decide(request: LlmRequest) -> LlmResponse | str:
        got = _responses(request)
        if "lookup" not in got:
            return _call("lookup", {"item": name})
        if "approve" not in got:
            return _call("approve", {"amount": got["lookup"]["price"]})
        return f"{name}: approved={got['approve'].get('approved')}"

    return decide


def closer(request: LlmRequest) -> LlmResponse | str:
    """Look the total up, refund it (the refund needs the user's confirmation), report."""
    got = _responses(request)
    if "lookup" not in got:
        return _call("lookup", {"item": "total"})
    if "refund" not in got or "error" in got["refund"]:
        return _call("refund", {"amount": got["lookup"]["price"]})
    return f"total {got['lookup']['price']}, refunded {got['refund']['refunded']}"


def build_app(log: ToolLog) -> App:
    """The resumable app; its tools write to ``log``."""

    async def lookup(item: str, tool_context: ToolContext) -> dict[str, Any]:
        """Look up an item's price."""
        await log.record("lookup", tool_context.function_call_id)
        return {"item": item, "price": 10 * len(item)}

    async def approve(amount: int, tool_context: ToolContext) -> None:
        """Ask a human to approve a payment."""
        await log.record("approve", tool_context.function_call_id)

    async def refund(amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Refund an amount (runs once the user confirmed it)."""
        await log.record("refund", tool_context.function_call_id)
        confirmation = tool_context.tool_confirmation
        return {
            "refunded": amount,
            "confirmed": confirmation is not None and confirmation.confirmed,
        }

    tools = [FunctionTool(lookup), LongRunningFunctionTool(approve)]
    last_tools = [FunctionTool(lookup), FunctionTool(refund, require_confirmation=True)]

    def agent(name: str) -> LlmAgent:
        return LlmAgent(
            name=name,
            model=ScriptedModel(approver(name)),
            tools=list(tools),
            before_tool_callback=log.before_tool,
        )

    root = SequentialAgent(
        name="flow",
        sub_agents=[
            agent("first"),
            ParallelAgent(name="par", sub_agents=[agent("left"), agent("right")]),
            LlmAgent(
                name="last",
                model=ScriptedModel(closer),
                tools=last_tools,
                before_tool_callback=log.before_tool,
            ),
        ],
    )
    return App("shop", root, resumability_config=ResumabilityConfig(is_resumable=True))


def finished(events: list[Event]) -> bool:
    """Whether the root agent's end is committed."""
    last = events[-1] if events else None
    return last is not None and last.author == "flow" and bool(last.actions.end_of_agent)


def open_answer(events: list[Event], invocation_id: str) -> Content | None:
    """The answer to the invocation's first open long-running call by author name, or None."""
    answered = {r.id for e in events if e.author == "user" for r in e.get_function_responses()}
    open_calls = []
    for event in events:
        if event.invocation_id != invocation_id or not event.long_running_tool_ids:
            continue
        for call in event.get_function_calls():
            if call.id in event.long_running_tool_ids and call.id not in answered:
                open_calls.append((event.author, call))
    if not open_calls:
        return None
    _, call = min(open_calls, key=lambda found: found[0])
    return answer_to(call)


def answer_to(call: FunctionCall) -> Content:
    """The client's answer: a confirmation request is confirmed, an approval call is approved
    below 100."""
    if call.name == REQUEST_CONFIRMATION:
        response: dict[str, Any] = {"confirmed": True}
    else:
        response = {"approved": int(call.args["amount"]) < 100}
    return Content(
        role="user", parts=[Part.from_function_response(call.name, response, id=call.id)]
    )


async def answer_again(runner: Runner, invocation_id: str) -> None:
    """Send the answer to the invocation's first approval call again, as a client that does
    not know whether its answer was stored; print ``refused`` or ``ran``."""
    session = await runner.session_service.get_session(**KEY)
    assert session is not None
    call = next(
        c
        for e in session.events
        if e.invocation_id == invocation_id
        for c in e.get_function_calls()
        if c.name == "approve"
    )
    try:
        await run_once(runner, answer_to(call), invocation_id, _print_event)
    except ResumeError:
        print("refused", flush=True)
    else:
        print("ran", flush=True)


async def run_once(
    runner: Runner,
    message: Content | str | None,
    invocation_id: str | None,
    echo: Callable[[Event], None],
) -> tuple[str, bool]:
    """One run; (its invocation id, whether it paused)."""
    async with runner.run(
        user_id="u", session_id="s", new_message=message, invocation_id=invocation_id
    ) as stream:
        async for event in stream:
            if not event.partial:
                echo(event)
    return stream.invocation_id, stream.paused


async def drive(runner: Runner, invocation_id: str, echo: Callable[[Event], None]) -> None:
    """Resume ``invocation_id`` until it finishes, answering its open calls one by one (a
    finished invocation is left alone)."""
    service = runner.session_service
    while True:
        session = await service.get_session(**KEY)
        assert session is not None
        if finished(list(session.events)):
            return  # a process killed after the end, before it could say so
        message = open_answer(list(session.events), invocation_id)
        _, paused = await run_once(runner, message, invocation_id, echo)
        if not paused:
            return


@contextlib.asynccontextmanager
async def open_store(store: str) -> AsyncIterator[SessionService]:
    """A session service on ``sqlite:<path>`` or ``pg:<dsn>``."""
    kind, _, where = store.partition(":")
    service: SqliteSessionService | PostgresSessionService
    if kind == "sqlite":
        service = SqliteSessionService(where)
    elif kind == "pg":
        service = PostgresSessionService(where)
    else:
        raise SystemExit(f"unknown store {store!r}")
    async with service:
        yield service


def _print_event(event: Event) -> None:
    print("event", event.id, flush=True)


async def main(args: argparse.Namespace) -> None:
    log = ToolLog(args.log, args.attempt, args.die_in_tool, args.hold, args.die_before)
    async with open_store(args.store) as service:
        runner = Runner(app=build_app(log), session_service=service)
        if args.mode == "start":
            invocation_id, paused = await run_once(runner, "go", None, _print_event)
            assert paused
            print("paused", invocation_id, flush=True)
            await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        elif args.mode == "drive":
            await drive(runner, args.invocation, _print_event)
            print("finished", flush=True)
        elif args.mode == "again":
            await answer_again(runner, args.invocation)
        elif args.mode == "try":
            try:
                await run_once(runner, None, args.invocation, _print_event)
            except SessionBusyError:
                print("busy", flush=True)
            else:
                print("ran", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "drive", "try", "again"])
    parser.add_argument("store")
    parser.add_argument("log")
    parser.add_argument("attempt", type=int)
    parser.add_argument("invocation", nargs="?")
    parser.add_argument("--die-in-tool", type=int, default=0)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--die-before")
    return parser


if __name__ == "__main__":
    trio.run(main, _parser().parse_args())
