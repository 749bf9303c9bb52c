"""The emit channel (trio_agents._emit_channel): the zero-buffer round trip under ARCHITECTURE §2.

Rules checked: senders are served in arrival order; a sender resumes only with its answer; a
sender cancelled before the consumer took its event withdraws it (it is never received); one
cancelled after keeps its event taken; closing either side wakes whoever waits; ``send`` and
``receive`` are checkpoints on every path. The property test runs many senders with random
cancellations under many scheduler interleavings.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from trio_agents import Event
from trio_agents._emit_channel import EmitChannel, Pending


def _event(text: str) -> Event:
    return Event(author=text)


async def _consume(channel: EmitChannel, taken: list[str], fail: str | None = None) -> None:
    """Answer every event with a copy stamped ``invocation_id="ok"`` (or fail ``fail``)."""
    while True:
        try:
            pending = await channel.receive()
        except trio.EndOfChannel:
            return
        taken.append(pending.event.author)
        if pending.event.author == fail:
            pending.fail(ValueError(fail))
        else:
            pending.set(Event(author=pending.event.author, invocation_id="ok"))


async def test_round_trip_returns_the_answer_after_the_consumer_took_the_event() -> None:
    channel, taken = EmitChannel(), []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_consume, channel, taken)
        answered = await channel.send(_event("a"))
        assert taken == ["a"]
        assert (answered.author, answered.invocation_id) == ("a", "ok")
        channel.close_send()


async def test_fail_raises_the_commit_error_in_the_sender() -> None:
    channel, taken = EmitChannel(), []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_consume, channel, taken, "bad")
        with pytest.raises(ValueError, match="bad"):
            await channel.send(_event("bad"))
        assert (await channel.send(_event("good"))).invocation_id == "ok"
        channel.close_send()
    assert taken == ["bad", "good"]


async def test_queued_senders_are_served_in_arrival_order() -> None:
    channel, taken = EmitChannel(), []
    async with trio.open_nursery() as nursery:
        for name in "abcde":
            nursery.start_soon(channel.send, _event(name))
            await trio.testing.wait_all_tasks_blocked()  # each queued before the next
        nursery.start_soon(_consume, channel, taken)
        await trio.testing.wait_all_tasks_blocked()
        channel.close_send()
    assert taken == list("abcde")


async def test_a_sender_cancelled_while_queued_is_withdrawn() -> None:
    channel, taken = EmitChannel(), []
    scope = trio.CancelScope()

    async def withdrawn() -> None:
        with scope:
            await channel.send(_event("withdrawn"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.send, _event("kept"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(withdrawn)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(_consume, channel, taken)
        await trio.testing.wait_all_tasks_blocked()
        channel.close_send()
    assert taken == ["kept"]


async def test_a_sender_cancelled_on_entry_wakes_the_consumer_for_nothing() -> None:
    """The parked consumer is woken, finds the event withdrawn, and parks again."""
    channel, taken = EmitChannel(), []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_consume, channel, taken)
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as scope:
            scope.cancel()
            await channel.send(_event("withdrawn"))
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert taken == []
        assert (await channel.send(_event("after"))).invocation_id == "ok"
        channel.close_send()
    assert taken == ["after"]


async def test_a_sender_cancelled_after_the_take_leaves_the_event_taken() -> None:
    channel = EmitChannel()
    got: list[Pending] = []
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:

            async def take_then_cancel() -> None:
                got.append(await channel.receive())
                scope.cancel()

            nursery.start_soon(take_then_cancel)
            await trio.testing.wait_all_tasks_blocked()
            await channel.send(_event("taken"))
        assert scope.cancelled_caught
    assert [p.event.author for p in got] == ["taken"]
    got[0].set(_event("answer"))  # nobody waits any more: a no-op, not an error


async def test_close_send_ends_the_stream_for_parked_and_later_receives() -> None:
    channel = EmitChannel()
    ended: list[str] = []

    async def receive_until_end(name: str) -> None:
        with pytest.raises(trio.EndOfChannel):
            await channel.receive()
        ended.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive_until_end, "parked")
        await trio.testing.wait_all_tasks_blocked()
        channel.close_send()
    assert ended == ["parked"]
    with trio.testing.assert_checkpoints(), pytest.raises(trio.EndOfChannel):
        await channel.receive()
    with trio.testing.assert_checkpoints(), pytest.raises(trio.ClosedResourceError):
        await channel.send(_event("late"))


async def test_close_receive_breaks_queued_and_later_senders() -> None:
    channel = EmitChannel()
    outcomes: list[str] = []

    async def send(name: str) -> None:
        try:
            await channel.send(_event(name))
        except trio.BrokenResourceError:
            outcomes.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, "queued")
        await trio.testing.wait_all_tasks_blocked()
        channel.close_receive()
    assert outcomes == ["queued"]
    with trio.testing.assert_checkpoints(), pytest.raises(trio.BrokenResourceError):
        await channel.send(_event("late"))
    with trio.testing.assert_checkpoints(), pytest.raises(trio.ClosedResourceError):
        await channel.receive()


async def test_close_receive_wakes_a_parked_receiver() -> None:
    channel = EmitChannel()
    async with trio.open_nursery() as nursery:

        async def parked() -> None:
            with pytest.raises(trio.ClosedResourceError):
                await channel.receive()

        nursery.start_soon(parked)
        await trio.testing.wait_all_tasks_blocked()
        channel.close_receive()


async def test_send_and_receive_are_checkpoints_when_nothing_waits() -> None:
    channel = EmitChannel()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.send, _event("queued"))
        await trio.testing.wait_all_tasks_blocked()
        with trio.testing.assert_checkpoints():
            pending = await channel.receive()  # taken at once: still a schedule point
        pending.set(_event("answer"))

        async def answer_one() -> None:
            (await channel.receive()).set(_event("answer"))

        nursery.start_soon(answer_one)
        await trio.testing.wait_all_tasks_blocked()
        with trio.testing.assert_checkpoints():
            await channel.send(_event("direct"))


async def test_a_cancelled_consumer_takes_nothing() -> None:
    channel = EmitChannel()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.send, _event("queued"))
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as scope:
            scope.cancel()
            await channel.receive()
        assert scope.cancelled_caught
        (await channel.receive()).set(_event("answer"))  # still queued


@settings(max_examples=150, deadline=None)
@given(
    st.random_module(),
    st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=6),
    st.sets(st.integers(min_value=0, max_value=30), max_size=6),
)
def test_every_event_is_answered_once_or_withdrawn(
    _: object, counts: list[int], cancel_at: set[int]
) -> None:
    """Property: with senders cancelled at random points (queued, taken, or on entry), every
    event sent is either answered to its sender after it was taken, or the sender got
    ``Cancelled``; no event is taken twice; each sender's events are taken in its own order."""

    async def main() -> None:
        channel = EmitChannel()
        taken: list[str] = []
        answered: list[str] = []
        cancelled: list[str] = []
        attempted: list[str] = []
        scopes = [trio.CancelScope() for _ in counts]

        async def sender(k: int, count: int) -> None:
            with scopes[k]:
                for i in range(count):
                    name = f"{k}.{i}"
                    attempted.append(name)
                    try:
                        answer = await channel.send(_event(name))
                    except trio.Cancelled:
                        cancelled.append(name)
                        raise
                    assert name in taken  # resumed only after the take
                    assert answer.author == name
                    answered.append(name)

        async def canceller() -> None:
            for tick in range(max(cancel_at, default=0) + 1):
                if tick in cancel_at:
                    scopes[tick % len(scopes)].cancel()
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_consume, channel, taken)
            async with trio.open_nursery() as senders:
                senders.start_soon(canceller)
                for k, count in enumerate(counts):
                    senders.start_soon(sender, k, count)
            channel.close_send()

        assert len(taken) == len(set(taken))
        assert sorted(answered + cancelled) == sorted(attempted)
        assert set(answered) <= set(taken)
        for k in range(len(counts)):
            mine = [int(name.split(".")[1]) for name in taken if name.split(".")[0] == str(k)]
            assert mine == list(range(len(mine)))

    trio.run(main)


async def test_a_busy_channel_stays_bounded_and_in_order() -> None:
    """Many senders that re-queue while the queue never drains: every event is taken once, each
    sender's in order, and the queue holds at most about two entries per sender (no unbounded
    growth while it is busy)."""
    channel, taken = EmitChannel(), []
    senders, rounds = 80, 5
    longest = 0

    async def sender(k: int) -> None:
        for i in range(rounds):
            await channel.send(_event(f"{k}.{i}"))

    async def consume() -> None:
        nonlocal longest
        while True:
            try:
                pending = await channel.receive()
            except trio.EndOfChannel:
                return
            longest = max(longest, len(channel._senders))
            taken.append(pending.event.author)
            pending.set(pending.event)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with trio.open_nursery() as producers:
            for k in range(senders):
                producers.start_soon(sender, k)
        channel.close_send()
    assert len(taken) == len(set(taken)) == senders * rounds
    for k in range(senders):
        assert [n for n in taken if n.startswith(f"{k}.")] == [f"{k}.{i}" for i in range(rounds)]
    assert longest <= 2 * senders + 33
