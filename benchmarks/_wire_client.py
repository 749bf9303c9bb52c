"""The load generator's HTTP/1.1 client: one request per connection, read to the end, no more.

The server benchmark measures servers; its clients should cost them as little CPU as they can,
so that a fast server is not held back by the process that loads it. A general client (httpx)
spends about as much CPU on a run as the server it measures. This one writes a request with
``Connection: close``, reads the answer until the server closes, and takes it apart: the status
line, the headers it needs, and a body that is either whole, sized by ``Content-Length``, or
chunked. It speaks only what the benchmark sends to ``trio-agents api-server`` and
``adk api_server``; anything else is a :class:`WireError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import trio

READ_BYTES = 65536
ANSWER_TIMEOUT = 300.0
"""Seconds a request may take from connecting to the server's close (a hung server fails the
run instead of the benchmark)."""


class WireError(Exception):
    """An answer this client cannot read, or a connection that failed."""


@dataclass(frozen=True)
class Answer:
    """A whole answer: its status, its headers (names in lower case) and its body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def lines(self) -> list[str]:
        """The body's lines, without their ends (an SSE stream, read whole)."""
        return self.body.decode().splitlines()


@dataclass(frozen=True)
class Origin:
    """Where requests go: a host and port, and the ``Host`` header naming them."""

    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"the load generator needs http://host:port, not {url!r}")
        return cls(parts.hostname, parts.port)

    def head(self, method: str, path: str, length: int) -> bytes:
        return (
            f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"content-type: application/json\r\ncontent-length: {length}\r\n"
            "connection: close\r\n\r\n"
        ).encode("ascii")


async def request(origin: Origin, method: str, path: str, body: Any = None) -> Answer:
    """``method path`` with ``body`` as JSON (none if ``None``), on a connection of its own."""
    payload = b"" if body is None else json.dumps(body).encode()
    with trio.move_on_after(ANSWER_TIMEOUT) as waiting:
        try:
            stream = await trio.open_tcp_stream(origin.host, origin.port)
            async with stream:
                await stream.send_all(origin.head(method, path, len(payload)) + payload)
                return parse(await _read_to_end(stream))
        except (OSError, trio.BrokenResourceError) as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from exc
    assert waiting.cancelled_caught
    raise WireError(f"no whole answer within {ANSWER_TIMEOUT} seconds")


async def _read_to_end(stream: trio.SocketStream) -> bytes:
    chunks: list[bytes] = []
    while data := await stream.receive_some(READ_BYTES):
        chunks.append(data)
    return b"".join(chunks)


def parse(received: bytes) -> Answer:
    """The answer in ``received``: everything a server sent before it closed the connection."""
    head, found, rest = received.partition(b"\r\n\r\n")
    if not found:
        raise WireError(f"the connection closed before the end of the head: {received[:80]!r}")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        raise WireError(f"not a status line: {status_line[:80]!r}") from None
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return Answer(status, headers, dechunk(rest))
    if "content-length" in headers:
        length = int(headers["content-length"])
        if len(rest) < length:
            raise WireError(f"the body ended after {len(rest)} of {length} bytes")
        return Answer(status, headers, rest[:length])
    return Answer(status, headers, rest)


def dechunk(data: bytes) -> bytes:
    """A chunked body's bytes; a body cut before its last (empty) chunk is a :class:`WireError`."""
    out: list[bytes] = []
    at = 0
    while True:
        end = data.find(b"\r\n", at)
        if end < 0:
            raise WireError("the chunked body ended before its last chunk")
        size = int(data[at:end].split(b";", 1)[0], 16)
        if size == 0:
            return b"".join(out)
        start = end + 2
        if len(data) < start + size + 2:
            raise WireError("the chunked body ended inside a chunk")
        out.append(data[start : start + size])
        at = start + size + 2
