"""HTTP plumbing shared by the provider clients: one client, retries, SSE, typed errors.

:class:`HttpModel` owns one :class:`httpx.AsyncClient` for its whole life (close it with
``await model.aclose()``, ``async with model:`` or by closing the :class:`~trio_agents.Runner`
that uses it). Requests are retried on 429, 5xx and transport errors with exponential backoff and
jitter, honouring ``Retry-After``, bounded by attempts and by total time (:class:`RetryPolicy`).
Every failure surfaces as a :class:`~trio_agents.ModelError` subclass naming the provider and the
model, with API keys scrubbed from its text.
"""

from __future__ import annotations

import codecs
import contextlib
import email.utils
import json
import math
import random
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Any, ClassVar, Self

import attrs
import httpx
import trio

from .._errors import (
    ModelHTTPError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTransportError,
)
from ._base import Model

__all__ = ["HttpModel", "RetryPolicy", "ServerSentEvent", "parse_sse_lines"]

_BODY_EXCERPT = 500
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the only line ends of an event stream


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """When and how often a failed request is tried again.

    A request is attempted at most ``attempts`` times. Before attempt *n* (from 2) the client
    sleeps ``min(max_delay, initial_delay * multiplier ** (n - 2))``, scaled by a random factor in
    ``[1 - jitter, 1 + jitter]``, or what the server's ``Retry-After`` asks for. No retry starts
    once ``total_timeout`` seconds have passed since the first attempt, or when its wait would end
    after that.
    """

    attempts: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    initial_delay: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    multiplier: float = attrs.field(default=2.0, validator=attrs.validators.ge(1))
    max_delay: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    jitter: float = attrs.field(
        default=0.2, validator=attrs.validators.and_(attrs.validators.ge(0), attrs.validators.le(1))
    )
    total_timeout: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retry_statuses: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504, 529})

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before ``attempt`` (2, 3, ...), jitter included."""
        try:
            growth = self.multiplier ** max(0, attempt - 2)
        except OverflowError:  # a huge attempt number: the cap applies
            growth = math.inf
        raw = self.initial_delay * growth if self.initial_delay else 0.0
        base = min(self.max_delay, raw)
        return max(0.0, base * (1 + self.jitter * (2 * rng.random() - 1)))


NO_RETRY = RetryPolicy(attempts=1)


@attrs.frozen
class ServerSentEvent:
    """One server-sent event: ``event`` type (``"message"`` when absent) and joined ``data``."""

    data: str
    event: str = "message"
    id: str | None = None


def parse_sse_lines(lines: Iterable[str]) -> list[ServerSentEvent]:
    """Parse SSE text (already split into lines) into events (WHATWG rules).

    As the standard says, an event is dispatched by the blank line that ends it: an incomplete
    event at the end of the text is discarded.
    """
    parser = _SseParser()
    return [e for line in lines if (e := parser.feed(line)) is not None]


class _SseParser:
    """The WHATWG event-stream interpretation, one line (without its line break) at a time."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._first = True
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._pending_cr = False

    def feed(self, line: str) -> ServerSentEvent | None:
        line = line.rstrip("\r\n")
        if self._first:  # a byte-order mark may start the stream
            self._first = False
            line = line.removeprefix("\ufeff")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None

    def feed_bytes(self, chunk: bytes) -> list[ServerSentEvent]:
        """Take a piece of the raw stream (UTF-8, any chunking); return the events it ends."""
        text = self._decoder.decode(chunk)
        if not text:  # nothing, or half a UTF-8 sequence: the pending CR still waits
            return []
        if self._pending_cr:
            text = text.removeprefix("\n")  # the second half of a CRLF cut in two
        self._pending_cr = text.endswith("\r")
        lines = _LINE_BREAK.split(self._partial + text)
        self._partial = lines.pop()  # not yet ended; dropped if the stream stops here
        return [e for line in lines if (e := self.feed(line)) is not None]

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = ServerSentEvent("\n".join(self._data), self._event or "message", self._id)
        self._data, self._event = [], ""
        return event


def _retry_after(response: httpx.Response) -> float | None:
    """The server's wait hint in seconds: ``retry-after-ms`` (OpenAI, Azure) or ``Retry-After``."""
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            seconds = float(millis) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(seconds):
                return max(0.0, seconds)
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


class HttpModel(Model):
    """Base of the provider clients: an :class:`httpx.AsyncClient` with retries and typed errors.

    Subclasses set :attr:`provider`, build URLs and payloads, and translate answers.
    ``transport`` lets tests plug in an :class:`httpx.MockTransport`.
    """

    provider: ClassVar[str] = "http"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.retry = retry or RetryPolicy()
        self._secrets = tuple(s for s in (api_key,) if s)
        self._rng = random.Random(seed)
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=dict(headers or {}),
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={str(self._client.base_url)!r})"

    @property
    def client(self) -> httpx.AsyncClient:
        """The one HTTP client of this model."""
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (idempotent)."""
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()

    # -- errors -------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        """``text`` with every API key of this model replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _names(self) -> dict[str, str]:
        return {"provider": self.provider, "model": self.model}

    def response_error(self, message: str) -> ModelResponseError:
        """A :class:`ModelResponseError` for a malformed answer."""
        return ModelResponseError(self.scrub(message), **self._names())

    def _status_error(self, response: httpx.Response, body: str) -> ModelHTTPError:
        excerpt = self.scrub(body)[:_BODY_EXCERPT]  # scrub first: no key prefix survives
        reason = self.scrub(response.reason_phrase or "request failed")
        if response.status_code == 429:
            return ModelRateLimitError(
                reason,
                status=429,
                body=excerpt,
                retry_after=_retry_after(response),
                **self._names(),
            )
        return ModelHTTPError(reason, status=response.status_code, body=excerpt, **self._names())

    def _transport_error(self, exc: httpx.TransportError) -> ModelTransportError:
        detail = self.scrub(str(exc)) or type(exc).__name__
        return ModelTransportError(f"{type(exc).__name__}: {detail}", **self._names())

    def _read_error(self, exc: httpx.RequestError) -> ModelTransportError | ModelResponseError:
        """The error for a failure while reading a successful answer's body."""
        if isinstance(exc, httpx.TransportError):
            return self._transport_error(exc)
        return self.response_error(f"answer body could not be decoded: {type(exc).__name__}")

    # -- requests -----------------------------------------------------------------------------

    async def post_json(self, path: str, payload: Mapping[str, Any]) -> Any:
        """POST ``payload`` as JSON and return the decoded JSON answer (with retries)."""
        async with self._attempts(path, payload) as response:
            try:
                body = await response.aread()
            except httpx.RequestError as exc:
                raise self._read_error(exc) from exc
        try:
            return json.loads(body)
        except ValueError as exc:
            excerpt = self.scrub(body.decode("utf-8", "replace"))[:200]
            raise self.response_error(f"answer is not JSON: {excerpt!r}") from exc

    @contextlib.asynccontextmanager
    async def post_sse(
        self, path: str, payload: Mapping[str, Any]
    ) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
        """POST and yield an iterator of server-sent events.

        Retries happen only until the response headers arrive; a failure mid-stream raises
        :class:`~trio_agents.ModelTransportError`. Leaving the block closes the response.
        """
        async with (
            self._attempts(path, payload) as response,
            contextlib.aclosing(self._events(response)) as events,
        ):
            yield events

    async def _events(self, response: httpx.Response) -> AsyncGenerator[ServerSentEvent]:
        parser = _SseParser()  # not aiter_lines(): it also splits at U+2028, U+0085, ...
        try:
            async for chunk in response.aiter_bytes():
                for event in parser.feed_bytes(chunk):
                    yield event
        except httpx.RequestError as exc:
            raise self._read_error(exc) from exc

    @contextlib.asynccontextmanager
    async def _attempts(
        self, path: str, payload: Mapping[str, Any]
    ) -> AsyncIterator[httpx.Response]:
        """The first successful response (headers read, body not yet), retrying per policy."""
        deadline = trio.current_time() + self.retry.total_timeout
        attempt = 1
        while True:
            outcome = await self._try(path, payload, attempt)
            if isinstance(outcome, httpx.Response):
                break
            attempt += 1
            if attempt > self.retry.attempts or trio.current_time() + outcome.wait > deadline:
                raise outcome.error from outcome.cause
            await trio.sleep(outcome.wait)
        try:
            yield outcome
        finally:
            with trio.CancelScope(shield=True):
                await outcome.aclose()

    async def _try(
        self, path: str, payload: Mapping[str, Any], attempt: int
    ) -> httpx.Response | _Failure:
        request = self._client.build_request("POST", path, json=payload)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TransportError as exc:
            wait = self.retry.backoff(attempt + 1, self._rng)
            return _Failure(self._transport_error(exc), exc, wait)
        if response.is_success:
            return response
        try:
            body = (await response.aread()).decode("utf-8", "replace")
        except httpx.RequestError as exc:
            body = f"<body unreadable: {type(exc).__name__}>"
        finally:
            with trio.CancelScope(shield=True):
                await response.aclose()
        error = self._status_error(response, body)
        if response.status_code not in self.retry.retry_statuses:
            raise error
        hint = _retry_after(response)
        wait = hint if hint is not None else self.retry.backoff(attempt + 1, self._rng)
        return _Failure(error, None, wait)


@attrs.frozen
class _Failure:
    """A failed attempt that may be retried after ``wait`` seconds."""

    error: Exception
    cause: BaseException | None
    wait: float
