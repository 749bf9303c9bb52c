"""The interactive terminal chat of ``trio-agents run``."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from rich.console import Console
from rich.text import Text

from .._content import Content, FunctionCall, Part
from .._events import Event
from .._runner import RunConfig, Runner, RunStream, StreamingMode
from .._tool_confirmation import REQUEST_CONFIRMATION

__all__ = ["ChatPrinter", "chat", "read_stdin_line"]

ReadLine = Callable[[], Awaitable[str | None]]


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ChatPrinter:
    """Shows events compactly: streamed text as it arrives, tool calls and transfers dimmed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming: str | None = None  # the author whose text is being streamed

    def show(self, event: Event) -> None:
        """Print ``event``: streamed text as it arrives, then tool calls, transfers and errors."""
        if event.partial:
            self._stream(event)
            return
        streamed = self._streaming == event.author
        self.end_turn()
        if event.text and not streamed:
            self.console.print(Text(f"{event.author}: ", style="bold cyan") + Text(event.text))
        self._show_actions(event)

    def end_turn(self) -> None:
        """Finish a line left open by streamed text."""
        if self._streaming is not None:
            self.console.print()
            self._streaming = None

    def _stream(self, event: Event) -> None:
        if not event.text:
            return
        if self._streaming != event.author:
            if self._streaming is not None:
                self.console.print()
            self.console.print(Text(f"{event.author}: ", style="bold cyan"), end="")
            self._streaming = event.author
        self.console.print(Text(event.text), end="")

    def _show_actions(self, event: Event) -> None:
        for call in event.get_function_calls():
            args = ", ".join(f"{k}={_short(v, 30)}" for k, v in sorted(call.args.items()))
            self._dim(f"  -> {call.name}({args})")
        for response in event.get_function_responses():
            self._dim(f"  <- {response.name}: {_short(dict(response.response))}")
        if event.actions.transfer_to_agent:
            self._dim(f"  => transfer to {event.actions.transfer_to_agent}")
        if event.error_code:
            self.console.print(Text(f"  ! {event.error_code}: {event.error_message}", style="red"))

    def _dim(self, line: str) -> None:
        self.console.print(Text(line, style="dim"))


async def read_stdin_line() -> str | None:
    """One line of standard input (None at end of input), read off the Trio thread."""
    line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return line.rstrip("\n") if line else None


async def _cancel_on_interrupt(events: RunStream) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            events.cancel("interrupted with Ctrl-C")
            return


async def chat_turn(
    runner: Runner,
    *,
    user_id: str,
    session_id: str,
    message: str | Content,
    printer: ChatPrinter,
) -> list[FunctionCall]:
    """One turn, streamed; Ctrl-C cancels this run only (the session keeps what was committed).

    Returns the long-running calls the turn left open (confirmation requests among them), for
    the user to answer.
    """
    config = RunConfig(streaming_mode=StreamingMode.SSE)
    waiting: dict[str, FunctionCall] = {}
    async with (
        runner.run(
            user_id=user_id, session_id=session_id, new_message=message, run_config=config
        ) as events,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_cancel_on_interrupt, events)
        async for event in events:
            printer.show(event)
            _track_open_calls(event, waiting)
        nursery.cancel_scope.cancel()
    printer.end_turn()
    if events.cancelled:
        printer.console.print(Text("[cancelled; the session keeps what was committed]", "yellow"))
    return list(waiting.values())


def _track_open_calls(event: Event, waiting: dict[str, FunctionCall]) -> None:
    if event.partial:
        return
    long_running = event.long_running_tool_ids or frozenset()
    for call in event.get_function_calls():
        if call.id is not None and call.id in long_running:
            waiting[call.id] = call
    for response in event.get_function_responses():
        waiting.pop(response.id or "", None)


async def _answers(
    calls: list[FunctionCall], console: Console, read_line: ReadLine
) -> Content | None:
    """Ask the user to answer each open call: ``y``/``n`` for a confirmation request, a JSON
    value (or plain text) for any other long-running call; an empty answer leaves it open."""
    parts = []
    for call in calls:
        ask = _confirmation if call.name == REQUEST_CONFIRMATION else _answer
        response = await ask(call, console, read_line)
        if response is not None:
            parts.append(Part.from_function_response(call.name, response, id=call.id))
    return Content(role="user", parts=parts) if parts else None


async def _confirmation(
    call: FunctionCall, console: Console, read_line: ReadLine
) -> dict[str, Any] | None:
    args = dict(call.args)
    original = args.get("originalFunctionCall") or {}
    hint = (args.get("toolConfirmation") or {}).get("hint") or ""
    what = f"{original.get('name', '?')}({_short(original.get('args', {}), 60)})"
    console.print(Text(f"confirm {what}? {hint} [y/n] ", style="bold yellow"), end="")
    line = ((await read_line()) or "").strip().lower()
    if line not in ("y", "yes", "n", "no"):
        return None
    return {"confirmed": line in ("y", "yes")}


async def _answer(
    call: FunctionCall, console: Console, read_line: ReadLine
) -> dict[str, Any] | None:
    prompt = f"answer {call.name} (JSON or text; empty: later)> "
    console.print(Text(prompt, style="bold yellow"), end="")
    line = ((await read_line()) or "").strip()
    return _as_response(line) if line else None


def _as_response(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    return value if isinstance(value, dict) else {"result": value}


async def chat(
    runner: Runner,
    *,
    user_id: str,
    session_id: str,
    console: Console,
    read_line: ReadLine = read_stdin_line,
) -> None:
    """Chat until end of input: a prompt, a turn, repeat."""
    printer = ChatPrinter(console)
    console.print(Text(f"session {session_id} — Ctrl-C cancels a run, Ctrl-D quits", "dim"))
    while True:
        console.print(Text("you> ", style="bold green"), end="")
        line = await read_line()
        if line is None:
            console.print()
            return
        if not line.strip():
            continue
        message: str | Content | None = line
        while message is not None:  # a turn, then the answers to the calls it left open
            try:
                waiting = await chat_turn(
                    runner, user_id=user_id, session_id=session_id, message=message, printer=printer
                )
            except Exception as exc:  # shown, and the chat goes on: the session keeps its history
                printer.end_turn()
                console.print(Text(f"error: {type(exc).__name__}: {exc}", style="red"))
                break
            message = await _answers(waiting, console, read_line) if waiting else None
