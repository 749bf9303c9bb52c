"""OpenAI Chat Completions wire format: request bodies, answers and stream reassembly (pure).

:func:`build_request_body` turns an :class:`~trio_agents.models.LlmRequest` into the JSON body of
``POST chat/completions``; :func:`parse_response` turns an answer into an
:class:`~trio_agents.models.LlmResponse`; :class:`StreamAccumulator` reassembles a streamed one.
Nothing here does I/O. Malformed answers raise :class:`~trio_agents.ModelResponseError`;
requests that cannot be expressed raise :class:`~trio_agents.ConfigurationError`.

``generation_config`` keys (Gemini/ADK names are translated, OpenAI names pass through):

- ``max_output_tokens`` → ``max_completion_tokens`` for api.openai.com (``max_tokens`` is
  deprecated there and refused by reasoning models), ``max_tokens`` for other servers (the name
  Ollama and llama.cpp document); choose with ``OpenAIModel(max_tokens_param=...)``.
- ``stop_sequences`` → ``stop``.
- ``response_mime_type="application/json"`` without a ``response_schema`` → ``response_format``
  ``{"type": "json_object"}``; ``response_schema_strict`` → ``strict`` of the ``json_schema``
  format that a ``response_schema`` becomes (unset by default: OpenAI's strict mode demands
  ``additionalProperties: false`` and every property required).
- ``temperature``, ``top_p``, ``seed``, ``tool_choice`` and the other Chat Completions names in
  :data:`PASSTHROUGH_KEYS` are sent unchanged.
- ``extra_body``: a dict merged into the request body last (server extras such as ``top_k``).

Other keys (Gemini-only ones such as ``top_k`` or ``safety_settings``) are ignored.

Answers: the first choice becomes the response; ``finish_reason`` is mapped by
:data:`FINISH_REASONS` (the raw value is kept in ``custom_metadata["openai_finish_reason"]`` when
the name changes); ``content_filter`` gives ``error_code="SAFETY"`` and a ``refusal`` gives
``error_code="REFUSAL"`` (responses, not exceptions); the ``reasoning_content`` / ``reasoning``
text of compatible servers becomes a thought part. Streams are read to ``[DONE]``; one that ends
before ``[DONE]`` and before a finish reason raises :class:`~trio_agents.ModelTransportError`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from .._content import Content, FunctionCall, FunctionResponse, Part
from .._errors import ConfigurationError, ModelResponseError
from .._events import UsageMetadata
from ._base import FunctionDeclaration, LlmRequest, LlmResponse
from ._http import ServerSentEvent
from ._json_shape import (
    Malformed as _Malformed,
    count as _count,
    json_list as _list,
    json_object as _object,
    optional_str as _optional_str,
)

__all__ = [  # StreamAccumulator is public but not re-exported: a tool for tests and tinkerers
    "build_messages",
    "build_request_body",
    "parse_arguments",
    "parse_response",
]

PROVIDER = "openai"

MaxTokensParam: TypeAlias = Literal["max_completion_tokens", "max_tokens"]
Fail: TypeAlias = Callable[[str], ModelResponseError]
"""Builds the error for a malformed answer (the client passes its scrubbing ``response_error``)."""

PASSTHROUGH_KEYS = frozenset(
    {
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "parallel_tool_calls",
        "presence_penalty",
        "reasoning_effort",
        "seed",
        "service_tier",
        "stop",
        "temperature",
        "tool_choice",
        "top_logprobs",
        "top_p",
        "user",
    }
)
"""``generation_config`` keys that already are Chat Completions parameters."""

FINISH_REASONS = {
    "stop": "STOP",
    "length": "MAX_TOKENS",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "content_filter": "SAFETY",
}
"""OpenAI ``finish_reason`` → ADK/Gemini vocabulary; anything else becomes ``OTHER``."""

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _default_fail(message: str) -> ModelResponseError:
    return ModelResponseError(message, provider=PROVIDER, model="unknown")


# -- request building (pure) -----------------------------------------------------------------------


def build_request_body(
    request: LlmRequest,
    model: str,
    *,
    stream: bool = False,
    max_tokens_param: MaxTokensParam = "max_completion_tokens",
) -> dict[str, Any]:
    """The Chat Completions body for ``request`` (``model`` names the model; ``request.model`` is
    not used). Unconvertible content raises :class:`~trio_agents.ConfigurationError`."""
    config = request.generation_config
    body: dict[str, Any] = {"model": model, "messages": build_messages(request)}
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    body.update(_generation_options(config, max_tokens_param))
    if (response_format := _response_format(request)) is not None:
        body["response_format"] = response_format
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    extra = config.get("extra_body")
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise ConfigurationError("generation_config['extra_body'] must be a dict")
        body.update(_plain(extra))
    return body


def build_messages(request: LlmRequest) -> list[dict[str, Any]]:
    """The ``messages`` list: the system instruction, then one or more messages per content."""
    messages: list[dict[str, Any]] = []
    if request.system_instruction:
        messages.append({"role": "system", "content": request.system_instruction})
    ids = _CallIds()
    for content in request.contents:
        messages.extend(_content_messages(content, ids))
    return messages


class _CallIds:
    """Call ids for function calls and responses that lack one (ids pair them up on the wire)."""

    def __init__(self) -> None:
        self._minted = 0
        self._unanswered: dict[str, list[str]] = {}

    def for_call(self, call: FunctionCall) -> str:
        if call.id:
            return call.id
        self._minted += 1
        new = f"call_missing_{self._minted}"
        self._unanswered.setdefault(call.name, []).append(new)
        return new

    def for_response(self, response: FunctionResponse) -> str:
        if response.id:
            return response.id
        pending = self._unanswered.get(response.name)
        if pending:
            return pending.pop(0)
        raise ConfigurationError(
            f"the function response for {response.name!r} has no id and answers no call"
        )


def _content_messages(content: Content, ids: _CallIds) -> list[dict[str, Any]]:
    parts = [p for p in content.parts if not p.thought]  # reasoning is not sent back
    responses = [_tool_message(p.function_response, ids) for p in parts if p.function_response]
    if content.role in ("model", "assistant"):
        assistant = _assistant_message(parts, ids)
        return ([assistant] if assistant else []) + responses
    if any(p.function_call for p in parts):
        raise ConfigurationError(f"function calls belong in model content, not {content.role!r}")
    user = _user_message(parts)
    return responses + ([user] if user else [])


def _assistant_message(parts: Sequence[Part], ids: _CallIds) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        if part.function_call is not None:
            calls.append(_tool_call(part.function_call, ids))
        elif part.text is not None:
            texts.append(part.text)
        elif part.function_response is None:
            _reject_unless_empty(part, "model")
    text = "".join(texts)
    if not calls and not texts:
        return None
    # "" rather than null beside tool calls: OpenAI accepts both, llama.cpp's server only "".
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_call(call: FunctionCall, ids: _CallIds) -> dict[str, Any]:
    return {
        "id": ids.for_call(call),
        "type": "function",
        "function": {"name": call.name, "arguments": _dumps(call.args)},
    }


def _tool_message(response: FunctionResponse, ids: _CallIds) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": ids.for_response(response),
        "content": _dumps(response.response),
    }


def _user_message(parts: Sequence[Part]) -> dict[str, Any] | None:
    items = [item for p in parts if p.function_response is None and (item := _user_item(p))]
    if not items:
        return None
    if len(items) == 1 and items[0]["type"] == "text":
        return {"role": "user", "content": items[0]["text"]}
    return {"role": "user", "content": items}


def _user_item(part: Part) -> dict[str, Any] | None:
    if part.text is not None:
        return {"type": "text", "text": part.text}
    if part.inline_data is not None:
        blob = part.inline_data
        return _media_item(blob.mime_type or "", blob.data, blob.display_name)
    if part.file_data is not None and (part.file_data.mime_type or "").startswith("image/"):
        return {"type": "image_url", "image_url": {"url": part.file_data.file_uri}}
    _reject_unless_empty(part, "user")
    return None


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _media_item(mime: str, data: bytes, name: str | None) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode("ascii")
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}
    if mime in _AUDIO_FORMATS:
        audio = {"data": encoded, "format": _AUDIO_FORMATS[mime]}
        return {"type": "input_audio", "input_audio": audio}
    if mime == "application/pdf":
        file = {"filename": name or "document.pdf", "file_data": f"data:{mime};base64,{encoded}"}
        return {"type": "file", "file": file}
    raise ConfigurationError(f"OpenAI chat messages cannot carry inline data of type {mime!r}")


def _reject_unless_empty(part: Part, role: str) -> None:
    kinds = [
        name
        for name in ("inline_data", "file_data", "executable_code", "code_execution_result")
        if getattr(part, name) is not None
    ]
    if kinds:
        raise ConfigurationError(f"OpenAI {role} messages cannot carry {kinds[0]} parts")


def _tool(declaration: FunctionDeclaration) -> dict[str, Any]:
    function: dict[str, Any] = {"name": declaration.name}
    if declaration.description:
        function["description"] = declaration.description
    if declaration.parameters is not None:
        function["parameters"] = _plain(declaration.parameters)
    return {"type": "function", "function": function}


def _generation_options(config: Mapping[str, Any], max_tokens_param: str) -> dict[str, Any]:
    options = {key: _plain(value) for key, value in config.items() if key in PASSTHROUGH_KEYS}
    if config.get("max_output_tokens") is not None:
        options[max_tokens_param] = config["max_output_tokens"]
    if config.get("stop_sequences") is not None:
        options["stop"] = list(config["stop_sequences"])
    return options


def _response_format(request: LlmRequest) -> dict[str, Any] | None:
    config = request.generation_config
    schema = request.response_schema
    if schema is None:
        if config.get("response_mime_type") == "application/json":
            return {"type": "json_object"}
        return None
    title = schema.get("title")
    name = title if isinstance(title, str) and _SCHEMA_NAME.fullmatch(title) else "response"
    spec: dict[str, Any] = {"name": name, "schema": _plain(schema)}
    if config.get("response_schema_strict") is not None:
        spec["strict"] = bool(config["response_schema_strict"])
    return {"type": "json_schema", "json_schema": spec}


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(_plain(value), ensure_ascii=False, default=str)


def _plain(value: Any) -> Any:
    """``value`` with every mapping a plain dict and every sequence a list (JSON-ready)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- response parsing (pure) -----------------------------------------------------------------------


def parse_response(body: object, *, fail: Fail = _default_fail) -> LlmResponse:
    """The :class:`LlmResponse` for a decoded ``chat.completion`` answer (its first choice).

    A malformed answer raises ``fail(message)`` (a :class:`~trio_agents.ModelResponseError`).
    """
    try:
        return _parse_completion(body)
    except _Malformed as exc:
        raise fail(str(exc)) from None


def parse_arguments(arguments: object, *, fail: Fail = _default_fail) -> dict[str, Any]:
    """A tool call's ``arguments`` (a JSON object text; empty means ``{}``) as a dict."""
    try:
        return _arguments(arguments, "arguments")
    except _Malformed as exc:
        raise fail(str(exc)) from None


def _parse_completion(body: object) -> LlmResponse:
    data = _object(body, "the answer")
    _check_embedded_error(data)
    choices = _list(data.get("choices"), "choices")
    if not choices:
        raise _Malformed("the answer has no choices")
    choice = _object(choices[0], "choices[0]")
    message = _object(choice.get("message"), "choices[0].message")
    where = "choices[0].message"
    calls = _list(message.get("tool_calls"), f"{where}.tool_calls", empty=True)
    parts = [
        *_thought_parts([_reasoning(message, where)]),
        *_text_parts([_content_text(message.get("content"), f"{where}.content")]),
        *(_tool_call_part(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)),
    ]
    return _response(
        parts,
        raw_finish=_optional_str(choice.get("finish_reason"), "choices[0].finish_reason"),
        refusal=_optional_str(message.get("refusal"), f"{where}.refusal"),
        usage=_usage(data.get("usage")),
        model_version=_optional_str(data.get("model"), "model"),
    )


def _response(
    parts: list[Part],
    *,
    raw_finish: str | None,
    refusal: str | None,
    usage: UsageMetadata | None,
    model_version: str | None,
    partial: bool | None = None,
) -> LlmResponse:
    finish = None if raw_finish is None else FINISH_REASONS.get(raw_finish, "OTHER")
    error_code = error_message = None
    if refusal:
        error_code, error_message = "REFUSAL", refusal
    elif raw_finish == "content_filter":
        error_code = "SAFETY"
        error_message = "The answer was blocked by the provider's content filter."
    lossy = raw_finish is not None and raw_finish.upper() != finish
    return LlmResponse(
        content=Content(role="model", parts=parts) if parts else None,
        partial=partial,
        finish_reason=finish,
        error_code=error_code,
        error_message=error_message,
        usage_metadata=usage,
        model_version=model_version,
        custom_metadata={"openai_finish_reason": raw_finish} if lossy else None,
    )


def _thought_parts(pieces: Iterable[str | None]) -> list[Part]:
    text = "".join(p for p in pieces if p)
    return [Part(text=text, thought=True)] if text else []


def _text_parts(pieces: Iterable[str | None]) -> list[Part]:
    text = "".join(p for p in pieces if p)
    return [Part(text=text)] if text else []


def _reasoning(message: Mapping[str, Any], where: str) -> str | None:
    """Reasoning text of compatible servers (vLLM ``reasoning_content``, Ollama ``reasoning``)."""
    for key in ("reasoning_content", "reasoning"):
        if (text := _optional_str(message.get(key), f"{where}.{key}")) is not None:
            return text
    return None


def _content_text(value: object, where: str) -> str | None:
    """``content`` as text: a string, null, or a list of ``{"type": "text"}`` parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        items = [_object(v, f"{where}[{i}]") for i, v in enumerate(value)]
        texts = [_optional_str(item.get("text"), f"{where}[].text") for item in items]
        return "".join(t for t in texts if t)
    raise _Malformed(f"{where} is neither text nor a list of parts")


def _tool_call_part(value: object, where: str) -> Part:
    call = _object(value, where)
    kind = call.get("type", "function")
    if kind != "function":
        raise _Malformed(f"{where} has the unsupported type {kind!r}")
    function = _object(call.get("function"), f"{where}.function")
    name = _optional_str(function.get("name"), f"{where}.function.name")
    if not name:
        raise _Malformed(f"{where}.function has no name")
    args = _arguments(function.get("arguments"), f"{where}.function.arguments")
    call_id = _optional_str(call.get("id"), f"{where}.id") or None
    return Part(function_call=FunctionCall(name=name, args=args, id=call_id))


def _arguments(value: object, where: str) -> dict[str, Any]:
    if isinstance(value, Mapping):  # some compatible servers send an object
        return dict(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if not isinstance(value, str):
        raise _Malformed(f"{where} is neither a JSON text nor an object")
    try:
        decoded = json.loads(value)
    except ValueError as exc:
        raise _Malformed(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(decoded, dict):
        raise _Malformed(f"{where} is JSON but not an object")
    return decoded


def _usage(value: object) -> UsageMetadata | None:
    if value is None:
        return None
    usage = _object(value, "usage")
    prompt = _object(usage.get("prompt_tokens_details"), "usage.prompt_tokens_details", empty=True)
    output = _object(
        usage.get("completion_tokens_details"), "usage.completion_tokens_details", empty=True
    )
    return UsageMetadata(
        prompt_token_count=_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        candidates_token_count=_count(usage.get("completion_tokens"), "usage.completion_tokens"),
        total_token_count=_count(usage.get("total_tokens"), "usage.total_tokens"),
        cached_content_token_count=_count(prompt.get("cached_tokens"), "usage.cached_tokens"),
        thoughts_token_count=_count(output.get("reasoning_tokens"), "usage.reasoning_tokens"),
    )


def _check_embedded_error(data: Mapping[str, Any]) -> None:
    """Some servers report failures as ``{"error": {...}}`` in a 200 answer or a stream."""
    error = data.get("error")
    if error is None:
        return
    message = error.get("message") if isinstance(error, Mapping) else error
    raise _Malformed(f"the provider reported an error: {str(message)[:300]}")


# -- stream reassembly (pure) ----------------------------------------------------------------------


class _CallBuffer:
    """One tool call being reassembled from fragments."""

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name: str | None = None
        self.arguments: list[str] = []
        self.whole: Mapping[str, Any] | None = None


class StreamAccumulator:
    """Reassembles a streamed chat completion (``chat.completion.chunk`` objects).

    :meth:`feed_event` / :meth:`feed_data` / :meth:`feed` take one chunk and return the partial
    responses it gives (text and reasoning deltas); :meth:`final` is the aggregate: text joined,
    tool calls whole (fragments keyed by ``index``; id and name come with the first fragment),
    finish reason and usage (which OpenAI sends in a last chunk with no choices).
    """

    def __init__(self, *, fail: Fail = _default_fail) -> None:
        self._fail = fail
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: list[_CallBuffer] = []
        self._slots: dict[int | None, _CallBuffer] = {}
        self._finish: str | None = None
        self._usage: UsageMetadata | None = None
        self._model: str | None = None
        self.done = False
        """True once the ``[DONE]`` terminator arrived."""

    @property
    def complete(self) -> bool:
        """Whether the answer is whole: ``[DONE]`` or a finish reason arrived."""
        return self.done or self._finish is not None

    def feed_event(self, event: ServerSentEvent) -> list[LlmResponse]:
        """Take one server-sent event (an ``error`` event raises)."""
        if event.event == "error":
            raise self._fail(f"the stream reported an error: {event.data[:300]}")
        return self.feed_data(event.data)

    def feed_data(self, data: str) -> list[LlmResponse]:
        """Take one event's data: ``[DONE]`` or a JSON chunk."""
        if data.strip() == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError:
            raise self._fail(f"a stream chunk is not JSON: {data[:200]!r}") from None
        return self.feed(chunk)

    def feed(self, chunk: object) -> list[LlmResponse]:
        """Take one decoded chunk."""
        try:
            return self._feed(chunk)
        except _Malformed as exc:
            raise self._fail(str(exc)) from None

    def final(self) -> LlmResponse:
        """The aggregate answer (``partial=False``)."""
        try:
            calls = [self._call_part(i, c) for i, c in enumerate(self._calls)]
        except _Malformed as exc:
            raise self._fail(str(exc)) from None
        parts = [*_thought_parts(self._reasoning), *_text_parts(self._text), *calls]
        return _response(
            parts,
            raw_finish=self._finish,
            refusal="".join(self._refusal) or None,
            usage=self._usage,
            model_version=self._model,
            partial=False,
        )

    def _feed(self, chunk: object) -> list[LlmResponse]:
        data = _object(chunk, "a stream chunk")
        _check_embedded_error(data)
        self._model = _optional_str(data.get("model"), "model") or self._model
        if data.get("usage") is not None:
            self._usage = _usage(data["usage"])
        out: list[LlmResponse] = []
        for i, value in enumerate(_list(data.get("choices"), "choices", empty=True)):
            choice = _object(value, f"choices[{i}]")
            if choice.get("index", 0) == 0:  # only the first choice is followed
                out.extend(self._choice(choice))
        return out

    def _choice(self, choice: Mapping[str, Any]) -> list[LlmResponse]:
        finish = _optional_str(choice.get("finish_reason"), "finish_reason")
        self._finish = finish or self._finish
        delta = _object(choice.get("delta"), "delta", empty=True)
        for i, fragment in enumerate(
            _list(delta.get("tool_calls"), "delta.tool_calls", empty=True)
        ):
            self._fragment(_object(fragment, f"delta.tool_calls[{i}]"))
        if refusal := _optional_str(delta.get("refusal"), "delta.refusal"):
            self._refusal.append(refusal)
        out = []
        if thought := _reasoning(delta, "delta"):
            self._reasoning.append(thought)
            out.append(self._partial(Part(text=thought, thought=True)))
        if text := _content_text(delta.get("content"), "delta.content"):
            self._text.append(text)
            out.append(self._partial(Part(text=text)))
        return out

    def _partial(self, part: Part) -> LlmResponse:
        content = Content(role="model", parts=(part,))
        return LlmResponse(content=content, partial=True, model_version=self._model)

    def _fragment(self, fragment: Mapping[str, Any]) -> None:
        index = fragment.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise _Malformed("delta.tool_calls[].index is not an integer")
        buffer = self._slot(index, _optional_str(fragment.get("id"), "tool call id") or None)
        function = _object(fragment.get("function"), "delta.tool_calls[].function", empty=True)
        name = _optional_str(function.get("name"), "delta.tool_calls[].function.name")
        buffer.name = buffer.name or name or None
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):
            buffer.whole = arguments
        elif arguments is not None:
            buffer.arguments.append(_optional_str(arguments, "function.arguments") or "")

    def _slot(self, index: int | None, call_id: str | None) -> _CallBuffer:
        """The buffer a fragment belongs to. A new id at a known index starts a new call
        (Ollama numbers every call of a parallel batch 0); no index means the latest call."""
        buffer = self._slots.get(index)
        if index is None and buffer is None and self._calls and call_id is None:
            return self._calls[-1]
        if buffer is None or (call_id and buffer.id and call_id != buffer.id):
            buffer = _CallBuffer(call_id)
            self._calls.append(buffer)
            self._slots[index] = buffer
        buffer.id = buffer.id or call_id
        return buffer

    @staticmethod
    def _call_part(position: int, buffer: _CallBuffer) -> Part:
        where = f"streamed tool call #{position}"
        if not buffer.name:
            raise _Malformed(f"{where} has no name")
        args = buffer.whole if buffer.whole is not None else "".join(buffer.arguments)
        call = FunctionCall(name=buffer.name, args=_arguments(args, where), id=buffer.id)
        return Part(function_call=call)
