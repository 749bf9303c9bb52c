"""The pump: the frames a run produces reach the client in order, closely spaced ones together."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from trio_agents.server._live import Frame, Gathering, terminal_frame
from trio_agents.server._runs import MAX_BATCH, pump

HOPS = 3
"""Scheduler rounds the producer takes per frame (a run's event passes through a few tasks)."""


def _frames(count: int) -> list[Frame]:
    return [Frame("event", f'{{"n":{n}}}', n + 1) for n in range(count)]


async def _never_disconnects() -> dict[str, str]:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def _pumped(
    produce: list[tuple[float, Frame]], times: list[float] | None = None
) -> list[list[Frame]]:
    """Run ``pump`` over frames sent after the given pauses; the batches its sink got (and, in
    ``times``, when it got each)."""
    writes: list[list[Frame]] = []
    send, receive = trio.open_memory_channel[Frame](0)

    async def sink(batch: list[Frame]) -> None:
        writes.append(list(batch))
        if times is not None:
            times.append(trio.current_time())
        await trio.lowlevel.checkpoint()

    async def producer() -> None:
        async with send:
            for pause, frame in produce:
                if pause:
                    await trio.sleep(pause)
                for _ in range(HOPS):
                    await trio.lowlevel.checkpoint()
                await send.send(frame)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        assert await pump(receive, _never_disconnects, sink, on_disconnect=lambda: None)
    return writes


async def test_a_burst_of_frames_goes_out_in_fewer_writes_and_in_order() -> None:
    frames = [*_frames(20), terminal_frame("done", "inv")]
    writes = await _pumped([(0.0, frame) for frame in frames])
    assert [frame for batch in writes for frame in batch] == frames
    assert len(writes) <= len(frames) // 4
    assert all(0 < len(batch) <= MAX_BATCH for batch in writes)


async def test_a_frame_is_written_before_the_run_pauses_for_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    first, second = _frames(2)
    start = trio.current_time()
    times: list[float] = []
    writes = await _pumped([(0.0, first), (10.0, second)], times)
    assert writes == [[first], [second]]
    assert times[0] - start < 10.0 <= times[1] - start


@settings(max_examples=30, deadline=None)
@given(st.random_module(), st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0]), max_size=150))
def test_every_frame_arrives_once_in_order_whatever_the_pauses(
    _: object, pauses: list[float]
) -> None:
    frames = _frames(len(pauses))

    async def main() -> None:
        writes = await _pumped(list(zip(pauses, frames, strict=True)))
        assert [frame for batch in writes for frame in batch] == frames
        assert all(0 < len(batch) <= MAX_BATCH for batch in writes)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=30, deadline=None)
@given(st.random_module(), st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0]), max_size=150))
def test_frames_a_run_adds_to_the_gathered_batch_keep_their_order(
    _: object, pauses: list[float]
) -> None:
    frames = _frames(len(pauses))

    async def main() -> None:
        gathering = Gathering()
        writes: list[list[Frame]] = []
        taken_at_once = 0
        send, receive = trio.open_memory_channel[Frame](0)

        async def sink(batch: list[Frame]) -> None:
            writes.append(list(batch))
            await trio.lowlevel.checkpoint()

        async def producer() -> None:
            nonlocal taken_at_once
            async with send:
                for pause, frame in zip(pauses, frames, strict=True):
                    if pause:
                        await trio.sleep(pause)
                    for _ in range(HOPS):
                        await trio.lowlevel.checkpoint()
                    if gathering.take(frame):
                        taken_at_once += 1
                    else:
                        await send.send(frame)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
            assert await pump(
                receive, _never_disconnects, sink, on_disconnect=lambda: None, gathering=gathering
            )
        assert [frame for batch in writes for frame in batch] == frames
        assert all(0 < len(batch) <= MAX_BATCH for batch in writes)
        assert gathering.batch is None
        if len(frames) >= 20 and 1.0 not in pauses:
            assert taken_at_once > 0  # a burst is mostly added to the batch, not sent

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_nothing_is_taken_while_no_batch_is_gathered_or_it_is_full() -> None:
    gathering = Gathering()
    (frame,) = _frames(1)
    assert not gathering.take(frame)
    gathering.batch = [frame] * MAX_BATCH
    assert not gathering.take(frame)
    gathering.batch = []
    assert gathering.take(frame)
    assert gathering.batch == [frame]


async def test_a_client_told_of_the_end_is_not_taken_for_one_that_left() -> None:
    """An ASGI server may answer ``receive`` with ``http.disconnect`` as soon as the response is
    complete, which the terminal frame's write makes it: the run is not cancelled for that."""
    send, receive = trio.open_memory_channel[Frame](0)
    complete = trio.Event()
    left: list[str] = []

    async def disconnect_once_complete() -> dict[str, str]:
        await complete.wait()
        return {"type": "http.disconnect"}

    async def sink(batch: list[Frame]) -> None:
        await trio.lowlevel.checkpoint()  # the write
        if batch[-1].terminal:
            complete.set()

    async def producer() -> None:
        async with send:
            for frame in [*_frames(3), terminal_frame("done", "inv")]:
                await send.send(frame)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        ended = await pump(
            receive, disconnect_once_complete, sink, on_disconnect=lambda: left.append("left")
        )
        await trio.testing.wait_all_tasks_blocked()
    assert ended
    assert left == []
