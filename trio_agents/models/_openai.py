"""OpenAI Chat Completions, and the servers that speak it (vLLM, Ollama, llama.cpp, ...).

:class:`OpenAIModel` posts to ``{base_url}/chat/completions``. The translation between
:class:`~trio_agents.models.LlmRequest` / :class:`~trio_agents.models.LlmResponse` and the wire
format is pure (:mod:`~trio_agents.models._openai_wire`), so it can be tested without HTTP.

Configuration: the key comes from ``api_key=`` or ``OPENAI_API_KEY`` and is sent as
``Authorization: Bearer <key>``; the base URL from ``base_url=``, ``OPENAI_BASE_URL`` or
``https://api.openai.com/v1``. A key is required for ``api.openai.com`` (a missing one raises
:class:`~trio_agents.ConfigurationError` when the model is constructed); other servers may run
without one.

Streaming reads the event stream to ``[DONE]`` and then to the end of the body (for at most a
second), so the connection returns to the pool; a stream that ends before ``[DONE]`` and before a
finish reason raises :class:`~trio_agents.ModelTransportError`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Self

import httpx
import trio

from .._errors import ConfigurationError, ModelError, ModelTransportError
from ._base import LlmRequest, LlmResponse
from ._http import HttpModel, RetryPolicy, ServerSentEvent
from ._openai_wire import (
    PROVIDER,
    MaxTokensParam,
    StreamAccumulator,
    build_request_body,
    parse_response,
)

__all__ = ["OpenAIModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
CHAT_PATH = "chat/completions"
_DRAIN_SECONDS = 1.0


class OpenAIModel(HttpModel):
    """A model served through the OpenAI Chat Completions API.

    ``OpenAIModel("gpt-4o")`` talks to OpenAI with ``OPENAI_API_KEY``;
    ``OpenAIModel("llama3", base_url="http://localhost:11434/v1")`` to a local Ollama. The
    registry name ``"openai/<model>"`` resolves through :meth:`from_name`. Other keyword
    arguments are those of :class:`~trio_agents.models._http.HttpModel` (timeouts, retry policy,
    ``transport`` for tests, extra ``headers``, which win over the ``Authorization`` header).
    """

    provider = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens_param: MaxTokensParam | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("OpenAIModel needs a model name, e.g. 'gpt-4o'")
        url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        official = _is_official(url)
        key = api_key or os.environ.get(API_KEY_ENV) or None
        if key is None and official:
            raise ConfigurationError(
                f"OpenAI model {model!r} needs an API key: pass api_key= or set {API_KEY_ENV} "
                f"(for a compatible server that needs none, pass base_url= or set {BASE_URL_ENV})"
            )
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        super().__init__(
            model,
            api_key=key,
            base_url=url,
            headers={**auth, **(headers or {})},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry=retry,
            transport=transport,
            seed=seed,
        )
        self.max_tokens_param: MaxTokensParam = max_tokens_param or (
            "max_completion_tokens" if official else "max_tokens"
        )

    @classmethod
    def from_name(cls, name: str) -> Self:
        """The model for a registry name: ``"openai/gpt-4o"`` → ``OpenAIModel("gpt-4o")``."""
        model = name.removeprefix("openai/")
        if not model:
            raise ConfigurationError(f"no model in the name {name!r}; use 'openai/<model>'")
        return cls(model)

    def request_body(self, request: LlmRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model posts for ``request``."""
        return build_request_body(
            request, self.model, stream=stream, max_tokens_param=self.max_tokens_param
        )

    async def generate(self, request: LlmRequest) -> LlmResponse:
        """One complete answer (``POST chat/completions``)."""
        answer = await self.post_json(CHAT_PATH, self.request_body(request))
        return parse_response(answer, fail=self.response_error)

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[LlmResponse]]:
        """Text deltas as partial responses, then the aggregate (``stream: true``)."""
        body = self.request_body(request, stream=True)
        async with self._stream_chunks(body) as chunks:
            yield chunks

    @trio.as_safe_channel
    async def _stream_chunks(self, body: dict[str, Any]) -> AsyncGenerator[LlmResponse]:
        accumulator = StreamAccumulator(fail=self.response_error)
        async with self.post_sse(CHAT_PATH, body) as events:
            async for event in events:
                for chunk in accumulator.feed_event(event):
                    yield chunk
                if accumulator.done:
                    await _drain(events)
                    break
        if not accumulator.complete:
            raise ModelTransportError(
                "the stream ended before [DONE] and before a finish_reason",
                provider=self.provider,
                model=self.model,
            )
        yield accumulator.final()


async def _drain(events: AsyncIterator[ServerSentEvent]) -> None:
    """Read what follows ``[DONE]`` (normally nothing but the end of the body), so that the
    connection goes back to the pool; a server that keeps the body open is given up on."""
    with trio.move_on_after(_DRAIN_SECONDS), contextlib.suppress(ModelError):
        async for _ in events:
            pass


def _is_official(base_url: str) -> bool:
    try:
        return httpx.URL(base_url).host == "api.openai.com"
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"invalid OpenAI base URL {base_url!r}: {exc}") from exc
