"""The HTTP server of ``serve`` (h11 on Trio) with apps that stream, listen and fail."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from starlette.applications import Starlette
from starlette.responses import FileResponse
from starlette.routing import Route

from trio_agents import ConfigurationError
from trio_agents.server import serve

BIG = 12 * 1024 * 1024
"""More than the server's socket send buffer holds (4 MiB at most on Linux) with a client's
small receive window: the server's last writes wait for the reader."""


async def _start(nursery: trio.Nursery, app: Any, **options: Any) -> tuple[str, int]:
    urls: list[str] = await nursery.start(
        functools.partial(serve, app, port=0, graceful_timeout=0.1, **options)
    )
    host, port = urls[0].removeprefix("http://").rsplit(":", 1)
    return host, int(port)


async def _small_window(host: str, port: int) -> trio.SocketStream:
    """A connection whose receive buffer stays small (set before connecting)."""
    sock = trio.socket.socket()
    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 16384)
    await sock.connect((host, port))
    return trio.SocketStream(sock)


async def _exchange(
    stream: trio.SocketStream, target: str, *, pause: float = 0.0
) -> tuple[h11.Response, bytes]:
    """``GET target``; read the response whole, waiting ``pause`` seconds before each read."""
    client = h11.Connection(h11.CLIENT)
    request = h11.Request(method="GET", target=target, headers=[("host", "x")])
    await stream.send_all(client.send(request) + client.send(h11.EndOfMessage()))
    head: h11.Response | None = None
    body = bytearray()
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            await trio.sleep(pause)
            client.receive_data(await stream.receive_some(16384))
        elif isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, bytes(body)
        else:
            raise AssertionError(f"unexpected {event!r}")


async def test_a_file_reaches_a_slow_reader_whole(nursery: trio.Nursery, tmp_path: Path) -> None:
    """Starlette's FileResponse listens for a disconnect while it sends; the response is not
    complete (and receive() does not say so) until its last bytes are written."""
    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * (BIG // 256) + b"not a whole chunk")
    app = Starlette(routes=[Route("/big", lambda request: FileResponse(path))])
    host, port = await _start(nursery, app)
    for _ in range(2):
        async with await _small_window(host, port) as stream:
            head, body = await _exchange(stream, "/big", pause=0.001)
        assert head.status_code == 200
        assert body == path.read_bytes()


async def test_the_status_line_has_its_reason(nursery: trio.Nursery) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"gone"})

    host, port = await _start(nursery, app)
    async with await trio.open_tcp_stream(host, port) as stream:
        head, body = await _exchange(stream, "/")
    assert (head.status_code, head.reason, body) == (404, b"Not Found", b"gone")


class Lifespan:
    """An ASGI app that records its lifespan; its shutdown awaits ``cleanup`` seconds (a
    checkpoint: a cancelled app would not get past it)."""

    def __init__(self, cleanup: float = 0.0) -> None:
        self.cleanup = cleanup
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        while True:
            kind = (await receive())["type"]
            self.seen.append(kind)
            if kind == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                continue
            await trio.sleep(self.cleanup)
            self.seen.append("cleaned up")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def test_a_cancelled_serve_still_shuts_the_app_down() -> None:
    app = Lifespan(cleanup=0.01)
    async with trio.open_nursery() as nursery:
        await _start(nursery, app)
        nursery.cancel_scope.cancel()
    assert app.seen == ["lifespan.startup", "lifespan.shutdown", "cleaned up"]


async def test_an_app_that_does_not_shut_down_in_time_is_cancelled(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    app = Lifespan(cleanup=3600.0)
    stop = trio.Event()
    with trio.fail_after(100):  # on the mock clock
        async with trio.open_nursery() as nursery:
            await _start(nursery, app, shutdown_trigger=stop.wait, shutdown_timeout=30.0)
            started = trio.current_time()
            stop.set()
        assert trio.current_time() - started == pytest.approx(30.0, abs=0.5)
    assert app.seen == ["lifespan.startup", "lifespan.shutdown"]
    assert "did not shut down within 30.0 seconds" in caplog.text


async def test_an_app_that_fails_to_start_stops_serve() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    with pytest.raises(ConfigurationError, match="the app failed to start: no database"):
        await serve(app, port=0)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("keep_alive_timeout", 0),
        ("max_header_bytes", 100),
        ("graceful_timeout", -1),
        ("shutdown_timeout", -1),
    ],
)
async def test_bad_options_are_refused(option: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=option):
        await serve(Starlette(), port=0, **{option: value})


async def test_a_body_the_app_did_not_read_does_not_end_the_connection(
    nursery: trio.Nursery,
) -> None:
    """The app answers before the body arrives; the server reads and drops the body, and the
    connection (which the client may reuse at once) carries the next request."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 501, "headers": []})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    host, port = await _start(nursery, app)
    client = h11.Connection(h11.CLIENT)
    async with await trio.open_tcp_stream(host, port) as stream:
        for path in ("/first", "/second"):
            head = h11.Request(
                method="POST", target=path, headers=[("host", "x"), ("content-length", "5")]
            )
            await stream.send_all(client.send(head))
            answer = await _response(client, stream)
            await stream.send_all(client.send(h11.Data(data=b"later")))
            client.send(h11.EndOfMessage())
            assert answer == (501, path.encode())
            client.start_next_cycle()


async def _response(client: h11.Connection, stream: trio.SocketStream) -> tuple[int, bytes]:
    status, body = 0, b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return status, body
        else:
            raise AssertionError(f"unexpected {event!r}")
