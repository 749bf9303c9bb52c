"""HTTP plumbing of the server: JSON bodies and responses, errors naming the field, bearer auth."""

from __future__ import annotations

import difflib
import functools
import hmac
import itertools
import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import trio
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .._errors import ConfigurationError, SerializationError, SessionBusyError
from .._serde import check_storable, deeper_stack, dumps, loads, structure
from ..sessions import Session

__all__ = ["json_response", "read_json", "session_json"]

T = TypeVar("T")

JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


class HTTPError(Exception):
    """An error answered as ``{"detail": ...}`` (plus the keys of ``extra``) with ``status``."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers
        self.extra = extra or {}


def json_response(
    data: Any, status: int = 200, *, headers: Mapping[str, str] | None = None
) -> Response:
    """A compact JSON response (``data`` must already be plain JSON).

    Values no current write lets into a store, but older versions did, still answer: a lone
    surrogate is written as its ``\\u`` escape, a value nested deeper than the stack allows
    is encoded with room to spare.
    """
    return Response(
        _encode(data), status_code=status, media_type="application/json", headers=headers
    )


def _encode(data: Any) -> bytes:
    try:
        return dumps(data, path="response").encode()
    except UnicodeEncodeError:  # a lone surrogate: ASCII JSON escapes it
        return _ascii_json(data)
    except RecursionError:
        with deeper_stack():
            return _ascii_json(data)


def _ascii_json(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), allow_nan=False).encode()


RETRY_AFTER = "1"
"""Seconds a client is told to wait (``Retry-After``) after a 409 busy or a 503."""


def busy(exc: SessionBusyError) -> HTTPError:
    """The 409 of a session another run holds: worth retrying, so with ``Retry-After``."""
    return HTTPError(409, str(exc), headers={"Retry-After": RETRY_AFTER})


def unavailable(detail: str) -> HTTPError:
    """A 503 refusal under load, with ``Retry-After``."""
    return HTTPError(503, detail, headers={"Retry-After": RETRY_AFTER})


def error_response(error: HTTPError) -> Response:
    body = {"detail": error.detail, **error.extra}
    return json_response(body, error.status, headers=error.headers)


def json_type(value: Any) -> str:
    """How a JSON value is named in error messages."""
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return JSON_TYPES.get(type(value), type(value).__name__)


@attrs.frozen
class BodyLimits:
    """How much of a request body is read, and for how long."""

    max_bytes: int
    read_seconds: float = math.inf


async def read_json(request: Request, limits: BodyLimits) -> Any:
    """The request body parsed as JSON (None when empty).

    Raises:
        HTTPError: 413 when the body is longer than ``limits.max_bytes`` (announced or sent), 408
            (and the connection is closed) when it has not arrived whole within
            ``limits.read_seconds``, 400 when the client left before sending it whole
            (the answer goes nowhere; nothing is logged as a failure), when it is not JSON, or holds
            a value no store could keep (a lone surrogate, nesting deeper than
            :data:`~trio_agents._serde.MAX_DEPTH`); the detail names where.
    """
    limit, timeout = limits.max_bytes, limits.read_seconds
    length = request.headers.get("content-length", "")
    if length.isascii() and length.isdigit() and int(length) > limit:
        raise _too_large(limit)
    with trio.move_on_after(timeout) as reading:
        body = await _read_body(request.receive, limit)
    if reading.cancelled_caught:
        raise HTTPError(408, f"the request body did not arrive within {timeout:g} s", headers=CLOSE)
    if not body.strip():
        return None
    try:
        data = loads(bytes(body))
    except SerializationError as exc:
        raise HTTPError(400, f"the request body is not valid JSON: {exc}") from exc
    try:
        check_storable(data, "body")
    except SerializationError as exc:
        raise HTTPError(400, str(exc)) from exc
    return data


async def _read_body(receive: Receive, limit: int) -> bytearray:
    """The request body, read straight from the ASGI messages (413 once it is past ``limit``)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":  # a client leaving is no failure of the app
            raise HTTPError(400, "the client left before sending the whole body", headers=CLOSE)
        body += message.get("body", b"")
        if len(body) > limit:
            raise _too_large(limit)
        if not message.get("more_body", False):
            return body


MAX_NAME_CHARS = 1024
"""The longest session id or artifact filename a request may create: percent-encoded (up to 12
bytes a character), a longer one might not fit in a request head of the default 16 KiB, so no
route could name it again."""


def check_reachable(field: str, name: str) -> str:
    """``name`` if a route's path can name it (no ``/``, at most :data:`MAX_NAME_CHARS`).

    Raises:
        HTTPError: 422 naming ``field``.
    """
    if "/" in name:
        raise HTTPError(422, f"{field}: {name!r:.80} contains '/', which no route's path can reach")
    if len(name) > MAX_NAME_CHARS:
        raise HTTPError(
            422,
            f"{field}: {name[:40]!r}... is {len(name)} characters long, more than the "
            f"{MAX_NAME_CHARS} a route's path can hold",
        )
    return name


CLOSE = {"Connection": "close"}
"""Sent with refusals after which the rest of the request is not read."""


def _too_large(limit: int) -> HTTPError:
    return HTTPError(
        413, f"the request body is larger than the limit of {limit} bytes", headers=CLOSE
    )


@functools.lru_cache(maxsize=256)
def _snake(name: str) -> str:
    """``name`` in snake_case (field names are few: each is worked out once)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _folded(name: str) -> str:
    """``name`` as compared for near misses: ``newMessage``, ``new_message`` → ``newmessage``."""
    return name.replace("_", "").lower()


def near_miss(key: str, names: Collection[str]) -> str | None:
    """The name in ``names`` that ``key`` most likely misspells (None: it is not a near miss)."""
    folded = {_folded(name): name for name in names}
    if _folded(key) in folded:
        return None
    found = difflib.get_close_matches(_folded(key), list(folded), n=1, cutoff=NEAR_MISS)
    return folded[found[0]] if found else None


NEAR_MISS = 0.8
"""How close (difflib's ratio) an unknown key must be to a field's name to count as a typo."""

MAX_KEYS_COMPARED = 64
"""Unknown keys of a body compared with the fields' names at most. Each comparison costs difflib
tens of microseconds, on the server's one thread: the million keys a body under the size limit
can hold would stall every request for a minute."""


class Fields:
    """Typed reads of a JSON object body. Names are camelCase; snake_case keys are accepted too.

    Every error is a 422 :class:`HTTPError` whose detail starts with the field's name. Unknown
    keys are ignored (ADK's clients send some the server has no use for), except near misses of
    a field's name: a missing field names the key that was probably meant for it, and
    :meth:`check_unknown` refuses a misspelt optional one.
    """

    def __init__(self, data: Any, *, where: str = "body") -> None:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise HTTPError(422, f"{where}: expected a JSON object, got {json_type(data)}")
        self.data: dict[str, Any] = data
        self.names: set[str] = set()

    def get(self, name: str) -> Any:
        self.names.add(name)
        value = self.data.get(name)
        return self.data.get(_snake(name)) if value is None else value

    def required(self, name: str) -> Any:
        value = self.get(name)
        if value is None:
            unknown = self._unknown({name, _snake(name)})
            misspelt = [key for key in unknown if near_miss(key, [name]) == name]
            hint = f" (the body has {misspelt[0]!r}: did you mean {name!r}?)" if misspelt else ""
            raise HTTPError(422, f"{name}: field required{hint}")
        return value

    def check_unknown(self, *ignored: str) -> None:
        """Refuse a key that misspells a field read so far (``ignored`` names are accepted).

        Raises:
            HTTPError: 422 naming the unknown key and the field it is close to.
        """
        known = self.names | {_snake(name) for name in self.names} | set(ignored)
        for key in self._unknown(known):
            meant = near_miss(key, self.names)
            if meant is not None:
                raise HTTPError(422, f"{key}: unknown field; did you mean {meant!r}?")

    def _unknown(self, known: Collection[str]) -> Iterator[str]:
        """The body's first :data:`MAX_KEYS_COMPARED` keys not in ``known``."""
        return itertools.islice((k for k in self.data if k not in known), MAX_KEYS_COMPARED)

    def identifier(self, name: str, *, required: bool = False) -> str | None:
        """A string naming an app, user or session: no NUL character (no store keeps one)."""
        value = self.text(name, required=required)
        if value is not None and "\x00" in value:
            raise HTTPError(422, f"{name}: must not contain NUL characters")
        return value

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self.required(name) if required else self.get(name)
        if value is not None and not isinstance(value, str):
            raise HTTPError(422, f"{name}: expected a string, got {json_type(value)}")
        return value

    def flag(self, name: str) -> bool:
        value = self.get(name)
        if value is not None and not isinstance(value, bool):
            raise HTTPError(422, f"{name}: expected a boolean, got {json_type(value)}")
        return bool(value)

    def mapping(self, name: str, *, required: bool = False) -> dict[str, Any] | None:
        value = self.required(name) if required else self.get(name)
        if value is not None and not isinstance(value, dict):
            raise HTTPError(422, f"{name}: expected an object, got {json_type(value)}")
        return value

    def items(self, name: str) -> list[Any]:
        value = self.get(name)
        if value is not None and not isinstance(value, list):
            raise HTTPError(422, f"{name}: expected an array, got {json_type(value)}")
        return value or []

    def choice(self, name: str, options: Sequence[str], default: str) -> str:
        value = self.text(name)
        if value is None:
            return default
        if value not in options:
            raise HTTPError(422, f"{name}: expected one of {list(options)}, got {value!r}")
        return value

    def record(self, name: str, cls: type[T], *, required: bool = False) -> T | None:
        value = self.required(name) if required else self.get(name)
        return None if value is None else parse_record(value, cls, name)


def parse_record(value: Any, cls: type[T], where: str) -> T:
    """``structure`` with its errors answered as 422 (the message names the path)."""
    try:
        return structure(value, cls, where)
    except SerializationError as exc:
        raise HTTPError(422, str(exc)) from exc


def session_json(
    session: Session, *, with_events: bool = True, paths: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A session as ADK writes it: ``{id, appName, userId, state, events, lastUpdateTime}``.

    ``paths`` (agent name → node path) adds each event's ``nodeInfo``, as ADK's dev UI reads it.
    """
    return {
        "id": session.id,
        "appName": session.app_name,
        "userId": session.user_id,
        "state": session.state,
        "events": [_event_json(e, paths) for e in session.events] if with_events else [],
        "lastUpdateTime": session.last_update_time,
    }


def _event_json(event: Any, paths: Mapping[str, str] | None) -> dict[str, Any]:
    data: dict[str, Any] = event.to_dict()
    path = paths.get(event.author) if paths else None
    if path:
        data["nodeInfo"] = {"path": path}
    return data


class JsonCors(CORSMiddleware):
    """Starlette's CORS middleware, with a refused preflight answered as every other refusal:
    ``{"detail": "Disallowed CORS origin"}`` (it is plain text there)."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        detail = bytes(response.body).decode()
        kept = {k: v for k, v in response.headers.items() if k not in _BODY_HEADERS}
        return error_response(HTTPError(response.status_code, detail, headers=kept))


_BODY_HEADERS = frozenset({"content-length", "content-type"})


class RefuseNul:
    """ASGI middleware: a path holding a NUL character (``%00``) is 400, as no store keeps one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "\x00" in scope["path"]:
            error = HTTPError(400, "path: must not contain NUL characters (%00)")
            await error_response(error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BearerAuth:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer <token>`` (else 401).

    Paths in ``open_paths`` (the health probe, a UI's static files) stay open; one ending in
    ``*`` opens every path it prefixes. CORS preflights never get here: the CORS middleware sits
    outside and answers them.
    """

    def __init__(self, app: ASGIApp, *, token: str, open_paths: Collection[str] = ()) -> None:
        if not token:
            raise ConfigurationError("the bearer token must not be empty")
        self.app = app
        self._token = token.encode()
        self._open = frozenset(p for p in open_paths if not p.endswith("*"))
        self._open_prefixes = tuple(p.removesuffix("*") for p in open_paths if p.endswith("*"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._is_open(scope["path"]) or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        error = HTTPError(
            401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )
        await error_response(error)(scope, receive, send)

    def _is_open(self, path: str) -> bool:
        return path in self._open or path.startswith(self._open_prefixes)

    def _allowed(self, scope: Scope) -> bool:
        scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self._token
        )
