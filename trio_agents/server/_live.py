"""Runs in flight as the server sees them: SSE frames, the requesting client, followers.

Every event of a run becomes a :class:`Frame` once. The client that started the run (the
*primary*) receives frames through a zero-buffer channel, so a slow client slows the run as a
slow consumer does (ARCHITECTURE §2 rule 4); while its writer gathers a batch (at most
:data:`MAX_BATCH` frames), the run adds its frames to that batch without waiting. Followers
(``GET …/events``) never slow the run: they read a bounded log of recent frames and, when they
fall behind it, catch up from the session store, which holds every committed event anyway.
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import trio

from .._content import FunctionCall
from .._events import Event
from .._runner import RunStream
from .._serde import dumps, unstructure
from ._graph import with_node_info

__all__ = ["FOLLOW_LOG", "MAX_BATCH", "event_frame", "invocation_of", "terminal_frame"]

FOLLOW_LOG = 256
"""How many recent frames of a run followers can read without going back to the store."""

MAX_BATCH = 64
"""Frames written to the client in one piece at most."""

SessionKey = tuple[str, str, str]
Kind = Literal["event", "done", "error", "cancelled"]


class Frame(NamedTuple):
    """One SSE frame: an event (``id: <seq>``) or the terminal frame of a run.

    A named tuple (immutable, compared by value) rather than a frozen attrs class: one is made
    per event served, and a tuple costs a fifth as much to make.
    """

    kind: Kind
    data: str
    seq: int | None = None
    partial: bool = False

    def encode(self) -> bytes:
        head = "" if self.kind == "event" else f"event: {self.kind}\n"
        ident = "" if self.seq is None else f"id: {self.seq}\n"
        return f"{head}{ident}data: {self.data}\n\n".encode()

    @property
    def terminal(self) -> bool:
        return self.kind != "event"


def event_frame(event: Event, seq: int, paths: Mapping[str, str] | None = None) -> Frame:
    """The frame of ``event``: ``seq`` is its commit sequence (the last one for partial chunks).

    ``paths`` (agent name → node path) adds the ``nodeInfo`` ADK's dev UI reads.
    """
    text = event.to_json()
    if paths:
        text = with_node_info(text, paths.get(event.author))
    return Frame("event", text, seq, bool(event.partial))


def terminal_frame(
    kind: Literal["done", "error", "cancelled"],
    invocation_id: str | None,
    error: BaseException | None = None,
    *,
    waiting_for: Sequence[FunctionCall] = (),
    resumable: bool = False,
) -> Frame:
    """The frame a run ends with; a run that paused says so, with the calls it waits for, and
    one of a resumable app that failed or was cancelled says it can be resumed."""
    data: dict[str, Any] = {"invocationId": invocation_id}
    if waiting_for:
        data["paused"] = True
        data["waitingFor"] = [unstructure(call) for call in waiting_for]
    if resumable and kind != "done":
        data["resumable"] = True
    if error is not None:  # ADK's string form under "error"; the structured one under its own key
        data["error"] = f"{type(error).__name__}: {error}"
        data["errorDetails"] = {"type": type(error).__name__, "message": str(error)}
    return Frame(kind, dumps(data))


def invocation_of(frame: Frame) -> str | None:
    """The invocation id a frame names (a terminal frame's, or an event's)."""
    found = json.loads(frame.data).get("invocationId")
    return found if isinstance(found, str) else None


class Gathering:
    """The batch a client's writer is gathering, while it gathers one (else None).

    A run hands a frame to its writer by appending it there when it can: the writer has taken
    the frame then and there, with no task switch (else the frame goes through the channel)."""

    __slots__ = ("batch",)

    def __init__(self) -> None:
        self.batch: list[Frame] | None = None

    def take(self, frame: Frame) -> bool:
        """Add ``frame`` to the batch being gathered; False when none is or it is full."""
        batch = self.batch
        if batch is None or len(batch) >= MAX_BATCH:
            return False
        batch.append(frame)
        return True


class LiveRun:
    """One run in flight: its stream, its primary client and the frames it has published."""

    def __init__(self, key: SessionKey, primary: trio.MemorySendChannel[Frame] | None) -> None:
        self.key = key
        self.primary = primary
        self.primary_gone = trio.Event()
        """Set when the primary client disconnected."""
        self.gathering = Gathering()
        """The primary client's writer, while it gathers frames to write together."""
        self.stream: RunStream | None = None
        self.log: collections.deque[Frame] = collections.deque(maxlen=FOLLOW_LOG)
        self.count = 0
        """Frames published so far (the log holds the last ``FOLLOW_LOG`` of them)."""
        self.last_seq = 0
        self.terminal: Frame | None = None
        self.paths: Mapping[str, str] = {}
        """Agent name → node path, for the ``nodeInfo`` of event frames."""
        self.observe: Callable[[Event], None] | None = None
        """Shown every event of the run as it is served (the dev routes' span recorder)."""
        self._changed: trio.Event | None = None
        """Set at the next publication; made only while a follower waits for one."""

    @property
    def invocation_id(self) -> str | None:
        return None if self.stream is None else self.stream.invocation_id

    def begin(self, stream: RunStream) -> None:
        self.stream = stream
        self.last_seq = stream.session.revision

    def cancel(self, reason: str) -> None:
        if self.stream is not None:
            self.stream.cancel(reason)

    def frame_of(self, event: Event) -> Frame:
        assert self.stream is not None
        if self.observe is not None:
            self.observe(event)
        return event_frame(event, self.stream.session.revision, self.paths)

    async def deliver(self, frame: Frame) -> None:
        """Publish ``frame`` to followers and hand it to the primary client (waiting for it, unless
        its writer is gathering a batch and takes the frame at once).

        The hand-over is shielded: the Runner cancels its consumer's block when the run fails or
        is cancelled, and an event committed before that must still reach the client. It cannot
        hang: the client's writer reads until it is cancelled, and then closes the channel.
        """
        self._publish(frame)
        primary = self.primary
        if primary is None or self.gathering.take(frame):
            return
        try:
            try:
                primary.send_nowait(frame)  # the writer waits for it: no task switch needed
            except trio.WouldBlock:
                with trio.CancelScope(shield=True):
                    await primary.send(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.primary = None  # the client left; the run goes on as the policy decided

    async def conclude(self, terminal: Frame) -> None:
        """Deliver the aftermath (closing responses, error events) and the terminal frame."""
        for frame in self._aftermath():
            await self.deliver(frame)
        if self.primary is not None and not self.gathering.take(terminal):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.primary.send(terminal)
        self.end(terminal)

    def end(self, terminal: Frame) -> None:
        """Publish what is left and ``terminal`` without waiting; close the primary channel."""
        if self.terminal is None:
            for frame in self._aftermath():
                self._publish(frame)
            self.terminal = terminal
            self._notify()
        if self.primary is not None:
            self.primary.close()
            self.primary = None

    async def wait_changed(self) -> None:
        if self._changed is None:
            self._changed = trio.Event()
        await self._changed.wait()

    def frames_since(self, index: int) -> tuple[int, list[Frame]]:
        """The logged frames from publication ``index`` on, and the index of the first one."""
        oldest = self.count - len(self.log)
        start = max(index, oldest)
        return start, list(self.log)[start - oldest :]

    def _publish(self, frame: Frame) -> None:
        if not frame.partial and frame.seq is not None:
            self.last_seq = frame.seq
        self.log.append(frame)
        self.count += 1
        self._notify()

    def _notify(self) -> None:
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()

    def _aftermath(self) -> list[Frame]:
        """Frames for what the Runner committed after the last delivered event."""
        if self.stream is None:
            return []
        session = self.stream.session
        events = session.events
        new = min(session.revision - self.last_seq, len(events))
        if new <= 0:
            return []
        first = session.revision - new + 1
        tail = events[len(events) - new :]
        if self.observe is not None:
            for event in tail:
                self.observe(event)
        return [event_frame(event, first + i, self.paths) for i, event in enumerate(tail)]
