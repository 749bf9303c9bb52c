"""The consumer's end of an invocation: the stream that commits each event as it is taken."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._content import FunctionCall
from ._emit_channel import BARRIER, EmitChannel
from ._events import Event
from ._resume import waiting_calls

if TYPE_CHECKING:
    from ._invocation import Invocation
    from .sessions._base import Session

__all__ = ["RunStream"]


class RunStream(trio.abc.ReceiveChannel[Event]):
    """The consumer's end of an invocation: iterate it to receive committed events.

    ``receive()`` commits the next event an agent emitted and returns it; the agent resumes only
    then. ``cancel()`` stops the run from anywhere; the stream then ends after the agents are
    cancelled. Once it has ended, :attr:`paused` says whether the invocation waits for the
    client, and :attr:`waiting_for` which calls it waits for.
    """

    __slots__ = ("_channel", "_closed", "_inv")

    def __init__(self, invocation: Invocation, channel: EmitChannel):
        self._inv = invocation
        self._channel = channel
        self._closed = False

    @property
    def invocation_id(self) -> str:
        """The id of this invocation (every event of the run carries it)."""
        return self._inv.invocation_id

    @property
    def session(self) -> Session:
        """The live session of the invocation (state and history as committed so far)."""
        return self._inv.session

    @property
    def waiting_for(self) -> tuple[FunctionCall, ...]:
        """The calls the invocation waits for the client to answer: long-running calls and
        confirmation requests (``adk_request_confirmation``) no user message has answered yet,
        in the order they were made. Answer them with function responses to their ids."""
        inv = self._inv
        return waiting_calls(inv.session.events, inv.invocation_id)

    @property
    def paused(self) -> bool:
        """Whether the run is over and stopped to wait for the client (:attr:`waiting_for`):
        it did not fail and was not cancelled. Answering the calls resumes the invocation."""
        inv = self._inv
        if self._channel.sending or inv.agent_failure is not None:
            return False
        return not inv.cancel_scope.cancel_called and bool(self.waiting_for)

    def cancel(self, reason: str | None = None) -> None:
        """Cancel the run: agents stop, committed events stay, open calls get closed."""
        self._inv.cancel_scope.cancel(reason=reason or "run cancelled by the caller")

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called (or the consumer left the block)."""
        return self._inv.cancel_scope.cancel_called

    async def receive(self) -> Event:
        """Commit the next event an agent emitted and return it (its agent resumes then).

        Raises:
            trio.EndOfChannel: the run is over.
            trio.ClosedResourceError: the stream was closed.
        """
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise trio.EndOfChannel from None

    async def __anext__(self) -> Event:
        # ``async for`` comes here directly: one frame less per event than through receive().
        if self._closed:
            raise trio.ClosedResourceError("the event stream is closed")
        while True:
            try:
                pending = await self._channel.receive()
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
            if pending.watch is BARRIER:  # the aftermath waits for the commits before it
                pending.set(pending.event)
                continue
            inv = self._inv
            inv.emitted += 1
            try:
                if inv.commits_inline:
                    committed = inv.commit_inline(pending.event)
                else:
                    with trio.fail_after(inv.runner.commit_timeout, shield=True):
                        committed = await inv.commit(pending.event)
            except Exception as exc:
                pending.fail(exc)
                continue
            pending.set(committed)
            return committed

    def close(self) -> None:
        """Stop receiving: later receives raise ``trio.ClosedResourceError``."""
        if not self._closed:
            self._closed = True
            self._channel.close_receive()

    async def aclose(self) -> None:
        """Cancel the run and stop receiving."""
        self.cancel("the consumer closed the event stream")
        self.close()
        await trio.lowlevel.checkpoint()
