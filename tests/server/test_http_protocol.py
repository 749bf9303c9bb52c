"""``serve`` speaks HTTP/1.1 as clients expect: keep-alive and pipelining, every body framing,
``Expect: 100-continue``, streamed runs, HEAD, HTTP/1.0, ``Connection: close``, encoded targets,
graceful shutdown and the lifespan.

Each test writes raw bytes to a real server on 127.0.0.1 and parses the answers with h11
(``tests/server/wire.py``); hostile clients are in ``test_http_hostile.py``.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any
from urllib.parse import unquote

import h11
import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from tests.server.helpers import Gated
from tests.server.wire import (
    HEALTH,
    Address,
    Api,
    Echo,
    SseFrame,
    Wire,
    address_of,
    chunked,
    json_body,
    new_session,
    request,
    run_request,
    serving,
    sessions_path,
)
from trio_agents import ConfigurationError
from trio_agents.plugins import BasePlugin
from trio_agents.server import _h11, create_app, serve
from trio_agents.sessions import InMemorySessionService


@pytest.fixture
async def echo(nursery: trio.Nursery) -> Address:
    return await serving(nursery, Echo())


@pytest.fixture(params=["direct", "stream"])
def writes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers written to the socket's descriptor (POSIX), or through Trio's stream (elsewhere)."""
    monkeypatch.setattr(_h11, "DIRECT_WRITES", request.param == "direct")


# -- keep-alive and pipelining ---------------------------------------------------------------------


async def test_fifty_requests_on_one_connection_are_answered_in_order(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        for index in range(50):
            if index % 2:
                await wire.send(request("GET", "/chunked"))
                reply = await wire.response()
                assert reply.headers["transfer-encoding"] == "chunked"
                assert "content-length" not in reply.headers
                assert reply.body == b"one two three"
            else:
                await wire.send(request("POST", f"/echo?i={index}", body=b"x" * index))
                reply = await wire.response("POST")
                assert reply.headers["content-length"] == str(len(reply.body))
                assert (reply.json()["query"], reply.json()["body"]) == (f"i={index}", "x" * index)


async def test_pipelined_requests_are_answered_in_order(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        first, second = request("GET", "/echo?i=1"), request("POST", "/echo?i=2", body=b"abc")
        await wire.send(first + second + request("GET", "/chunked"))
        assert (await wire.response()).json()["query"] == "i=1"
        assert (await wire.response("POST")).json()["body"] == "abc"
        assert (await wire.response()).body == b"one two three"


async def test_a_hundred_pipelined_requests_in_one_send_are_all_answered(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(b"".join(request("GET", f"/echo?i={i}") for i in range(100)))
        for index in range(100):
            assert (await wire.response()).json()["query"] == f"i={index}"


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


KINDS = ("length", "chunked", "streamed answer", "head")


def _pipelined(kind: str, index: int, body: bytes) -> bytes:
    target = f"/echo?i={index}"
    if kind == "length":
        return request("POST", target, body=body)
    if kind == "chunked":
        return request(
            "POST", target, "Transfer-Encoding: chunked", body=chunked(*_pieces(body, 7))
        )
    return request("HEAD", target) if kind == "head" else request("GET", "/chunked")


async def _check_answer(wire: Wire, kind: str, index: int, body: bytes) -> None:
    reply = await wire.response("HEAD" if kind == "head" else "POST")
    assert reply.status == 200
    if kind == "head":
        assert reply.body == b""
    elif kind == "streamed answer":
        assert reply.body == b"one two three"
    else:
        assert (reply.json()["query"], reply.json()["body"]) == (
            f"i={index}",
            body.decode("latin-1"),
        )


@settings(max_examples=40)
@given(
    data=st.data(),
    _seed=st.random_module(),
    requests=st.lists(
        st.tuples(st.sampled_from(KINDS), st.binary(max_size=200)), min_size=1, max_size=6
    ),
)
async def test_pipelined_requests_cut_anywhere_are_answered_in_order(
    data: st.DataObject, _seed: Any, requests: list[tuple[str, bytes]]
) -> None:
    raw = b"".join(_pipelined(kind, i, body) for i, (kind, body) in enumerate(requests))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=12))))
    pieces = [raw[a:b] for a, b in itertools.pairwise([0, *cuts, len(raw)])]
    async with trio.open_nursery() as nursery:
        address = await serving(nursery, Echo())
        async with Wire.open(address) as wire:
            await wire.send(*pieces)
            for index, (kind, body) in enumerate(requests):
                await _check_answer(wire, kind, index, body)
        nursery.cancel_scope.cancel()


async def test_a_body_sent_after_the_answer_leaves_the_connection_usable(
    nursery: trio.Nursery,
) -> None:
    """``POST /health`` is refused without reading its body; the client sends the body after
    the answer came. An answer that does not say ``Connection: close`` promises the connection
    takes the next request."""
    address = await serving(nursery, Api().app)
    async with Wire.open(address) as wire:
        await wire.send(request("POST", "/health", "Content-Length: 10"))
        assert (await wire.response("POST")).status == 405
        await wire.send(b"0123456789" + HEALTH)
        if wire.parser.their_state is h11.MUST_CLOSE:
            assert await wire.closed() == b""
        else:
            assert (await wire.response()).json() == {"status": "ok"}


# -- request bodies --------------------------------------------------------------------------------

BODY = b'{"text": "' + b"x" * 3000 + b'"}'


SENDS = {
    "content-length": [request("POST", "/echo", body=BODY)],
    "chunked": [
        request("POST", "/echo", "Transfer-Encoding: chunked", body=chunked(BODY[:7], BODY[7:]))
    ],
    "head and body in 7-byte sends": _pieces(request("POST", "/echo", body=BODY), 7),
    "50 chunks in 3-byte sends": _pieces(
        request("POST", "/echo", "Transfer-Encoding: chunked", body=chunked(*_pieces(BODY, 61))),
        3,
    ),
}


@pytest.mark.parametrize("sends", SENDS.values(), ids=SENDS.keys())
async def test_a_body_reaches_the_app_whole_whatever_its_framing(
    echo: Address, sends: list[bytes]
) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(*sends)
        reply = await wire.response("POST")
        assert reply.status == 200
        assert reply.json()["body"] == BODY.decode()
        await wire.send(HEALTH)  # and the connection is ready for the next request
        assert (await wire.response()).json()["path"] == "/health"


@pytest.mark.usefixtures("writes")
async def test_a_large_body_goes_both_ways(echo: Address) -> None:
    body = bytes(range(32, 127)) * 11_000  # about 1 MiB
    async with Wire.open(echo) as wire:
        await wire.send(request("POST", "/echo", body=body))
        assert (await wire.response("POST")).json()["body"] == body.decode()


async def test_a_large_answer_arrives_whole_while_the_app_listens_for_a_disconnect(
    echo: Address,
) -> None:
    """Its end must be written before ``http.disconnect`` tells the app the answer is done."""
    async with Wire.open(echo) as wire:
        for _ in range(2):
            await wire.send(request("GET", "/large"))
            assert (await wire.response()).body == b"".join(Echo.LARGE)


async def test_a_request_is_answered_after_the_client_half_closes(echo: Address) -> None:
    """A client may shut its sending side once its request is out: the answer still comes."""
    async with Wire.open(echo) as wire:
        await wire.send(request("POST", "/echo", body=b"abc"))
        await wire.stream.send_eof()
        assert (await wire.response("POST")).json()["body"] == "abc"


async def test_a_chunked_json_body_creates_a_session(nursery: trio.Nursery) -> None:
    address = await serving(nursery, Api().app)
    body = json_body({"sessionId": "s1", "state": {"k": "v"}})
    async with Wire.open(address) as wire:
        chunks = chunked(*_pieces(body, 5))
        await wire.send(request("POST", sessions_path("weather"), "Transfer-Encoding: chunked"))
        await wire.send(*_pieces(chunks, 4))
        reply = await wire.response("POST")
    assert reply.status == 200
    assert (reply.json()["id"], reply.json()["state"]) == ("s1", {"k": "v"})


async def test_expect_100_continue_is_answered_before_the_body_is_sent(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        head = request("POST", "/echo", "Expect: 100-continue", f"Content-Length: {len(BODY)}")
        await wire.send(head)
        wire.expect("POST")
        continued = await wire.event()  # the body is not sent until the server asks for it
        assert isinstance(continued, h11.InformationalResponse)
        assert continued.status_code == 100
        await wire.send(BODY)
        reply = await wire.reply()
    assert reply.status == 200
    assert reply.json()["body"] == BODY.decode()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_body_over_max_body_bytes_is_413_with_a_detail(
    nursery: trio.Nursery, framing: str
) -> None:
    address = await serving(nursery, Api(max_body_bytes=64).app)
    body = json_body({"sessionId": "s1", "state": {"k": "v" * 100}})
    if framing == "chunked":
        sent = request("POST", sessions_path("weather"), "Transfer-Encoding: chunked")
        sent += chunked(body[:50], body[50:])
    else:
        sent = request("POST", sessions_path("weather"), body=body)
    async with Wire.open(address) as wire:
        await wire.send(sent)
        reply = await wire.response("POST")
        assert reply.status == 413
        assert reply.json() == {"detail": "the request body is larger than the limit of 64 bytes"}
        assert await wire.closed() == b""


async def test_a_body_refused_by_its_length_is_never_asked_for(nursery: trio.Nursery) -> None:
    """With ``Expect: 100-continue``, a body the app refuses by its Content-Length gets the 413
    and no ``100 Continue``: the client need not send it."""
    address = await serving(nursery, Api(max_body_bytes=64).app)
    head = request("POST", sessions_path("weather"), "Expect: 100-continue", "Content-Length: 999")
    async with Wire.open(address) as wire:
        await wire.send(head)
        wire.expect("POST")
        first = await wire.event()
        assert isinstance(first, h11.Response)
        assert first.status_code == 413
        assert b"limit of 64 bytes" in await wire.body()


# -- streamed runs ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("writes")
async def test_run_sse_streams_chunked_frames_as_the_run_goes_then_serves_again(
    nursery: trio.Nursery,
) -> None:
    gate = trio.Event()
    api = Api(gate)
    address = await serving(nursery, api.app)
    async with Wire.open(address) as wire:
        await new_session(wire, "gated")
        await wire.send(run_request("gated"))
        head = await wire.head("POST")
        headers = dict(head.headers)
        assert head.status_code == 200
        assert headers[b"transfer-encoding"] == b"chunked"
        assert headers[b"content-type"].startswith(b"text/event-stream")
        call = await wire.frame()  # it arrives while the run waits on its gate
        assert call.data["content"]["parts"][0]["functionCall"]["name"] == "wait"
        gate.set()
        answer, said, done = await wire.frames_to_end()
        assert answer.data["content"]["parts"][0]["functionResponse"]["response"] == {"ok": True}
        assert said.data["content"]["parts"] == [{"text": "done"}]
        assert done == SseFrame("done", {"invocationId": call.data["invocationId"]})
        await wire.send(HEALTH)
        assert (await wire.response()).json() == {"status": "ok"}
    assert [e.text for e in await api.stored("gated")] == ["hi", None, None, "done"]


async def test_a_request_pipelined_behind_a_stream_is_answered_after_it(
    nursery: trio.Nursery,
) -> None:
    """Bytes that arrive while a run streams (the app listening for a disconnect) are the
    next request, not a sign that the client left."""
    gate = trio.Event()
    address = await serving(nursery, Api(gate).app)
    async with Wire.open(address) as wire:
        await new_session(wire, "gated")
        await wire.send(run_request("gated"))
        await wire.head("POST")
        await wire.frame()
        await wire.send(HEALTH)
        await trio.testing.wait_all_tasks_blocked()  # the server has read it
        gate.set()
        assert (await wire.frames_to_end())[-1].event == "done"
        assert (await wire.response()).json() == {"status": "ok"}


async def test_closing_the_socket_mid_stream_cancels_the_run(nursery: trio.Nursery) -> None:
    api = Api()  # the gated run never ends by itself
    address = await serving(nursery, api.app)
    async with Wire.open(address) as wire:
        await new_session(wire, "gated")
        await wire.send(run_request("gated"))
        await wire.head("POST")
        call = await wire.frame()
    async with Wire.open(address) as follower:  # following ends only once the run is over
        await follower.send(request("GET", sessions_path("gated") + "/s1/events"))
        await follower.head()
        frames = await follower.frames_to_end()
        assert frames[-1] == SseFrame("cancelled", {"invocationId": call.data["invocationId"]})
        await follower.send(HEALTH)
        assert (await follower.response()).status == 200
    closing = (await api.stored("gated"))[-1]
    assert closing.get_function_responses()[0].response["error"] == "cancelled"


async def test_http_1_0_gets_a_stream_delimited_by_the_close(nursery: trio.Nursery) -> None:
    """An HTTP/1.0 client cannot read chunks: the stream is sent as is and ends by closing."""
    address = await serving(nursery, Api().app)
    async with Wire.open(address) as wire:
        await new_session(wire, "weather")
    async with Wire.open(address) as wire:
        await wire.send(run_request("weather").replace(b"HTTP/1.1", b"HTTP/1.0", 1))
        head = await wire.head("POST", ("Connection", "close"))
        assert head.status_code == 200
        assert b"transfer-encoding" not in dict(head.headers)
        frames = await wire.frames_to_end()
    assert [f.event for f in frames] == [None, None, None, "done"]


# -- HEAD, HTTP/1.0, Connection: close -------------------------------------------------------------


async def test_head_is_answered_without_a_body(nursery: trio.Nursery) -> None:
    address = await serving(nursery, Api().app)
    async with Wire.open(address) as wire:
        await wire.send(request("HEAD", "/health") + HEALTH)
        head = await wire.response("HEAD")  # h11 fails the next answer if a body was sent
        get = await wire.response()
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-length"] == str(len(get.body))
    assert get.json() == {"status": "ok"}


async def test_head_of_a_streamed_answer_has_no_chunks(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("HEAD", "/chunked") + request("GET", "/echo"))
        assert (await wire.response("HEAD")).body == b""
        assert (await wire.response()).json()["method"] == "GET"


async def test_http_1_0_is_answered_then_the_connection_closed(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("POST", "/echo", body=b"abc", version="1.0"))
        reply = await wire.response("POST", ("Connection", "close"))
        assert (reply.json()["httpVersion"], reply.json()["body"]) == ("1.0", "abc")
        assert await wire.closed() == b""


async def test_connection_close_is_honoured(echo: Address) -> None:
    """The request that says ``Connection: close`` is answered; none after it is."""
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", "/echo", "Connection: close") + HEALTH)
        reply = await wire.response("GET", ("Connection", "close"))
        assert reply.json()["path"] == "/echo"
        assert await wire.closed() == b""


# -- targets ---------------------------------------------------------------------------------------


async def test_the_path_reaches_the_app_decoded_and_the_query_raw(echo: Address) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", "/a%20b/caf%C3%A9/x%2Fy?q=a%20b&r=%2F&s=caf%C3%A9+1"))
        seen = (await wire.response()).json()
    assert seen["path"] == "/a b/café/x/y"
    assert seen["rawPath"] == "/a%20b/caf%C3%A9/x%2Fy"
    assert seen["query"] == "q=a%20b&r=%2F&s=caf%C3%A9+1"


@pytest.mark.parametrize(
    ("target", "path", "query"),
    [
        ("http://127.0.0.1:8000/a%20b?q=1", "/a b", "q=1"),
        ("HTTPS://example.test/x/y", "/x/y", ""),
        ("http://example.test", "/", ""),
        ("http://example.test?q=2", "/", "q=2"),
    ],
)
async def test_an_absolute_form_target_is_served_as_its_path(
    echo: Address, target: str, path: str, query: str
) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(request("GET", target))
        reply = await wire.response()
    assert reply.status == 200
    assert (reply.json()["path"], reply.json()["query"]) == (path, query)


async def test_a_percent_encoded_session_id_is_decoded(nursery: trio.Nursery) -> None:
    address = await serving(nursery, Api().app)
    path = sessions_path("weather") + "/a%20b%C3%A9"
    async with Wire.open(address) as wire:
        await wire.send(request("POST", path, body=b"{}"), request("GET", path))
        assert (await wire.response("POST")).json()["id"] == "a bé"
        assert (await wire.response()).json()["id"] == "a bé"


@pytest.mark.parametrize("segment", ["%FF", "%FE", "%ED%A0%80", "%C0%AF", "caf%E9"])
async def test_an_id_whose_percent_encoding_is_not_utf_8_is_400_and_reaches_no_session(
    nursery: trio.Nursery, segment: str
) -> None:
    """Decoded leniently, every such id would be the replacement character: ``%FF`` and ``%FE``
    (or a lone surrogate's bytes) would name one and the same user or session."""
    api = Api()
    address = await serving(nursery, api.app)
    lenient = unquote(segment)  # what the id was taken to be
    await api.service.create_session(app_name="weather", user_id="u1", session_id=lenient)
    async with Wire.open(address) as wire:
        await wire.send(request("GET", sessions_path("weather") + "/" + segment))
        reply = await wire.response()
    assert reply.status == 400
    assert reply.json()["detail"].startswith("path: its percent-encoded bytes are not UTF-8")
    await new_session_reachable(address)


async def new_session_reachable(address: Address) -> None:
    """A valid percent-encoded id still names its session."""
    async with Wire.open(address) as wire:
        await new_session(wire, "weather", "caf\u00e9")
        await wire.send(request("GET", sessions_path("weather") + "/caf%C3%A9"))
        assert (await wire.response()).json()["id"] == "caf\u00e9"


@pytest.mark.parametrize(
    "target", [b"/caf\xc3\xa9", b"/\xff\xfe", b"/echo?q=\xe2\x82\xac", b"/%ff%fe", b"/%00"]
)
async def test_non_ascii_bytes_in_the_target_are_refused_or_served(
    echo: Address, target: bytes
) -> None:
    async with Wire.open(echo) as wire:
        await wire.send(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = await wire.response()
    assert 400 <= reply.status < 500 or reply.status == 200, reply
    if reply.status == 200 and target == b"/caf\xc3\xa9":
        assert reply.json()["path"] == "/café"
    async with Wire.open(echo) as wire:
        await wire.send(HEALTH)
        assert (await wire.response()).status == 200


# -- start-up and shutdown -------------------------------------------------------------------------


class Closing(BasePlugin):
    """Records that the server closed it."""

    def __init__(self) -> None:
        super().__init__("closing")
        self.closed = False

    async def close(self) -> None:
        self.closed = True


GRACE = 0.3


class Server:
    """``serve`` in a test's own nursery, stopped by ``stop``; ``returned`` once it is over."""

    def __init__(self, app: Any, graceful_timeout: float = GRACE) -> None:
        self.stop = trio.Event()
        self.returned = trio.Event()
        self.serve = functools.partial(
            serve, app, port=0, shutdown_trigger=self.stop.wait, graceful_timeout=graceful_timeout
        )

    async def run(self, task_status: trio.TaskStatus[list[str]]) -> None:
        await self.serve(task_status=task_status)
        self.returned.set()

    async def start(self, nursery: trio.Nursery) -> Address:
        return address_of(await nursery.start(self.run))

    async def stopped(self) -> None:
        """Trigger the shutdown; wait (at most the grace period and a margin) for the end."""
        self.stop.set()
        with trio.fail_after(GRACE + 1.5):
            await self.returned.wait()


async def test_shutdown_cancels_streams_closes_the_services_and_refuses_connections() -> None:
    loaded: list[bool] = []
    plugin = Closing()

    def agents() -> dict[str, Any]:
        loaded.append(True)
        return {"gated": Gated(name="gated")}

    app = create_app(agents, session_service=InMemorySessionService(), plugins=[plugin])
    server = Server(app)
    async with trio.open_nursery() as nursery:
        address = await server.start(nursery)
        async with Wire.open(address) as wire:
            await wire.send(HEALTH)
            assert (await wire.response()).status == 200
            assert loaded  # the lifespan's start-up loaded the apps
            await new_session(wire, "gated")
            await wire.send(run_request("gated"))
            await wire.head("POST")
            call = await wire.frame()
            server.stop.set()
            frames = await wire.frames_to_end()
            assert frames[-1] == SseFrame("cancelled", {"invocationId": call.data["invocationId"]})
            await server.stopped()
        assert plugin.closed  # the lifespan's shutdown closed the services
        with pytest.raises(OSError):
            await trio.open_tcp_stream(*address)


async def test_a_request_in_flight_at_shutdown_is_answered_and_new_ones_refused() -> None:
    echo = Echo()
    server = Server(echo)
    async with trio.open_nursery() as nursery:
        address = await server.start(nursery)
        async with Wire.open(address) as wire:
            await wire.send(request("GET", "/wait"))
            await echo.waiting.wait()
            server.stop.set()
            await trio.testing.wait_all_tasks_blocked()  # the server is shutting down
            with pytest.raises(OSError):
                await trio.open_tcp_stream(*address)
            echo.release.set()
            assert (await wire.response()).json()["path"] == "/wait"
            assert wire.parser.their_state is h11.MUST_CLOSE  # the answer says it closes
            assert await wire.closed() == b""
            await server.stopped()


async def test_idle_and_half_sent_connections_do_not_hold_up_shutdown() -> None:
    """They close at once: ``serve`` returns long before a grace period of a minute."""
    server = Server(Echo(), graceful_timeout=60)
    async with trio.open_nursery() as nursery:
        address = await server.start(nursery)
        async with Wire.open(address) as idle, Wire.open(address) as half:
            await idle.send(HEALTH)
            assert (await idle.response()).status == 200
            await half.send(b"GET /echo HTTP/1.1\r\nHost:")
            server.stop.set()
            assert await idle.closed() == b""
            assert await half.closed() == b""
        await server.stopped()


async def test_shutdown_ends_within_the_grace_period_a_request_that_never_ends() -> None:
    echo = Echo()
    server = Server(echo)
    async with trio.open_nursery() as nursery:
        address = await server.start(nursery)
        assert echo.lifespan == ["startup"]
        async with Wire.open(address) as wire:
            await wire.send(request("GET", "/hang"))
            await wire.head()
            await server.stopped()
            await wire.closed()
    assert echo.lifespan == ["startup", "shutdown"]


async def test_a_cancelled_server_closes_the_services_too() -> None:
    plugin = Closing()
    app = create_app(
        {"gated": Gated(name="gated")}, session_service=InMemorySessionService(), plugins=[plugin]
    )
    async with trio.open_nursery() as nursery:
        address = await serving(nursery, app)
        async with Wire.open(address) as wire:
            await wire.send(HEALTH)
            assert (await wire.response()).status == 200
        nursery.cancel_scope.cancel()
    assert plugin.closed


async def http_only(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A minimal ASGI app without the lifespan protocol: it refuses every other scope."""
    if scope["type"] != "http":
        raise ValueError(f"unsupported scope {scope['type']!r}")
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


async def test_an_app_without_the_lifespan_protocol_is_served() -> None:
    server = Server(http_only)
    async with trio.open_nursery() as nursery:
        address = await server.start(nursery)
        async with Wire.open(address) as wire:
            await wire.send(HEALTH)
            assert (await wire.response()).body == b"ok"
        await server.stopped()


async def test_an_app_failing_its_start_up_stops_serve_with_the_reason() -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("no agents today")

    app = create_app(broken, session_service=InMemorySessionService())
    with pytest.raises(ConfigurationError, match="no agents today"):
        await serve(app, port=0)


# -- what serve is given and gives -----------------------------------------------------------------


async def test_started_gives_the_bound_url(nursery: trio.Nursery) -> None:
    urls = await nursery.start(functools.partial(serve, Echo(), port=0, graceful_timeout=0.1))
    (url,) = urls
    match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", url)
    assert match is not None
    async with Wire.open(("127.0.0.1", int(match[1]))) as wire:
        await wire.send(HEALTH)
        assert (await wire.response()).status == 200


async def test_started_gives_a_bracketed_url_for_ipv6(nursery: trio.Nursery) -> None:
    urls = await nursery.start(
        functools.partial(serve, Echo(), host="::1", port=0, graceful_timeout=0.1)
    )
    (url,) = urls
    match = re.fullmatch(r"http://\[::1\]:(\d+)", url)
    assert match is not None
    async with Wire.open(("::1", int(match[1]))) as wire:
        await wire.send(HEALTH)
        assert (await wire.response()).status == 200


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("backlog", 0),
        ("backlog", -1),
        ("keep_alive_timeout", 0),
        ("max_header_bytes", 0),
        ("send_timeout", 0),
    ],
)
async def test_bad_options_are_configuration_errors(option: str, value: int) -> None:
    with pytest.raises(ConfigurationError, match=option):
        await serve(Echo(), port=0, **{option: value})
