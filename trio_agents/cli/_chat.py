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

from .._events import Event
from .._runner import RunConfig, Runner, RunStream, StreamingMode

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
    runner: Runner, *, user_id: str, session_id: str, message: str, printer: ChatPrinter
) -> None:
    """One turn, streamed; Ctrl-C cancels this run only (the session keeps what was committed)."""
    config = RunConfig(streaming_mode=StreamingMode.SSE)
    async with (
        runner.run(
            user_id=user_id, session_id=session_id, new_message=message, run_config=config
        ) as events,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_cancel_on_interrupt, events)
        async for event in events:
            printer.show(event)
        nursery.cancel_scope.cancel()
    printer.end_turn()
    if events.cancelled:
        printer.console.print(Text("[cancelled; the session keeps what was committed]", "yellow"))


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
        try:
            await chat_turn(
                runner, user_id=user_id, session_id=session_id, message=line, printer=printer
            )
        except Exception as exc:  # shown, and the chat goes on: the session keeps its history
            printer.end_turn()
            console.print(Text(f"error: {type(exc).__name__}: {exc}", style="red"))
