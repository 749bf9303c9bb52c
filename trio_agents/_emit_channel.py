"""The emit/commit channel: a zero-buffer memory channel whose sender waits for its answer.

ARCHITECTURE §2's round trip as one primitive. An agent task hands a :class:`Pending` event to
the Runner's consumer and parks until the consumer has committed it and answered; the consumer
takes one event at a time. A ``trio.MemorySendChannel`` followed by a separate wait for the
answer makes the agent yield twice per event (once in ``send``, once waiting) and lets the
scheduler run it before the consumer, which then costs a scheduler pass of its own; here the
sender yields once, straight into its wait, so an event costs two scheduler passes of one task
each, as the bare two-task hand-off does.

The rules are those of a zero-buffer memory channel: senders queue in arrival order while the
consumer is busy (one event in flight per sender, so the queue is bounded by the number of agent
tasks); closing the send side ends the stream (``trio.EndOfChannel``) once the queued events are
taken; closing the receive side fails queued and later sends with ``trio.BrokenResourceError``.
Both ``send`` and ``receive`` are checkpoints. A sender cancelled while queued is withdrawn and
its event is never committed; one cancelled after the consumer took its event gets
``trio.Cancelled`` while the event is committed as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import outcome
import trio

if TYPE_CHECKING:
    from ._events import Event

__all__: list[str] = []  # internal: the Runner and InvocationContext use it

Watch = Callable[["Event"], None]

_reschedule = trio.lowlevel.reschedule
_park = trio.lowlevel.wait_task_rescheduled
_SUCCEEDED = trio.lowlevel.Abort.SUCCEEDED


def BARRIER(event: Event) -> None:  # a marker: named as a constant
    """The ``watch`` of a barrier: the consumer answers it without committing or delivering
    anything, so its sender knows that every event sent before it has been committed."""


class Pending:
    """One emitted event on its way to the consumer, and the slot its answer goes back through.

    ``watch`` (escalation watchers) runs in the consumer's task when the committed event is
    answered, before the consumer takes the next event (R-PAR-6).
    """

    __slots__ = ("_queued", "_task", "event", "watch")

    def __init__(self, event: Event, watch: Watch | None, task: trio.lowlevel.Task) -> None:
        self._task: trio.lowlevel.Task | None = task
        self._queued = True
        self.event = event
        self.watch = watch

    def set(self, committed: Event) -> None:
        """Answer with the committed event: the sender's ``send`` returns it."""
        if self.watch is not None:
            self.watch(committed)
        task, self._task = self._task, None
        if task is not None:
            _reschedule(task, outcome.Value(committed))

    def fail(self, error: BaseException) -> None:
        """Answer with an error: the sender's ``send`` raises it."""
        task, self._task = self._task, None
        if task is not None:
            _reschedule(task, outcome.Error(error))

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        # Still queued: withdrawn (the consumer skips it), never committed. Already taken:
        # committed all the same, with nobody waiting for the answer.
        self._queued = False
        self._task = None
        return _SUCCEEDED


class EmitChannel:
    """The zero-buffer channel between an invocation's agent tasks and its consumer."""

    __slots__ = ("_head", "_receivers", "_receiving", "_senders", "_sending")

    def __init__(self) -> None:
        # Lists, not deques (an empty deque costs 760 bytes, and an invocation has one channel):
        # senders are taken from ``_head`` on, and the list is compacted as it drains.
        self._senders: list[Pending] = []
        self._head = 0
        self._receivers: list[trio.lowlevel.Task] = []
        self._sending = True
        self._receiving = True

    @property
    def sending(self) -> bool:
        """Whether the send side is still open (the invocation's agents still run)."""
        return self._sending

    # -- agent side ----------------------------------------------------------------------------

    async def send(self, event: Event, watch: Watch | None = None) -> Event:
        """Hand ``event`` to the consumer and wait until it is committed; the committed event.

        The event is queued and a parked consumer woken, then the sender parks: a cancellation
        that is pending on entry, or arrives before the consumer takes the event, withdraws it.

        Raises:
            trio.BrokenResourceError: the consumer's side is closed.
            trio.ClosedResourceError: this channel's send side is closed.
            Exception: what the commit raised (the event was not committed).
        """
        if not (self._sending and self._receiving):
            await trio.lowlevel.checkpoint()
            if not self._sending:
                raise trio.ClosedResourceError("the invocation's emit channel is closed")
            raise trio.BrokenResourceError("the invocation's consumer is gone")
        pending = Pending(event, watch, trio.lowlevel.current_task())
        self._senders.append(pending)
        if self._receivers:
            _reschedule(self._receivers.pop(0))
        committed: Event = await _park(pending._abort)
        return committed

    def close_send(self) -> None:
        """No more events: parked consumers (and later receives) see ``trio.EndOfChannel``."""
        self._sending = False
        self._wake_receivers()

    # -- consumer side -------------------------------------------------------------------------

    async def receive(self) -> Pending:
        """The next event to commit, in arrival order; answer it with ``set`` or ``fail``.

        Raises:
            trio.EndOfChannel: the send side is closed and nothing is queued.
            trio.ClosedResourceError: the receive side is closed.
        """
        if self._head < len(self._senders):  # queued (unless all withdrawn: then park below)
            await trio.lowlevel.checkpoint_if_cancelled()
            pending = self._take()
            if pending is not None:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return pending
        if not (self._receiving and self._sending):
            await trio.lowlevel.checkpoint()
            self._raise_closed()
        task = trio.lowlevel.current_task()
        receivers = self._receivers

        def abort(_: object) -> trio.lowlevel.Abort:
            receivers.remove(task)
            return _SUCCEEDED

        while True:  # a sender that wakes this task may be withdrawn before it runs
            receivers.append(task)
            await _park(abort)
            pending = self._take()
            if pending is not None:
                return pending
            if not (self._receiving and self._sending):
                self._raise_closed()

    def close_receive(self) -> None:
        """Nobody takes events any more: queued and later sends fail as broken, parked receives
        as closed."""
        self._receiving = False
        while (pending := self._take()) is not None:
            pending.fail(trio.BrokenResourceError("the invocation's consumer is gone"))
        self._wake_receivers()

    # -- internals -----------------------------------------------------------------------------

    def _take(self) -> Pending | None:
        senders, head = self._senders, self._head
        while head < len(senders):
            pending = senders[head]
            head += 1
            if pending._queued:
                pending._queued = False
                break
        else:
            pending = None
        if head == len(senders):
            senders.clear()
            head = 0
        elif head > 32 and head * 2 > len(senders):
            del senders[:head]
            head = 0
        self._head = head
        return pending

    def _wake_receivers(self) -> None:
        woken = self._receivers[:]  # the list itself stays: receive() holds on to it
        self._receivers.clear()
        for task in woken:
            _reschedule(task)  # wakes to find the channel closed

    def _raise_closed(self) -> NoReturn:
        if not self._receiving:
            raise trio.ClosedResourceError("the event stream is closed")
        raise trio.EndOfChannel
