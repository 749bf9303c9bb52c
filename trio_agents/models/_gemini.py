"""The Gemini API (Google AI): ``generateContent`` and ``streamGenerateContent`` over httpx.

:class:`GeminiModel` posts to ``{base_url}/v1beta/models/{model}:generateContent`` (and
``:streamGenerateContent?alt=sse`` for streaming). The key comes from ``api_key=``,
``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` (in that order, as in the google-genai SDK) and travels
only in the ``x-goog-api-key`` header, never in a URL (URLs get logged). The translation is pure
(:mod:`~trio_agents.models._gemini_wire`).

Streaming: every event of the SSE stream is one ``GenerateContentResponse``; the answer ends with
a chunk carrying a finish reason (or a blocked prompt). A stream that stops before one is a
:class:`~trio_agents.ModelTransportError`; an error object in the stream (``{"error": ...}``) a
:class:`~trio_agents.ModelHTTPError` with its ``code``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Self
from urllib.parse import quote

import httpx
import trio

from .._errors import ConfigurationError, ModelHTTPError, ModelTransportError
from ._base import LlmRequest, LlmResponse
from ._gemini_wire import (
    PROVIDER,
    StreamAccumulator,
    build_request_body,
    error_from_payload,
    is_error_payload,
    parse_response,
)
from ._http import HttpModel, RetryPolicy

__all__ = ["GeminiModel"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_KEY_ENVS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
API_VERSION = "v1beta"


class GeminiModel(HttpModel):
    """A Gemini model through the Gemini API.

    ``GeminiModel("gemini-2.5-flash")`` reads the key from ``GOOGLE_API_KEY`` (or
    ``GEMINI_API_KEY``); the registry resolves names ``gemini-…`` (and ``models/gemini-…``)
    through :meth:`from_name`.
    ``base_url`` (or ``GOOGLE_GEMINI_BASE_URL``) points at another endpoint, e.g. a proxy or a
    test server. Other keyword arguments are those of
    :class:`~trio_agents.models.HttpModel`. A missing key raises
    :class:`~trio_agents.ConfigurationError` when the model is constructed.
    """

    provider = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
    ) -> None:
        model = model.removeprefix("models/")
        if not model:
            raise ConfigurationError("GeminiModel needs a model name, e.g. 'gemini-2.5-flash'")
        key = api_key or next((os.environ[e] for e in API_KEY_ENVS if os.environ.get(e)), None)
        if not key:
            raise ConfigurationError(
                f"Gemini model {model!r} needs an API key: pass api_key= or set "
                f"{' or '.join(API_KEY_ENVS)}"
            )
        super().__init__(
            model,
            api_key=key,
            base_url=base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL,
            headers={**(headers or {}), "x-goog-api-key": key},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry=retry,
            transport=transport,
            seed=seed,
        )
        self._path = f"{API_VERSION}/models/{quote(model, safe='.-_')}"

    @classmethod
    def from_name(cls, name: str) -> Self:
        """The model for a registry name such as ``"gemini-2.5-flash"``."""
        return cls(name)

    def request_body(self, request: LlmRequest) -> dict[str, Any]:
        """The JSON body this model posts for ``request``."""
        return build_request_body(request)

    async def generate(self, request: LlmRequest) -> LlmResponse:
        """One complete answer (``:generateContent``)."""
        answer = await self.post_json(f"{self._path}:generateContent", self.request_body(request))
        if is_error_payload(answer):
            raise self._payload_error(answer)
        return parse_response(answer, fail=self.response_error)

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[LlmResponse]]:
        """Text deltas as partial responses, then the aggregate (``:streamGenerateContent``)."""
        async with self._chunks(self.request_body(request)) as chunks:
            yield chunks

    @trio.as_safe_channel
    async def _chunks(self, body: dict[str, Any]) -> AsyncGenerator[LlmResponse]:
        accumulator = StreamAccumulator(fail=self.response_error)
        path = f"{self._path}:streamGenerateContent?alt=sse"
        async with self.post_sse(path, body) as events:
            try:
                async for event in events:  # read to the end: leaves no half-read generators
                    for chunk in accumulator.feed(self._decoded(event.data)):
                        yield chunk
            except ModelTransportError:
                if not accumulator.done:
                    raise  # a connection lost after the finish reason loses nothing
        if not accumulator.done:
            raise ModelTransportError(
                "the answer stream ended before a finish reason",
                provider=PROVIDER,
                model=self.model,
            )
        yield accumulator.final()

    def _decoded(self, data: str) -> object:
        """One stream event's ``GenerateContentResponse``; an error object raises."""
        try:
            decoded = json.loads(data)
        except ValueError as exc:
            message = f"a stream event is not JSON: {data[:200]!r}"
            raise self.response_error(message) from exc
        if is_error_payload(decoded):
            raise self._payload_error(decoded)
        return decoded

    def _payload_error(self, payload: Mapping[str, Any]) -> ModelHTTPError:
        return error_from_payload(payload, model=self.model, scrub=self.scrub)
