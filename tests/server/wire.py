"""HTTP/1.1 at the byte level: a raw client whose responses h11 parses, and a tiny ASGI app.

The tests write requests as bytes (so they can write wrong ones) and read each response through
``h11.Connection(h11.CLIENT)``, which checks its framing (Content-Length, chunked, close).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import attrs
import h11
import trio

from tests.server.helpers import Gated, user_text, weather_agent
from trio_agents import Event
from trio_agents.server import create_app, serve
from trio_agents.sessions import InMemorySessionService

Address = tuple[str, int]

TIMEOUT = 3.0
"""No read waits longer: a server that hangs fails the test instead of stalling the suite."""


async def serving(nursery: trio.Nursery, app: Any, **options: Any) -> Address:
    """Serve ``app`` on 127.0.0.1 (a free port) in ``nursery``; its host and port."""
    server = functools.partial(serve, app, port=0, graceful_timeout=0.1, **options)
    return address_of(await nursery.start(server))


def address_of(urls: list[str]) -> Address:
    """The host and port of the first of the URLs ``serve`` started with."""
    parts = urlsplit(urls[0])
    return parts.hostname or "", parts.port or 0


@attrs.frozen
class Reply:
    """One whole response: status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.frozen
class SseFrame:
    event: str | None
    data: Any


class Wire:
    """One client connection: ``send`` bytes, then ``response``/``head``/``frame`` read answers.

    Requests go out as raw bytes; ``h11`` is only told what kind of request was sent (its
    method and headers that change the response's framing), so it can parse the answer.
    """

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.parser = h11.Connection(h11.CLIENT)
        self._text = ""

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, address: Address) -> AsyncIterator[Wire]:
        stream = await trio.open_tcp_stream(*address)
        async with stream:
            yield cls(stream)

    async def send(self, *pieces: bytes) -> None:
        """Send each piece with its own ``send_all``."""
        for piece in pieces:
            await self.stream.send_all(piece)

    async def event(self) -> Any:
        """The next h11 event of the response being read."""
        with trio.fail_after(TIMEOUT):
            while (event := self.parser.next_event()) is h11.NEED_DATA:
                self.parser.receive_data(await self.stream.receive_some())
        return event

    def expect(self, method: str = "GET", *headers: tuple[str, str]) -> None:
        """Tell the parser the next request sent is a ``method`` one with ``headers`` (those
        that change how its answer is framed: ``HEAD``, ``Connection: close``)."""
        if self.parser.states == {h11.CLIENT: h11.DONE, h11.SERVER: h11.DONE}:
            self.parser.start_next_cycle()
        request = h11.Request(method=method, target="/", headers=[("Host", "x"), *headers])
        self.parser.send(request)
        self.parser.send(h11.EndOfMessage())
        self._text = ""

    async def head(self, method: str = "GET", *headers: tuple[str, str]) -> h11.Response:
        """The head of the answer to the next request sent (see :meth:`expect`)."""
        self.expect(method, *headers)
        return await self.final_head()

    async def final_head(self) -> h11.Response:
        """The head of the answer being read, past any 1xx."""
        while isinstance(event := await self.event(), h11.InformationalResponse):
            pass
        assert isinstance(event, h11.Response), event
        return event

    async def reply(self) -> Reply:
        """The whole answer to the request :meth:`expect` announced."""
        head = await self.final_head()
        headers = {name.decode(): value.decode() for name, value in head.headers}
        return Reply(head.status_code, headers, await self.body())

    async def body(self) -> bytes:
        """The rest of the body of the response being read."""
        body = bytearray()
        while isinstance(event := await self.event(), h11.Data):
            body += event.data
        assert isinstance(event, h11.EndOfMessage), event
        return bytes(body)

    async def response(self, method: str = "GET", *headers: tuple[str, str]) -> Reply:
        """The whole answer to the next request sent (see :meth:`expect`)."""
        self.expect(method, *headers)
        return await self.reply()

    async def frame(self) -> SseFrame:
        """The next SSE frame of the streamed body being read (comments skipped)."""
        while True:
            block, sep, rest = self._text.partition("\n\n")
            if sep:
                self._text = rest
                fields = dict(
                    line.split(": ", 1) for line in block.split("\n") if not line.startswith(":")
                )
                if "data" in fields:
                    return SseFrame(fields.get("event"), json.loads(fields["data"]))
                continue
            event = await self.event()
            assert isinstance(event, h11.Data), event
            self._text += event.data.decode()

    async def frames_to_end(self) -> list[SseFrame]:
        """The frames up to the terminal one (a frame with an ``event:``), and the body's end."""
        frames = [await self.frame()]
        while frames[-1].event is None:
            frames.append(await self.frame())
        assert self._text == ""
        assert isinstance(await self.event(), h11.EndOfMessage)
        return frames

    async def closed(self) -> bytes:
        """What the server sends until it closes the connection (a reset counts as closing)."""
        with trio.fail_after(TIMEOUT):
            return await read_to_close(self.stream)


async def read_to_close(stream: trio.SocketStream) -> bytes:
    """The bytes ``stream`` receives until the server closes it (a reset counts as closing)."""
    received = bytearray()
    try:
        while chunk := await stream.receive_some():
            received += chunk
    except trio.BrokenResourceError:
        pass
    return bytes(received)


def request(
    method: str, target: str, *headers: str, body: bytes = b"", version: str = "1.1"
) -> bytes:
    """A request's bytes: ``headers`` as ``"Name: value"``; a Content-Length is added for a
    non-empty ``body`` unless ``headers`` frame it."""
    lines = [f"{method} {target} HTTP/{version}", "Host: x", *headers]
    framed = any(h.lower().startswith(("content-length:", "transfer-encoding:")) for h in headers)
    if body and not framed:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


HEALTH = request("GET", "/health")
"""A request every app of these tests answers 200 (the tiny app echoes it)."""


def chunked(*pieces: bytes) -> bytes:
    """``pieces`` in chunked transfer coding, with the last chunk."""
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


class Echo:
    """A tiny ASGI app: each request is answered with what the app saw of it, as JSON.

    ``/chunked`` answers ``one two three`` in three parts without a length; ``/boom`` raises
    before answering, ``/broken`` after the first part; ``/hang`` sends the first part and
    never ends; ``/wait`` answers once ``release`` is set; ``/large`` answers :attr:`LARGE`
    as Starlette answers a file; ``/silent`` returns without
    answering; ``/short`` and ``/long`` send fewer or more bytes than their Content-Length.
    The lifespan messages received are recorded in ``lifespan``.
    """

    PARTS = (b"one ", b"two ", b"three")

    def __init__(self) -> None:
        self.lifespan: list[str] = []
        self.waiting = trio.Event()
        self.release = trio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/boom":
            raise RuntimeError("the app broke")
        if scope["path"] == "/silent":
            return
        if scope["path"] == "/wait":
            self.waiting.set()
            await self.release.wait()
        if scope["path"] == "/large":
            await self._large(receive, send)
            return
        if scope["path"] in ("/short", "/long"):
            await self._wrong_length(scope["path"], send)
            return
        if scope["path"] in ("/chunked", "/broken", "/hang"):
            await self._parts(scope["path"], send)
            return
        seen = {
            "method": scope["method"],
            "path": scope["path"],
            "rawPath": scope["raw_path"].decode("latin-1"),
            "query": scope["query_string"].decode("latin-1"),
            "httpVersion": scope["http_version"],
            "body": body.decode("latin-1"),
        }
        answer = json.dumps(seen).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    async def _parts(self, path: str, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in self.PARTS:
            await send({"type": "http.response.body", "body": part, "more_body": True})
            if path == "/broken":
                raise RuntimeError("the app broke mid-answer")
            if path == "/hang":
                await trio.sleep_forever()
        await send({"type": "http.response.body", "body": b""})

    LARGE = (b"a" * 65536, b"b" * 8 * 1024 * 1024)

    async def _large(self, receive: Any, send: Any) -> None:
        """As Starlette sends a file: parts with a length, the last one ending the body, while
        a task waits for ``http.disconnect`` and then cancels the sending."""

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            length = str(sum(map(len, self.LARGE))).encode()
            start = {"type": "http.response.start", "status": 200}
            await send({**start, "headers": [(b"content-length", length)]})
            *parts, last = self.LARGE
            for part in parts:
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": last})

    async def _wrong_length(self, path: str, send: Any) -> None:
        headers = [(b"content-length", b"10")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        body = b"abc" if path == "/short" else b"0123456789" + request("GET", "/smuggled")
        await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            kind = (await receive())["type"].removeprefix("lifespan.")
            self.lifespan.append(kind)
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return


class Api:
    """A real :func:`create_app` app: ``weather`` (a call, its answer, a streamed reply) and
    ``gated`` (a call, then waits for ``gate``: forever when None)."""

    def __init__(self, gate: trio.Event | None = None, **options: Any) -> None:
        self.service = InMemorySessionService()
        agents = {"weather": weather_agent(), "gated": Gated(name="gated", gate=gate)}
        self.app = create_app(agents, session_service=self.service, **options)

    async def stored(self, app: str, sid: str = "s1") -> list[Event]:
        session = await self.service.get_session(app_name=app, user_id="u1", session_id=sid)
        assert session is not None
        return list(session.events)


def sessions_path(app: str) -> str:
    return f"/apps/{app}/users/u1/sessions"


async def new_session(wire: Wire, app: str, sid: str = "s1") -> None:
    """Create session ``sid`` of ``app`` over ``wire`` (kept alive)."""
    await wire.send(request("POST", sessions_path(app), body=json_body({"sessionId": sid})))
    assert (await wire.response("POST")).status == 200


def run_request(app: str, sid: str = "s1", **extra: Any) -> bytes:
    """A ``POST /run_sse`` request of ``app`` on session ``sid``."""
    body = {
        "appName": app,
        "userId": "u1",
        "sessionId": sid,
        "newMessage": user_text("hi"),
        **extra,
    }
    return request("POST", "/run_sse", body=json_body(body))


def json_body(data: Any) -> bytes:
    return json.dumps(data).encode()
