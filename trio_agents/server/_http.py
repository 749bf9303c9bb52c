"""HTTP plumbing of the server: JSON bodies and responses, errors naming the field, bearer auth."""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .._errors import ConfigurationError, SerializationError
from .._serde import dumps, loads, structure
from ..sessions import Session

__all__ = ["json_response", "read_json", "session_json"]

T = TypeVar("T")

JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


class HTTPError(Exception):
    """An error answered as ``{"detail": ...}`` with ``status``."""

    def __init__(self, status: int, detail: str, *, headers: Mapping[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


def json_response(
    data: Any, status: int = 200, *, headers: Mapping[str, str] | None = None
) -> Response:
    """A compact JSON response (``data`` must already be plain JSON)."""
    return Response(
        dumps(data, path="response").encode(),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def error_response(error: HTTPError) -> Response:
    return json_response({"detail": error.detail}, error.status, headers=error.headers)


def json_type(value: Any) -> str:
    """How a JSON value is named in error messages."""
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return JSON_TYPES.get(type(value), type(value).__name__)


async def read_json(request: Request, *, limit: int) -> Any:
    """The request body parsed as JSON (None when empty).

    Raises:
        HTTPError: 413 when the body is longer than ``limit`` bytes (announced or sent), 400 when
            it is not JSON.
    """
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _too_large(limit)
    body = bytearray()
    async with contextlib.aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                raise _too_large(limit)
    if not body.strip():
        return None
    try:
        return loads(bytes(body))
    except SerializationError as exc:
        raise HTTPError(400, f"the request body is not valid JSON: {exc}") from exc


def _too_large(limit: int) -> HTTPError:
    return HTTPError(413, f"the request body is larger than the limit of {limit} bytes")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


class Fields:
    """Typed reads of a JSON object body. Names are camelCase; snake_case keys are accepted too.

    Every error is a 422 :class:`HTTPError` whose detail starts with the field's name.
    """

    def __init__(self, data: Any, *, where: str = "body") -> None:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise HTTPError(422, f"{where}: expected a JSON object, got {json_type(data)}")
        self.data: dict[str, Any] = data

    def get(self, name: str) -> Any:
        value = self.data.get(name)
        return self.data.get(_snake(name)) if value is None else value

    def required(self, name: str) -> Any:
        value = self.get(name)
        if value is None:
            raise HTTPError(422, f"{name}: field required")
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


def session_json(session: Session, *, with_events: bool = True) -> dict[str, Any]:
    """A session as ADK writes it: ``{id, appName, userId, state, events, lastUpdateTime}``."""
    return {
        "id": session.id,
        "appName": session.app_name,
        "userId": session.user_id,
        "state": session.state,
        "events": [event.to_dict() for event in session.events] if with_events else [],
        "lastUpdateTime": session.last_update_time,
    }


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
