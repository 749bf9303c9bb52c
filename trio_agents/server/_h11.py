"""HTTP/1.1 for an ASGI app on h11: one task per connection, its requests one after the other.

A connection reads a request head (within ``keep_alive_timeout``), calls the app with it and
serves the app's ``receive``/``send`` until the response is complete, then reads the next
request on the same connection, unless either side asked to close. While the app streams its
response, a ``receive`` call waits on the socket for the client to leave (``http.disconnect``);
bytes of a next request that arrive meanwhile are kept for it.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import attrs
import h11
import trio

__all__ = ["LINGER", "RECEIVE_SIZE", "UNREAD_BODY_BYTES"]  # the classes serve() uses are internal

RECEIVE_SIZE = 65536
"""Bytes asked of the socket per read."""

KEPT_WHILE_STREAMING = 65536
"""Bytes of a next request kept while a response streams; past it the socket is not read until
the response is complete."""

UNREAD_BODY_BYTES = 1024 * 1024
"""Bytes of a request body the app left unread that are read and dropped after its answer, to
keep the connection; a longer rest closes it."""

LINGER = 1.0
"""Seconds a connection closed under a client that may still be sending (a body not read, a
request not understood) is drained first, so the client reads the answer rather than a
reset."""

DIRECT_WRITES = os.name == "posix"
"""Whether an answer is written to the socket's descriptor, with the send timeout only while
the socket is full (POSIX); elsewhere each write goes through Trio's stream under the timeout."""

DISCONNECT = {"type": "http.disconnect"}
CONTINUE = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
STREAM_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError)

log = logging.getLogger("trio_agents.server")
access = logging.getLogger("trio_agents.server.access")


@attrs.frozen
class ConnectionSettings:
    """What every connection of one server is given."""

    app: Any
    lifespan_state: dict[str, Any]
    keep_alive_timeout: float
    max_header_bytes: int
    access_log: bool
    send_timeout: float = math.inf
    """Seconds a client may accept none of an answer (it reads nothing meanwhile); past it,
    the connection is closed as if the client had left."""


class ServerState:
    """Tells idle connections when the server shuts down (they close then)."""

    def __init__(self) -> None:
        self.shutting_down = False
        self._idle: set[trio.CancelScope] = set()

    @contextlib.contextmanager
    def idle(self, timeout: float) -> Iterator[trio.CancelScope]:
        """Wait for a next request in the scope this gives: it ends at ``timeout`` or at
        shutdown."""
        scope = trio.CancelScope(deadline=trio.current_time() + timeout)
        if self.shutting_down:
            scope.cancel()
        self._idle.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._idle.discard(scope)

    def shut_down(self) -> None:
        """Close the idle connections now, and every other one once its response is done."""
        self.shutting_down = True
        for scope in self._idle:
            scope.cancel()


class HTTPConnection:
    """One client connection, serving its requests in turn."""

    def __init__(
        self, stream: trio.SocketStream, settings: ConnectionSettings, server: ServerState
    ) -> None:
        self.stream = stream
        self.settings = settings
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=settings.max_header_bytes)
        self.peer_gone = False
        self._server = server
        self._client = _address(stream.socket.getpeername)
        self._local = _address(stream.socket.getsockname)

    @property
    def shutting_down(self) -> bool:
        """Whether the server is shutting down (this connection closes after its answer)."""
        return self._server.shutting_down

    async def run(self) -> None:
        """Serve requests until either side closes; never raise (but ``Cancelled``)."""
        try:
            while await self._serve_one():
                self.h11.start_next_cycle()
        except STREAM_CLOSED:
            self.peer_gone = True
        except Exception:  # a bug must not take the server down with it
            log.exception("HTTP connection from %s failed", self._client)
        finally:
            await self._close()

    async def next_event(self) -> Any:
        """The next h11 event of the client, reading the socket as needed."""
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except trio.BrokenResourceError:
                data = b""
            self.h11.receive_data(data)

    async def write(self, data: bytes) -> None:
        """Send ``data``; a client that has left makes it a no-op (and is noted).

        A client that accepts none of ``data`` for ``send_timeout`` is taken to have left: a
        client that stops reading would otherwise hold the connection, its task and what the
        answer keeps in memory for as long as it likes.
        """
        if self.peer_gone or not data:
            return
        try:
            if DIRECT_WRITES:
                sent = await self._write_direct(memoryview(data))
            else:
                sent = False
                with trio.move_on_after(self.settings.send_timeout):
                    await self.stream.send_all(data)
                    sent = True
        except (OSError, *STREAM_CLOSED):  # reset, or closed under us: the client left
            self.peer_gone = True
            return
        except trio.Cancelled:  # part of ``data`` may be sent: the connection cannot go on
            self.peer_gone = True
            raise
        if not sent:
            await self._stalled()

    async def _write_direct(self, view: memoryview) -> bool:
        """Whether all of ``view`` went (else the client took none of it for ``send_timeout``).
        The bytes go to the socket at once and the timer runs only while it is full: most
        writes need no wait, and a deadline costs more than the write."""
        await trio.lowlevel.checkpoint_if_cancelled()
        while view:
            view = view[self._send_some(view) :]
            if view and not await self._writable():
                return False
        await trio.lowlevel.cancel_shielded_checkpoint()
        return True

    def _send_some(self, view: memoryview) -> int:
        """The bytes of ``view`` the socket took now (none when it is full). The descriptor is
        asked for at each write: a closed socket's is -1, never a number since reused."""
        try:
            return os.write(self.stream.socket.fileno(), view)
        except BlockingIOError:
            return 0

    async def _writable(self) -> bool:
        """Whether the socket takes bytes again within ``send_timeout``."""
        with trio.move_on_after(self.settings.send_timeout):
            await trio.lowlevel.wait_writable(self.stream.socket)
            return True
        return False

    async def _stalled(self) -> None:
        """Close the connection of a client that stopped reading. Closing also wakes a task
        waiting on the socket for the client to leave: it learns that it has."""
        self.peer_gone = True
        await self.stream.aclose()

    async def _serve_one(self) -> bool:
        request = await self._next_request()
        if request is None:
            return False
        exchange = Exchange(self, request)
        await exchange.run()
        if self.settings.access_log:
            _log_access(self._client, request, exchange.status)
        if self.h11.our_state is not h11.DONE or self.peer_gone or self._server.shutting_down:
            self._take_buffered()  # an empty body is here already: no lingering for it
            return False
        return await self._request_read()

    def _take_buffered(self) -> None:
        """Read what is left of the request body as far as it has arrived."""
        try:
            while self.h11.their_state is h11.SEND_BODY:
                if self.h11.next_event() is h11.NEED_DATA:
                    return
        except h11.RemoteProtocolError:
            return

    async def _request_read(self) -> bool:
        """Whether the request is read whole. What the app left unread of its body is read and
        dropped (the answer promised keep-alive), up to :data:`UNREAD_BODY_BYTES` and within
        ``keep_alive_timeout``; past either, the connection closes."""
        if self.h11.their_state is h11.DONE:  # the usual case: no waiting, no timer
            return True
        dropped = 0
        with trio.move_on_after(self.settings.keep_alive_timeout):
            try:
                while self.h11.their_state is h11.SEND_BODY and dropped <= UNREAD_BODY_BYTES:
                    event = await self.next_event()
                    if isinstance(event, h11.Data):
                        dropped += len(event.data)
            except h11.RemoteProtocolError:
                return False
        return self.h11.their_state is h11.DONE

    async def _next_request(self) -> h11.Request | None:
        try:
            with self._server.idle(self.settings.keep_alive_timeout) as scope:
                event = await self.next_event()
        except h11.RemoteProtocolError as error:
            await self._refuse(error)
            return None
        if scope.cancelled_caught or not isinstance(event, h11.Request):
            return None
        if _head_size(event) > self.settings.max_header_bytes:
            # h11 bounds only a head still incomplete: one that came whole is measured here
            await self._refuse(h11.RemoteProtocolError("request head too large", 431))
            return None
        return event

    async def _refuse(self, error: h11.RemoteProtocolError) -> None:
        """Answer a request h11 could not read, then close."""
        status = error.error_status_hint
        headers, body = _closing_error(f"bad request: {error}")
        response = h11.Response(status_code=status, reason=_reason(status), headers=headers)
        try:
            data = self.h11.send(response) + self.h11.send(h11.Data(data=body))
        except h11.LocalProtocolError:  # too early or too late to answer: just close
            return
        await self.write(data)

    async def _close(self) -> None:
        try:
            if not self.peer_gone and self.h11.their_state in (h11.SEND_BODY, h11.ERROR):
                with trio.move_on_after(LINGER):
                    await self._drain()
        finally:  # also when cancelled while draining
            await self.stream.aclose()

    async def _drain(self) -> None:
        """Half-close, then read what the client still sends until it closes too."""
        try:
            await self.stream.send_eof()
            while await self.stream.receive_some(RECEIVE_SIZE):
                pass
        except STREAM_CLOSED:
            pass


FRAMING_FIELDS = frozenset({b"content-length", b"transfer-encoding", b"connection"})
"""The response fields h11 is shown: those that frame the body or end the connection."""
FIELD_NAME = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
FIELD_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")
"""A field's name (a token) and value (no NUL, no line break or other white space but spaces
and tabs between its visible bytes), as h11 checks them."""


@attrs.frozen
class Head:
    """A response's head, written in one piece with h11's state kept.

    h11 is given only the fields that frame the body or end the connection: it checks them,
    frames the body by them and keeps the connection's state, as for any response. The other
    fields are checked once here and added to the head it writes. h11 checks every field of a
    response again each time it adds one (``Transfer-Encoding``, ``Connection``) and once more as
    it rebuilds the response: more than it spends parsing the request.
    """

    framing: h11.Response
    fields: bytes
    sized: bool
    """Whether the app gave the body's length (its body follows in the same write)."""

    @classmethod
    def of(cls, status: int, pairs: list[tuple[bytes, bytes]]) -> Head:
        """The head of an answer of ``status`` with the app's fields ``pairs``.

        Raises:
            h11.LocalProtocolError: a field h11 would refuse (its name and value are named).
        """
        framing: list[tuple[bytes, bytes]] = []
        fields = [b"date: %s\r\n" % _http_date()]
        sized = False
        for name, value in pairs:
            lower = name.lower()
            if lower in FRAMING_FIELDS:
                framing.append((name, value))
                sized = sized or lower == b"content-length"
            elif FIELD_NAME.fullmatch(name) and FIELD_VALUE.fullmatch(value):
                fields.append(b"%s: %s\r\n" % (name, value))
            else:
                raise h11.LocalProtocolError(f"Illegal header {name!r}: {value!r}")
        response = h11.Response(status_code=status, headers=framing, reason=_reason(status))
        return cls(response, b"".join(fields), sized)

    def send(self, connection: h11.Connection) -> bytes:
        """The head's bytes, once ``connection`` has taken the response."""
        written = connection.send(self.framing)
        assert written is not None  # only ConnectionClosed writes nothing
        return written[:-2] + self.fields + b"\r\n"


class Exchange:
    """One request and its response: the ASGI ``receive`` and ``send`` of one app call."""

    def __init__(self, connection: HTTPConnection, request: h11.Request) -> None:
        self._conn = connection
        self._request = request
        self.status: int | None = None
        self._pending_head: Head | None = None
        self._complete = False
        self._sent = False
        self._body_done = False
        self._stash: Any = None
        self._bad_body: str | None = None
        self._watch: trio.CancelScope | None = None
        self._wake: trio.Event | None = None
        self._head_only = request.method == b"HEAD"

    async def run(self) -> None:
        """Call the app; answer 500 (or 400 for an unreadable body) if it did not answer.

        A path whose percent-encoded bytes are not UTF-8 is answered 400 without calling the app:
        decoded leniently, ``%FF`` and ``%FE`` would both name the id ``"\ufffd"``.
        """
        try:
            scope = self._scope()
        except UnicodeDecodeError as error:
            await self._answer(400, f"path: its percent-encoded bytes are not UTF-8 ({error})")
            return
        try:
            await self._conn.settings.app(scope, self.receive, self.send)
        except Exception:
            log.exception("the app failed on %s %s", self._method(), self._target())
        if self.status is None:
            await self._answer_instead()

    async def receive(self) -> dict[str, Any]:
        """The next body part, then (after the whole body) ``http.disconnect`` when the client
        leaves or the response is complete."""
        if not self._body_done:
            return await self._read_body()
        await self._until_disconnect()
        return DISCONNECT

    async def send(self, message: dict[str, Any]) -> None:
        if self._bad_body is not None:  # the app saw a disconnect; the client gets a 400
            return
        kind = message["type"]
        if kind == "http.response.body":
            await self._send_body(message.get("body", b""), message.get("more_body", False))
        elif kind == "http.response.start":
            await self._start(message["status"], message.get("headers", ()))
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r}")

    async def _start(self, status: int, headers: Any) -> None:
        if self.status is not None:
            raise RuntimeError("the response has already started")
        pairs = [(bytes(name), bytes(value)) for name, value in headers]
        if self._conn.shutting_down:  # the client must not send another request here
            pairs.append((b"connection", b"close"))
        head = Head.of(status, pairs)
        self.status = status
        if head.sized:
            self._pending_head = head  # its body follows at once: one write for both
        else:  # a stream: the client sees the head now
            await self._conn.write(head.send(self._conn.h11))

    async def _send_body(self, body: bytes, more: bool) -> None:
        if self.status is None:
            raise RuntimeError("http.response.body before http.response.start")
        if self._complete:
            raise RuntimeError("the response is already complete")
        h = self._conn.h11
        parts = []
        if self._pending_head is not None:
            parts.append(self._pending_head.send(h))
            self._pending_head = None
        if body and not self._head_only:
            parts.append(h.send(h11.Data(data=body)))
        if not more:
            parts.append(h.send(h11.EndOfMessage()))
            self._complete = True
        await self._conn.write(b"".join(parts))
        if not more:  # only now: an app told of the end may cancel its sending at once
            self._sent = True
            if self._watch is not None:
                self._watch.cancel()
            self._wake_all()

    async def _read_body(self) -> dict[str, Any]:
        conn = self._conn
        if conn.h11.they_are_waiting_for_100_continue:
            await conn.write(conn.h11.send(CONTINUE))
        try:
            event = self._stash if self._stash is not None else await conn.next_event()
            self._stash = None
            if isinstance(event, h11.Data):
                return self._body_part(bytes(event.data), conn.h11.next_event())
        except h11.RemoteProtocolError as error:
            self._bad_body = str(error)
            self._body_done = True
            return DISCONNECT
        self._body_done = True
        if isinstance(event, h11.EndOfMessage):
            return {"type": "http.request", "body": b"", "more_body": False}
        self._peer_left()
        return DISCONNECT

    def _body_part(self, body: bytes, following: Any) -> dict[str, Any]:
        if isinstance(following, h11.EndOfMessage):
            self._body_done = True
            return {"type": "http.request", "body": body, "more_body": False}
        if following is not h11.NEED_DATA:
            self._stash = following
        return {"type": "http.request", "body": body, "more_body": True}

    async def _until_disconnect(self) -> None:
        """Return once the client has left or the response is complete. One caller at a time
        watches the socket; others wait for it (and take over if it is cancelled)."""
        while not (self._sent or self._conn.peer_gone or self._bad_body is not None):
            if self._watch is not None:
                if self._wake is None:
                    self._wake = trio.Event()
                await self._wake.wait()
                continue
            self._watch = trio.CancelScope()
            try:
                with self._watch:
                    await self._watch_socket()
            finally:
                self._watch = None
                self._wake_all()

    def _wake_all(self) -> None:
        if self._wake is not None:
            self._wake.set()
            self._wake = None

    async def _watch_socket(self) -> None:
        conn, kept = self._conn, 0
        try:
            while kept <= KEPT_WHILE_STREAMING:
                data = await conn.stream.receive_some(RECEIVE_SIZE)
                if not data:
                    break
                conn.h11.receive_data(data)  # the start of a next request: kept for it
                kept += len(data)
            else:
                await trio.sleep_forever()  # enough kept: wait for the response to end
        except STREAM_CLOSED:
            pass
        self._peer_left()

    def _peer_left(self) -> None:
        self._conn.peer_gone = True
        self._wake_all()

    async def _answer_instead(self) -> None:
        if self._bad_body is not None:
            status, detail = 400, f"bad request body: {self._bad_body}"
        else:
            status, detail = 500, "Internal Server Error"
        await self._answer(status, detail)

    async def _answer(self, status: int, detail: str) -> None:
        """Answer ``{"detail": detail}`` with ``status``, then close the connection."""
        headers, body = _closing_error(detail)
        await self._start(status, headers)
        await self._send_body(body, False)

    def _scope(self) -> dict[str, Any]:
        """The ASGI scope of the request.

        Raises:
            UnicodeDecodeError: the path's percent-encoded bytes are not UTF-8.
        """
        request, conn = self._request, self._conn
        raw_path, _, query = _origin_form(request.target).partition(b"?")
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode("ascii"),
            "method": self._method(),
            "scheme": "http",
            "path": unquote(raw_path.decode("ascii"), errors="strict"),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": list(request.headers),
            "client": conn._client,
            "server": conn._local,
            "state": dict(conn.settings.lifespan_state),
        }

    def _method(self) -> str:
        return self._request.method.decode("ascii")

    def _target(self) -> str:
        return self._request.target.decode("ascii", "replace")


def _origin_form(target: bytes) -> bytes:
    """``target`` without the scheme and authority of an absolute-form target
    (``http://host/path?q`` is ``/path?q``), which a server must accept (RFC 9112 §3.2.2)."""
    scheme, sep, rest = target.partition(b"://")
    if not sep or scheme.lower() not in (b"http", b"https"):
        return target
    start = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
    path = rest[start:]
    return path if path.startswith(b"/") else b"/" + path


@functools.cache
def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _head_size(request: h11.Request) -> int:
    """The bytes of ``request``'s head as sent (give or take the spaces around values)."""
    line = len(request.method) + len(request.target) + len(b"  HTTP/1.1\r\n")
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers) + 2


def _address(name_of: Callable[[], Any]) -> tuple[str, int] | None:
    """``(host, port)`` of one end of a socket, or None. A client that reset its connection
    before it was accepted has no address any more (``ENOTCONN``): its requests, if any, are
    served without one."""
    try:
        sockname = name_of()
    except OSError:
        return None
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return (str(sockname[0]), int(sockname[1]))
    return None


def _closing_error(detail: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of a ``{"detail": ...}`` answer after which the connection closes
    (ASCII JSON, so a lone surrogate in ``detail`` is escaped)."""
    body = json.dumps({"detail": detail}, separators=(",", ":")).encode()
    length = str(len(body)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", length),
        (b"connection", b"close"),
    ]
    return headers, body


_date_cache: tuple[int, bytes] = (0, b"")


def _http_date() -> bytes:
    """The ``Date`` header's value, made once a second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True).encode())
    return _date_cache[1]


def _log_access(client: tuple[str, int] | None, request: h11.Request, status: int | None) -> None:
    who = client[0] if client else "-"
    line = request.method.decode("ascii") + " " + request.target.decode("ascii", "replace")
    access.info('%s - "%s HTTP/%s" %s', who, line, request.http_version.decode(), status or "-")
