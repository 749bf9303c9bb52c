"""Clients that misbehave get a 4xx and a closed connection, or are cut off after
``keep_alive_timeout``; none of them stops ``serve`` from answering everybody else.

Raw bytes to a real server on 127.0.0.1, answers parsed by h11 (``tests/server/wire.py``).
Timeouts are short real ones (0.5 s) with a margin of 1.5 s.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import struct
from collections.abc import AsyncIterator

import h11
import pytest
import trio
import trio.testing

from tests.server.helpers import user_text
from tests.server.wire import (
    HEALTH,
    Address,
    Api,
    Echo,
    Wire,
    chunked,
    json_body,
    new_session,
    read_to_close,
    request,
    run_request,
    serving,
    sessions_path,
)
from trio_agents.server import _h11

KEEP_ALIVE = 0.5
MARGIN = 1.5


@pytest.fixture
async def echo(nursery: trio.Nursery) -> Address:
    return await serving(nursery, Echo())


async def assert_serving(address: Address) -> None:
    """A new connection is still answered."""
    async with Wire.open(address) as wire:
        await wire.send(HEALTH)
        assert (await wire.response()).status == 200


async def refused_then_closed(wire: Wire, *statuses: int) -> None:
    """The server answers with one of ``statuses`` and closes the connection."""
    reply = await wire.response()
    assert reply.status in statuses, reply
    assert await wire.closed() == b""


# -- malformed requests ----------------------------------------------------------------------------

GARBAGE = [
    b"HELLO\r\n\r\n",
    b"GET / FTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n",
    b"\x00\x01\x02\x03\r\n\r\n",
    b"GET / HTTP/1.1\r\n\r\n",  # no Host
]


@pytest.mark.parametrize("garbage", GARBAGE)
async def test_a_garbage_request_is_400_then_closed(echo: Address, garbage: bytes) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(garbage)
        await refused_then_closed(wire, 400)
    await assert_serving(echo)


BAD_FRAMING = {
    "non-number length": ["Content-Length: abc"],
    "negative length": ["Content-Length: -1"],
    "two different lengths": ["Content-Length: 3", "Content-Length: 4"],
    "two lengths in one header": ["Content-Length: 3, 4"],
    "bad chunk size": ["Transfer-Encoding: chunked"],
}


@pytest.mark.parametrize("headers", BAD_FRAMING.values(), ids=BAD_FRAMING.keys())
async def test_a_bad_body_framing_is_400_then_closed(echo: Address, headers: list[str]) -> None:
    body = b"zz\r\nabc\r\n0\r\n\r\n" if "chunked" in headers[0] else b"abc"
    async with Wire.open(echo) as wire:
        await wire.send(request("POST", "/echo", *headers, body=body))
        await refused_then_closed(wire, 400)
    await assert_serving(echo)


async def test_a_chunked_body_with_a_length_too_is_read_as_chunked_or_refused(
    echo: Address,
) -> None:
    """The chunked coding wins over Content-Length (or the request is refused): a length
    must never leave chunks behind to be read as a next request."""
    body = chunked(b"hello") + request("GET", "/smuggled")
    async with Wire.open(echo) as wire:
        await wire.send(
            request("POST", "/echo", "Transfer-Encoding: chunked", "Content-Length: 3", body=body)
        )
        reply = await wire.response("POST")
        if reply.status == 200:
            assert reply.json()["body"] == "hello"
        else:
            assert reply.status == 400
            assert await wire.closed() == b""


async def test_an_unknown_transfer_coding_is_refused(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("POST", "/echo", "Transfer-Encoding: gzip", body=b"abc"))
        await refused_then_closed(wire, 400, 501)


async def test_a_body_the_app_does_not_read_is_never_taken_for_a_request(
    nursery: trio.Nursery,
) -> None:
    """``POST /health`` is refused without reading its body: that body, a request of its own,
    must be skipped (or the connection closed), never answered."""
    address = await serving(nursery, Api().app)
    smuggled = request("GET", "/smuggled")
    async with Wire.open(address) as wire:
        await wire.send(request("POST", "/health", body=smuggled) + HEALTH)
        assert (await wire.response("POST")).status == 405
        if wire.parser.their_state is h11.MUST_CLOSE:  # closing rather than skipping it
            assert await wire.closed() == b""
        else:
            assert (await wire.response()).json() == {"status": "ok"}


# -- heads too large -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [["X-Big: " + "a" * 20_000], [f"X-Many-{i}: {'a' * 100}" for i in range(200)]],
    ids=["one big header", "many headers"],
)
async def test_a_head_over_the_default_limit_is_refused_then_closed(
    echo: Address, headers: list[str]
) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", "/echo", *headers))
        await refused_then_closed(wire, 431, 400)
    await assert_serving(echo)


async def test_a_request_line_over_the_default_limit_is_refused_then_closed(
    echo: Address,
) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", "/" + "a" * 20_000))
        await refused_then_closed(wire, 414, 431, 400)
    await assert_serving(echo)


async def test_max_header_bytes_bounds_the_head(nursery: trio.Nursery) -> None:
    address = await serving(nursery, Echo(), max_header_bytes=1024)
    async with Wire.open(address) as wire:
        await wire.send(request("GET", "/echo", "X-Fits: " + "a" * 800))
        assert (await wire.response()).status == 200
        await wire.send(request("GET", "/echo", "X-Big: " + "a" * 2000))
        await refused_then_closed(wire, 431, 400)


# -- slow and silent clients -----------------------------------------------------------------------


async def test_a_client_stalling_mid_head_is_cut_off(nursery: trio.Nursery) -> None:
    address = await serving(nursery, Echo(), keep_alive_timeout=KEEP_ALIVE)
    async with Wire.open(address) as wire:
        await wire.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
        with trio.fail_after(KEEP_ALIVE + MARGIN):
            answer = await read_to_close(wire.stream)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer


async def test_a_client_trickling_its_head_is_cut_off(nursery: trio.Nursery) -> None:
    """Each byte resets no timer: the whole head must arrive within the timeout."""
    address = await serving(nursery, Echo(), keep_alive_timeout=KEEP_ALIVE)

    async def trickle(stream: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(b"GET /echo HTTP/1.1\r\n")
            for byte in itertools.cycle(b"X-Slow: a\r\n"):
                await stream.send_all(bytes([byte]))
                await trio.sleep(0.05)  # a slow client's pace, not an ordering

    async with Wire.open(address) as wire, trio.open_nursery() as client:
        client.start_soon(trickle, wire.stream)
        with trio.fail_after(KEEP_ALIVE + MARGIN):
            answer = await read_to_close(wire.stream)
        client.cancel_scope.cancel()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer


async def test_an_idle_kept_alive_connection_is_closed(nursery: trio.Nursery) -> None:
    address = await serving(nursery, Echo(), keep_alive_timeout=KEEP_ALIVE)
    async with Wire.open(address) as wire:
        await wire.send(HEALTH)
        assert (await wire.response()).status == 200
        with trio.fail_after(KEEP_ALIVE + MARGIN):
            assert await read_to_close(wire.stream) == b""


async def test_a_quiet_stream_outlives_the_keep_alive_timeout(nursery: trio.Nursery) -> None:
    """The timeout is for idle connections and heads: a run streaming nothing for a while (no
    pings either) is not cut."""
    gate = trio.Event()
    address = await serving(nursery, Api(gate).app, keep_alive_timeout=0.2)
    async with Wire.open(address) as wire:
        await new_session(wire, "gated")
        await wire.send(run_request("gated"))
        await wire.head("POST")
        await wire.frame()
        await trio.sleep(0.6)  # three timeouts of silence, the run waiting on its gate
        gate.set()
        assert [f.event for f in await wire.frames_to_end()] == [None, None, "done"]


async def test_a_slow_body_is_not_cut_by_the_keep_alive_timeout(nursery: trio.Nursery) -> None:
    """The timeout bounds idle connections and heads; a body has the app's own read timeout."""
    address = await serving(nursery, Echo(), keep_alive_timeout=0.2)
    async with Wire.open(address) as wire:
        await wire.send(request("POST", "/echo", "Content-Length: 5"))
        for byte in b"hello":
            await trio.sleep(0.1)  # a slow client's pace: five sends over 0.5 s
            await wire.send(bytes([byte]))
        assert (await wire.response("POST")).json()["body"] == "hello"


async def test_silent_and_stalled_clients_do_not_block_others(echo: Address) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for index in range(10):
            wire = await stack.enter_async_context(Wire.open(echo))
            if index % 2:
                await wire.send(b"GET /echo HTTP/1.1\r\nHost:")
        await assert_serving(echo)


async def test_two_hundred_connections_at_once_are_all_answered(echo: Address) -> None:
    opened = 0
    all_open = trio.Event()
    statuses: list[int] = []

    async def client(index: int) -> None:
        nonlocal opened
        async with Wire.open(echo) as wire:
            opened += 1
            if opened == 200:
                all_open.set()
            await all_open.wait()
            await wire.send(request("GET", f"/echo?i={index}"))
            reply = await wire.response()
            assert reply.json()["query"] == f"i={index}"
            statuses.append(reply.status)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for index in range(200):
                nursery.start_soon(client, index)
    assert statuses == [200] * 200


# -- failing apps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/boom", "/silent"])
async def test_an_app_failing_before_answering_gets_500_and_the_server_serves_on(
    echo: Address, path: str
) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", path))
        assert (await wire.response()).status == 500
    await assert_serving(echo)


@pytest.mark.parametrize("path", ["/broken", "/short"])
async def test_an_app_failing_mid_answer_never_looks_complete(echo: Address, path: str) -> None:
    """The client sees the connection close before the answer is whole (no last chunk, fewer
    bytes than announced, or no answer at all), never a short but whole answer."""
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", path))
        with pytest.raises((h11.RemoteProtocolError, trio.BrokenResourceError)):
            assert (await wire.head()).status_code == 200
            await wire.body()
    await assert_serving(echo)


async def test_an_app_sending_more_than_its_length_sends_nothing_past_it(echo: Address) -> None:
    """What an app writes past its Content-Length never reaches the client as a response."""
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", "/long"))
        with contextlib.suppress(h11.RemoteProtocolError):  # closed before its end: broken
            assert (await wire.head()).status_code == 200
            assert await wire.body() == b"0123456789"
        rest = wire.parser.trailing_data[0] + await wire.closed()
        assert b"smuggled" not in rest
    await assert_serving(echo)


# -- clients that reset their connection -----------------------------------------------------------


async def reset_at_once(address: Address) -> None:
    """Connect, then close with a TCP reset (``SO_LINGER`` 0) before the server can look at the
    connection: by the time it does, the socket has no peer (``ENOTCONN``)."""
    sock = trio.socket.socket()
    await sock.connect(address)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


async def test_connections_reset_before_they_are_served_do_not_stop_the_server(
    echo: Address,
) -> None:
    for _ in range(50):
        await reset_at_once(echo)
    await assert_serving(echo)


@pytest.mark.parametrize("route", ["/run_sse", sessions_path("weather"), "/config/telemetry"])
async def test_a_client_leaving_mid_body_is_no_app_failure(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, route: str
) -> None:
    """Each of these once logged a traceback ("the app failed"): any client could flood the log."""
    address = await serving(nursery, Api(dev_routes=True).app)
    with caplog.at_level(logging.DEBUG, logger="trio_agents.server"):
        for reset in (False, True):
            async with Wire.open(address) as wire:
                await wire.send(request("POST", route, "Content-Length: 100", body=b'{"a"'))
                if reset:
                    wire.stream.socket.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
            await trio.testing.wait_all_tasks_blocked()  # the server has seen the client leave
        await assert_serving(address)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# -- clients that stop reading ---------------------------------------------------------------------

SEND_TIMEOUT = 0.5


@contextlib.asynccontextmanager
async def small_window(address: Address) -> AsyncIterator[Wire]:
    """A connection whose receive buffer is small from the start, so an answer of megabytes
    cannot all sit in the kernel's buffers while the client reads nothing."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(address)
    async with trio.SocketStream(sock) as stream:
        yield Wire(stream)


async def stop_reading() -> None:
    """Read nothing for the send timeout and a margin (while the server fills the buffers)."""
    await trio.sleep(SEND_TIMEOUT + MARGIN)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "stream"])
async def test_a_client_that_stops_reading_an_answer_is_cut_off(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """Without a send timeout it held its connection (and the answer in memory) for ever; so
    it is cut off whether writes go to the socket's descriptor (POSIX) or through the stream."""
    monkeypatch.setattr(_h11, "DIRECT_WRITES", direct)
    address = await serving(nursery, Echo(), send_timeout=SEND_TIMEOUT)
    async with small_window(address) as wire:
        await wire.send(request("GET", "/large"))
        await stop_reading()
        received = await wire.closed()  # what the buffers held, then the end
    assert 0 < len(received) < sum(map(len, Echo.LARGE))
    await assert_serving(address)


async def test_a_client_that_reads_slowly_but_steadily_gets_the_whole_answer(
    nursery: trio.Nursery,
) -> None:
    """The timeout is on progress, not on a piece of the answer: a few kilobytes read every
    tenth of the timeout keep the connection, though a piece of 64 KiB would take three times
    the timeout at that pace."""
    address = await serving(nursery, Echo(), send_timeout=SEND_TIMEOUT)
    async with small_window(address) as wire:
        await wire.send(request("GET", "/large"))
        received = bytearray()
        for _ in range(30):  # three timeouts of a slow reader
            received += await wire.stream.receive_some(4096)
            await trio.sleep(SEND_TIMEOUT / 10)
        whole = len(b"".join(Echo.LARGE))
        with trio.fail_after(MARGIN * 10):
            while len(received.partition(b"\r\n\r\n")[2]) < whole:
                more = await wire.stream.receive_some(65536)
                assert more, "the server closed the connection"
                received += more
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert body == b"".join(Echo.LARGE)


async def test_a_follower_that_stops_reading_is_cut_off(nursery: trio.Nursery) -> None:
    api = Api()
    address = await serving(nursery, api.app, send_timeout=SEND_TIMEOUT)
    text = user_text("x" * 100_000)
    history = json_body({"sessionId": "s1", "events": [{"author": "user", "content": text}] * 80})
    async with small_window(address) as wire:
        await wire.send(request("POST", sessions_path("weather"), body=history))
        assert (await wire.response("POST")).status == 200
        await wire.send(request("GET", sessions_path("weather") + "/s1/events"))
        await stop_reading()
        received = await wire.closed()
    assert b"HTTP/1.1 200" in received
    assert b"event: done" not in received  # cut off before its terminal frame
    await assert_serving(address)
