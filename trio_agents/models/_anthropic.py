"""Anthropic's Messages API (``POST /v1/messages``): :class:`AnthropicModel` and its translators.

Request building and response parsing are pure functions (in :mod:`._anthropic_wire`), stream
accumulation a small pure class (:class:`StreamAccumulator`), so they can be tested without HTTP;
:class:`AnthropicModel` only moves their dicts.

Decisions:

* **Key and URL.** The key comes from ``api_key=`` or ``ANTHROPIC_API_KEY`` and travels in the
  ``x-api-key`` header; without one the *constructor* raises :class:`ConfigurationError` (the
  registry constructs models on first use). The base URL comes from ``base_url=``,
  ``ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``.
* **Messages.** ``model`` contents become ``assistant`` messages, everything else ``user``
  messages; consecutive contents of one role are merged (the API wants alternation) and in a user
  message the ``tool_result`` blocks come first, as the API requires. Empty or whitespace-only text
  is dropped (the API rejects it).
* **Call ids.** ``FunctionCall.id`` is the ``tool_use`` id and ``FunctionResponse.id`` the
  ``tool_use_id`` of the ``tool_result``; a call or response without an id cannot be paired, so
  building the request raises :class:`ConfigurationError` (the LLM flow always sets ids). The
  result's content is the JSON text of ``FunctionResponse.response``.
* **Thinking.** ``thinking`` blocks become thought parts whose ``thought_signature`` holds the
  block's signature (UTF-8); ``redacted_thinking`` becomes a thought part with ``text=None`` and
  the redacted data as signature. Thought parts go back as those blocks when they carry a signature
  and are dropped otherwise (the API rejects unsigned thinking).
* **max_tokens** is required by the API: ``generation_config["max_output_tokens"]``, else the
  model's ``max_tokens`` (default :data:`DEFAULT_MAX_TOKENS`).
* **generation_config** keys used: ``max_output_tokens``, ``temperature``, ``top_p``, ``top_k``,
  ``stop_sequences``, ``tool_choice`` (``"auto"``, ``"any"``, ``"none"`` or an Anthropic
  ``tool_choice`` object), ``thinking`` (an Anthropic ``thinking`` object) and ``thinking_config``
  (``thinking_budget`` > 0 turns thinking on with that budget). Other keys are ignored.
* **response_schema.** The API has no JSON mode here, so the schema becomes the input schema of an
  extra tool, :data:`ANSWER_TOOL`, which the request forces (``tool_choice`` ``tool``; ``any`` when
  the request has other tools; ``auto`` with thinking on, since thinking forbids forcing). Its
  input comes back as the JSON *text* of the answer, not as a function call, and plain text beside
  it is left out. A schema that is not an object schema is wrapped as ``{"value": schema}`` and
  unwrapped on the way back. Streams show no partial chunks for the answer tool.
* **Finish reasons.** ``end_turn``, ``stop_sequence`` and ``tool_use`` → ``STOP``; ``max_tokens``
  and ``model_context_window_exceeded`` → ``MAX_TOKENS``; ``refusal`` → ``SAFETY`` with
  ``error_code="SAFETY"``; anything else → ``OTHER``. The raw value is kept in
  ``custom_metadata["anthropic_stop_reason"]``. A non-STOP answer without content gets the finish
  reason as ``error_code``.
* **Usage.** ``prompt_token_count`` = ``input_tokens`` + both cache counts,
  ``cached_content_token_count`` = ``cache_read_input_tokens``, ``candidates_token_count`` =
  ``output_tokens`` (thinking included: the API does not report it separately).
* **Streams.** Text and thinking deltas become partial chunks; tool inputs are reassembled from
  their ``input_json_delta`` fragments and parsed at ``content_block_stop``; the final aggregate is
  built at ``message_stop`` by the same parser as non-streamed answers. An ``error`` event raises
  :class:`ModelHTTPError` (:class:`ModelRateLimitError` for ``rate_limit_error``) with the status
  the error type has over HTTP; a stream that ends before ``message_stop`` raises
  :class:`ModelTransportError`. Nothing is retried once the stream has started.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import ClassVar, Self

import attrs
import httpx
import trio

from .._content import Content, Part
from .._errors import ConfigurationError, ModelTransportError
from ._anthropic_wire import (
    API_VERSION,
    DEFAULT_BASE_URL,
    DEFAULT_MAX_TOKENS,
    KEY_ENV,
    MESSAGES_PATH,
    PROVIDER,
    URL_ENV,
    AnswerTool,
    Json,
    Scrub,
    answer_tool,
    build_request_body,
    error_from_payload,
    malformed as _malformed,
    parse_response,
    same as _same,
)
from ._base import LlmRequest, LlmResponse
from ._http import HttpModel, RetryPolicy, ServerSentEvent

__all__ = ["AnthropicModel"]

# -- streams ---------------------------------------------------------------------------------------


@attrs.define
class _Block:
    """One content block under construction: its start object and the fragments since."""

    start: Json
    pieces: list[str] = attrs.field(factory=list)
    signature: str | None = None
    tool_input: Json | None = None

    @property
    def kind(self) -> str:
        return str(self.start["type"])

    def finish(self, model: str) -> None:
        """Parse the reassembled tool input (``content_block_stop``)."""
        if self.kind != "tool_use" or self.tool_input is not None:
            return
        text = "".join(self.pieces)
        if not text.strip():
            start = self.start.get("input")
            self.tool_input = dict(start) if isinstance(start, Mapping) else {}
            return
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise _malformed("a tool_use input in the stream is not valid JSON", model) from exc
        if not isinstance(value, dict):
            raise _malformed("a tool_use input in the stream is not a JSON object", model)
        self.tool_input = value

    def result(self, model: str) -> Json:
        """The finished block, as a non-streamed answer would show it."""
        self.finish(model)
        block = dict(self.start)
        joined = "".join(self.pieces)
        if self.kind == "text":
            block["text"] = str(block.get("text") or "") + joined
        elif self.kind == "thinking":
            block["thinking"] = str(block.get("thinking") or "") + joined
            if self.signature is not None:
                block["signature"] = self.signature
        elif self.kind == "tool_use":
            block["input"] = self.tool_input
        return block


class StreamAccumulator:
    """Rebuilds a Messages API answer from its server-sent events (pure: no I/O).

    :meth:`feed` returns the partial chunks an event produces; once :attr:`done` (after
    ``message_stop``), :meth:`final` gives the aggregate. An ``error`` event raises the error of
    :func:`error_from_payload`; malformed events raise :class:`ModelResponseError`.
    """

    def __init__(
        self, *, model: str = "", answer: AnswerTool | None = None, scrub: Scrub = _same
    ) -> None:
        self.model = model
        self.answer = answer
        self.done = False
        self._scrub = scrub
        self._message: Json = {}
        self._blocks: dict[int, _Block] = {}
        self._usage: Json = {}
        self._stop: Json = {}

    def feed(self, event: ServerSentEvent) -> list[LlmResponse]:
        """Take one event; return the partial chunks it produces (maybe none)."""
        if self.done or event.event == "ping":
            return []
        data = self._decode(event.data)
        kind = event.event if event.event != "message" else data.get("type")
        handler = self._handlers.get(str(kind))
        return handler(self, data) if handler is not None else []  # unknown events: ignored

    def final(self) -> LlmResponse:
        """The aggregate answer (``partial=False``), parsed as a non-streamed answer would be."""
        if not self.done:
            raise _malformed("the stream has not reached message_stop", self.model)
        message = {
            **self._message,
            "content": [self._blocks[i].result(self.model) for i in sorted(self._blocks)],
            **self._stop,
            "usage": self._usage or None,
        }
        response = parse_response(message, model=self.model, answer=self.answer)
        return attrs.evolve(response, partial=False)

    # -- events -------------------------------------------------------------------------------

    def _decode(self, data: str) -> Json:
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise _malformed("a stream event is not JSON", self.model) from exc
        if not isinstance(value, dict):
            raise _malformed("a stream event is not a JSON object", self.model)
        return value

    def _object(self, data: Json, key: str) -> Json:
        value = data.get(key)
        if not isinstance(value, dict):
            raise _malformed(f"a {data.get('type')} event has no object '{key}'", self.model)
        return value

    def _block(self, data: Json) -> _Block:
        index = data.get("index")
        if not isinstance(index, int) or index not in self._blocks:
            raise _malformed(f"a {data.get('type')} event names no started block", self.model)
        return self._blocks[index]

    def _on_message_start(self, data: Json) -> list[LlmResponse]:
        message = self._object(data, "message")
        self._message = {k: message[k] for k in ("id", "model", "type") if k in message}
        self._merge_usage(message.get("usage"))
        return []

    def _on_block_start(self, data: Json) -> list[LlmResponse]:
        index = data.get("index")
        start = self._object(data, "content_block")
        if not isinstance(index, int) or not isinstance(start.get("type"), str):
            raise _malformed("a content_block_start event without index or type", self.model)
        self._blocks[index] = _Block(start)
        initial = start.get("text") if start["type"] == "text" else None
        return self._chunk(initial, thought=False) if isinstance(initial, str) else []

    def _on_block_delta(self, data: Json) -> list[LlmResponse]:
        block = self._block(data)
        delta = self._object(data, "delta")
        kind = delta.get("type")
        field = {
            "text_delta": "text",
            "thinking_delta": "thinking",
            "input_json_delta": "partial_json",
            "signature_delta": "signature",
        }.get(str(kind))
        if field is None:
            return []  # citations and future deltas
        piece = delta.get(field)
        if not isinstance(piece, str):
            raise _malformed(f"a {kind} has no string '{field}'", self.model)
        if kind == "signature_delta":
            block.signature = piece
            return []
        block.pieces.append(piece)
        if kind == "input_json_delta":
            return []
        return self._chunk(piece, thought=kind == "thinking_delta")

    def _on_block_stop(self, data: Json) -> list[LlmResponse]:
        self._block(data).finish(self.model)
        return []

    def _on_message_delta(self, data: Json) -> list[LlmResponse]:
        delta = self._object(data, "delta")
        self._stop.update({k: delta[k] for k in ("stop_reason", "stop_sequence") if k in delta})
        self._merge_usage(data.get("usage"))
        return []

    def _on_message_stop(self, data: Json) -> list[LlmResponse]:
        self.done = True
        return []

    def _on_error(self, data: Json) -> list[LlmResponse]:
        raise error_from_payload(data, model=self.model, scrub=self._scrub)

    _handlers: ClassVar[dict[str, Callable[[StreamAccumulator, Json], list[LlmResponse]]]] = {
        "message_start": _on_message_start,
        "content_block_start": _on_block_start,
        "content_block_delta": _on_block_delta,
        "content_block_stop": _on_block_stop,
        "message_delta": _on_message_delta,
        "message_stop": _on_message_stop,
        "error": _on_error,
    }

    def _merge_usage(self, usage: object) -> None:
        if usage is None:
            return
        if not isinstance(usage, dict):
            raise _malformed("'usage' in the stream is not an object", self.model)
        self._usage.update({k: v for k, v in usage.items() if v is not None})

    @staticmethod
    def _chunk(text: str, *, thought: bool) -> list[LlmResponse]:
        if not text:
            return []
        part = Part(text=text, thought=True) if thought else Part(text=text)
        return [LlmResponse(content=Content(role="model", parts=(part,)), partial=True)]


# -- the client ------------------------------------------------------------------------------------


class AnthropicModel(HttpModel):
    """A Claude model through Anthropic's Messages API.

    ``AnthropicModel("claude-sonnet-4-5")`` reads ``ANTHROPIC_API_KEY`` (and
    ``ANTHROPIC_BASE_URL``) unless ``api_key`` (``base_url``) is given. ``max_tokens`` is used when
    the request's ``generation_config`` has no ``max_output_tokens``. ``headers`` adds headers
    (for example ``anthropic-beta``). The other options are those of :class:`HttpModel`.

    Raises:
        ConfigurationError: no model name, or no API key in the argument or the environment.
    """

    provider: ClassVar[str] = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        seed: int | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("an Anthropic model needs a model name")
        key = api_key or os.environ.get(KEY_ENV)
        if not key:
            raise ConfigurationError(
                f"Anthropic model {model!r} needs an API key: pass api_key= or set {KEY_ENV}"
            )
        auth = {"x-api-key": key, "anthropic-version": API_VERSION}
        super().__init__(
            model,
            api_key=key,
            base_url=base_url or os.environ.get(URL_ENV) or DEFAULT_BASE_URL,
            headers={**(headers or {}), **auth},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry=retry,
            transport=transport,
            seed=seed,
        )
        self.max_tokens = max_tokens

    @classmethod
    def from_name(cls, name: str) -> Self:
        """The model for a registry name: ``"anthropic/claude-sonnet-4-5"`` or ``"claude-…"``."""
        return cls(name.removeprefix("anthropic/"))

    def _body(self, request: LlmRequest, *, stream: bool) -> Json:
        model = (request.model or self.model).removeprefix("anthropic/")
        return build_request_body(request, model, max_tokens=self.max_tokens, stream=stream)

    async def generate(self, request: LlmRequest) -> LlmResponse:
        """One complete answer. If cancelled, the request is abandoned and its response closed.

        Raises:
            ConfigurationError: the request cannot be expressed for this API.
            ModelError: the call failed (see :class:`HttpModel`) or the answer is malformed.
        """
        body = self._body(request, stream=False)
        payload = await self.post_json(MESSAGES_PATH, body)
        answer = answer_tool(request.response_schema)
        return parse_response(payload, model=self.model, answer=answer, scrub=self.scrub)

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[LlmResponse]]:
        """Partial text/thought chunks, then the final aggregate (``partial=False``).

        Errors (see :meth:`generate`) propagate out of the ``async with`` block. Leaving the block
        early, or being cancelled, closes the HTTP response; the model stays usable.
        """
        body = self._body(request, stream=True)
        async with self._chunks(body, answer_tool(request.response_schema)) as channel:
            yield channel

    @trio.as_safe_channel
    async def _chunks(
        self, body: Json, answer: AnswerTool | None
    ) -> AsyncGenerator[LlmResponse, None]:
        accumulator = StreamAccumulator(model=self.model, answer=answer, scrub=self.scrub)
        async with self.post_sse(MESSAGES_PATH, body) as events:
            try:
                async for event in events:  # read to the end: leaves no half-read generators
                    for chunk in accumulator.feed(event):
                        yield chunk
            except ModelTransportError:
                if not accumulator.done:
                    raise  # a connection lost after message_stop loses nothing
        if not accumulator.done:
            raise ModelTransportError(
                "the answer stream ended before message_stop", provider=PROVIDER, model=self.model
            )
        yield accumulator.final()
