"""The server benchmark's own HTTP client reads every framing the servers answer with."""

from __future__ import annotations

import functools

import pytest
import trio
import trio.testing

from benchmarks._wire_client import Origin, WireError, dechunk, parse, request


def test_a_sized_body_is_cut_at_its_content_length() -> None:
    answer = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\n{}")
    assert (answer.status, answer.body, answer.headers["x-a"]) == (200, b"{}", "b")
    assert answer.json() == {}


def test_a_chunked_body_is_joined_and_its_extensions_ignored() -> None:
    body = b"4;x=y\r\ndata\r\n3\r\n: 1\r\n0\r\n\r\n"
    answer = parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n" + body)
    assert answer.body == b"data: 1"
    assert answer.lines() == ["data: 1"]


def test_a_body_without_framing_runs_to_the_close() -> None:
    assert parse(b"HTTP/1.0 503 Busy\r\nretry-after: 2\r\n\r\nlater").body == b"later"


@pytest.mark.parametrize(
    "received",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n",  # the head never ended
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n{}",  # the body was cut
        b"garbage\r\n\r\n",  # no status line
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nda",  # cut in a chunk
    ],
)
def test_a_cut_or_broken_answer_is_a_wire_error(received: bytes) -> None:
    with pytest.raises(WireError):
        parse(received)


def test_a_chunked_body_without_its_last_chunk_is_a_wire_error() -> None:
    with pytest.raises(WireError, match="last chunk"):
        dechunk(b"4\r\ndata\r\n")


def test_only_an_http_url_with_a_port_is_an_origin() -> None:
    assert Origin.of("http://127.0.0.1:8000") == Origin("127.0.0.1", 8000)
    with pytest.raises(ValueError, match="http://host:port"):
        Origin.of("https://127.0.0.1")


async def test_a_server_that_never_closes_is_a_wire_error(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    serving = functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1")
    (listener,) = await nursery.start(serving)
    port = listener.socket.getsockname()[1]
    with pytest.raises(WireError, match="no whole answer within"):
        await request(Origin("127.0.0.1", port), "GET", "/")
