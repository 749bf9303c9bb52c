"""Pure translation between trio_agents requests/responses and the Gemini API's JSON.

The Gemini API (``generateContent`` / ``streamGenerateContent``) speaks the same content model
as ADK: ``contents`` of ``{role, parts}`` with ``text``, ``thought``, ``functionCall``,
``functionResponse``, ``inlineData`` (base64), ``fileData``, ``executableCode`` and
``codeExecutionResult`` parts, a ``systemInstruction``, ``tools`` holding
``functionDeclarations``, a ``toolConfig`` and a ``generationConfig``. Tool results travel in
``user`` contents, as in ADK. Function-call ids minted on the client (``adk-…``) are not sent
(R-EV-6); ids the API gave are kept and echoed.

Schemas are JSON Schema, so they go in ``parametersJsonSchema`` and ``responseJsonSchema``: the
older ``parameters`` / ``responseSchema`` fields take an OpenAPI 3.0 subset (upper-case types, no
``$ref``, ``anyOf`` only on newer models) that a JSON schema is not.

``generation_config`` keys are accepted in snake_case or camelCase; those of the API's
``GenerationConfig`` (:data:`GENERATION_KEYS`) go in ``generationConfig``, ``tool_config``,
``safety_settings`` and ``cached_content`` at the top level; other keys (meant for other
providers) are ignored.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .._content import (
    Blob,
    CodeExecutionResult,
    Content,
    ExecutableCode,
    FileData,
    FunctionCall,
    Part,
)
from .._errors import ModelHTTPError, ModelRateLimitError, ModelResponseError
from .._events import UsageMetadata
from ._base import FunctionDeclaration, LlmRequest, LlmResponse
from ._json_shape import (
    Malformed as _Malformed,
    count as _count,
    json_list as _list,
    json_object as _object,
    optional_str as _optional_str,
)

__all__ = [  # StreamAccumulator is imported by name: internal to the Gemini client
    "GENERATION_KEYS",
    "PROVIDER",
    "build_request_body",
    "error_from_payload",
    "is_error_payload",
    "parse_response",
]

PROVIDER = "gemini"
Fail = Callable[[str], ModelResponseError]
Scrub = Callable[[str], str]

GENERATION_KEYS = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "max_output_tokens": "maxOutputTokens",
    "stop_sequences": "stopSequences",
    "candidate_count": "candidateCount",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "response_mime_type": "responseMimeType",
    "response_schema": "responseSchema",
    "response_json_schema": "responseJsonSchema",
    "response_modalities": "responseModalities",
    "response_logprobs": "responseLogprobs",
    "logprobs": "logprobs",
    "enable_enhanced_civic_answers": "enableEnhancedCivicAnswers",
    "speech_config": "speechConfig",
    "thinking_config": "thinkingConfig",
    "image_config": "imageConfig",
    "media_resolution": "mediaResolution",
}
"""``generation_config`` keys (snake_case, or the API's camelCase) sent in ``generationConfig``."""

_TOP_LEVEL_KEYS = {
    "tool_config": "toolConfig",
    "safety_settings": "safetySettings",
    "cached_content": "cachedContent",
}
_VERBATIM = frozenset({"responseSchema", "responseJsonSchema"})  # schemas: keys are not renamed
_CLIENT_ID_PREFIX = "adk-"
_ERROR_EXCERPT = 500


def _default_fail(message: str) -> ModelResponseError:
    return ModelResponseError(message, provider=PROVIDER, model="unknown")


def _same(text: str) -> str:
    return text


# -- request building ------------------------------------------------------------------------------


def build_request_body(request: LlmRequest) -> dict[str, Any]:
    """The JSON body of ``generateContent`` / ``streamGenerateContent`` for ``request``.

    The model is named in the URL, not in the body, so ``request.model`` is not used.
    """
    body: dict[str, Any] = {"contents": [c for c in map(_content, request.contents) if c]}
    if request.system_instruction:
        body["systemInstruction"] = {"parts": [{"text": request.system_instruction}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
    config = request.generation_config
    for snake, camel in _TOP_LEVEL_KEYS.items():
        value = config.get(snake, config.get(camel))
        if value is not None:
            body[camel] = _camel_keys(value)
    generation = _generation_config(config)
    if request.response_schema is not None:
        generation.pop("responseSchema", None)  # the two are mutually exclusive
        generation["responseMimeType"] = "application/json"
        generation["responseJsonSchema"] = _plain(request.response_schema)
    if generation:
        body["generationConfig"] = generation
    return body


def _generation_config(config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        wire = GENERATION_KEYS.get(key) or (key if key in GENERATION_KEYS.values() else None)
        if wire is None or value is None:
            continue
        out[wire] = _plain(value) if wire in _VERBATIM else _camel_keys(value)
    return out


def _content(content: Content) -> dict[str, Any] | None:
    """A content on the wire; tool results and everything not the model's go as ``user``."""
    role = "model" if content.role == "model" else "user"
    parts = [p for p in map(_part, content.parts) if p]
    return {"role": role, "parts": parts} if parts else None


def _part(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if part.text is not None:
        out["text"] = part.text
    if part.thought:
        out["thought"] = True
    if part.thought_signature is not None:
        out["thoughtSignature"] = base64.b64encode(part.thought_signature).decode("ascii")
    if (call := part.function_call) is not None:
        out["functionCall"] = _with_id({"name": call.name, "args": _plain(call.args)}, call.id)
    if (response := part.function_response) is not None:
        answer = {"name": response.name, "response": _plain(response.response)}
        out["functionResponse"] = _with_id(answer, response.id)
    if (blob := part.inline_data) is not None:
        data = base64.b64encode(blob.data).decode("ascii")
        out["inlineData"] = _without_none({"mimeType": blob.mime_type, "data": data})
    if (file := part.file_data) is not None:
        out["fileData"] = _without_none({"mimeType": file.mime_type, "fileUri": file.file_uri})
    if (code := part.executable_code) is not None:
        out["executableCode"] = {"language": code.language or "PYTHON", "code": code.code}
    if (result := part.code_execution_result) is not None:
        out["codeExecutionResult"] = _without_none(
            {"outcome": result.outcome, "output": result.output}
        )
    if set(out) == {"thought"}:
        return {}  # a thought flag on nothing
    return out


def _without_none(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def _with_id(value: dict[str, Any], call_id: str | None) -> dict[str, Any]:
    if call_id and not call_id.startswith(_CLIENT_ID_PREFIX):
        value["id"] = call_id
    return value


def _declaration(declaration: FunctionDeclaration) -> dict[str, Any]:
    out: dict[str, Any] = {"name": declaration.name, "description": declaration.description}
    if declaration.parameters is not None:
        out["parametersJsonSchema"] = _plain(declaration.parameters)
    return out


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _camel_keys(value: Any) -> Any:
    """Provider options given in snake_case, sent in the API's camelCase (values unchanged)."""
    if isinstance(value, Mapping):
        return {_camel(str(k)): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_camel_keys(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- response parsing ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Chunk:
    """What one ``GenerateContentResponse`` says (first candidate only)."""

    parts: tuple[Part, ...] = ()
    finish_reason: str | None = None
    finish_message: str | None = None
    block_reason: str | None = None
    block_message: str | None = None
    usage: UsageMetadata | None = None
    version: str | None = None


def parse_response(body: object, *, fail: Fail = _default_fail) -> LlmResponse:
    """The :class:`LlmResponse` for one decoded ``GenerateContentResponse`` (first candidate).

    As in ADK: a blocked prompt (``promptFeedback.blockReason``, no candidate) becomes an error
    response with ``error_code`` set to the block reason; so does a candidate that stopped for a
    reason other than ``STOP`` (``SAFETY``, ``RECITATION``, ``MAX_TOKENS``...) without any content,
    with ``error_code`` set to its finish reason. Finish reasons are kept as the API spells them.
    A malformed answer raises ``fail(message)``.
    """
    try:
        chunk = _parse_chunk(body)
    except _Malformed as exc:
        raise fail(str(exc)) from None
    content = Content(role="model", parts=chunk.parts) if chunk.parts else None
    if chunk.block_reason is not None and content is None:
        return _blocked(chunk)
    response = LlmResponse(
        content=content,
        finish_reason=chunk.finish_reason,
        usage_metadata=chunk.usage,
        model_version=chunk.version,
    )
    reason = chunk.finish_reason
    if content is None and reason is not None and reason != "STOP":
        return _stopped(response, reason, chunk.finish_message)
    return response


def _blocked(chunk: _Chunk) -> LlmResponse:
    reason = chunk.block_reason or "BLOCKED"
    return LlmResponse(
        error_code=reason,
        error_message=chunk.block_message or f"the prompt was blocked: {reason}",
        usage_metadata=chunk.usage,
        model_version=chunk.version,
    )


def _stopped(response: LlmResponse, reason: str, message: str | None) -> LlmResponse:
    return attrs.evolve(
        response, error_code=reason, error_message=message or f"the model stopped: {reason}"
    )


def _parse_chunk(body: object) -> _Chunk:
    data = _object(body, "the answer")
    if is_error_payload(data):
        raise _Malformed(f"the answer is an error: {_excerpt(data)}")
    usage = _usage(data.get("usageMetadata"))
    version = _optional_str(data.get("modelVersion"), "modelVersion")
    candidates = _list(data.get("candidates"), "candidates", empty=True)
    if not candidates:
        feedback = _object(data.get("promptFeedback"), "promptFeedback", empty=True)
        return _Chunk(
            block_reason=_optional_str(feedback.get("blockReason"), "promptFeedback.blockReason"),
            block_message=_optional_str(
                feedback.get("blockReasonMessage"), "promptFeedback.blockReasonMessage"
            ),
            usage=usage,
            version=version,
        )
    candidate = _object(candidates[0], "candidates[0]")
    return _Chunk(
        parts=_candidate_parts(candidate.get("content")),
        finish_reason=_optional_str(candidate.get("finishReason"), "finishReason"),
        finish_message=_optional_str(candidate.get("finishMessage"), "finishMessage"),
        usage=usage,
        version=version,
    )


def _candidate_parts(value: object) -> tuple[Part, ...]:
    data = _object(value, "candidates[0].content", empty=True)
    raw = _list(data.get("parts"), "candidates[0].content.parts", empty=True)
    parsed = (_parse_part(part, f"parts[{i}]") for i, part in enumerate(raw))
    return tuple(p for p in parsed if p is not None)


def _parse_part(value: object, where: str) -> Part | None:
    """One part; ``None`` for a part of a kind trio_agents does not model (it is skipped)."""
    data = _object(value, where)
    signature = _signature(data.get("thoughtSignature"), where)
    if "functionCall" in data:
        return Part(
            function_call=_function_call(data["functionCall"], where), thought_signature=signature
        )
    if "inlineData" in data:
        return Part(inline_data=_blob(data["inlineData"], where), thought_signature=signature)
    if "fileData" in data:
        return Part(file_data=_file(data["fileData"], where), thought_signature=signature)
    if "executableCode" in data:
        return Part(executable_code=_code(data["executableCode"], where))
    if "codeExecutionResult" in data:
        return Part(code_execution_result=_code_result(data["codeExecutionResult"], where))
    text = _optional_str(data.get("text"), f"{where}.text")
    thought = data.get("thought")
    if thought is not None and not isinstance(thought, bool):
        raise _Malformed(f"{where}.thought is not a boolean")
    if text is None and not thought:
        if signature is None:
            return None
        text = ""  # a signature alone: kept on an empty text part, joined to the text before
    return Part(text=text, thought=thought or None, thought_signature=signature)


def _function_call(value: object, where: str) -> FunctionCall:
    where = f"{where}.functionCall"
    call = _object(value, where)
    name = _optional_str(call.get("name"), f"{where}.name")
    if not name:
        raise _Malformed(f"{where} has no name")
    args = _object(call.get("args"), f"{where}.args", empty=True)
    return FunctionCall(name=name, args=args, id=_optional_str(call.get("id"), f"{where}.id"))


def _signature(value: object, where: str) -> bytes | None:
    if value is None:
        return None
    where = f"{where}.thoughtSignature"
    return _b64(_optional_str(value, where) or "", where)


def _b64(text: str, where: str) -> bytes:
    """Standard or URL-safe base64 (the API documents bytes as base64), strictly checked."""
    try:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise _Malformed(f"{where} is not base64") from None


def _blob(value: object, where: str) -> Blob:
    data = _object(value, f"{where}.inlineData")
    mime = _optional_str(data.get("mimeType"), f"{where}.inlineData.mimeType")
    text = _optional_str(data.get("data"), f"{where}.inlineData.data") or ""
    return Blob(mime_type=mime, data=_b64(text, f"{where}.inlineData.data"))


def _file(value: object, where: str) -> FileData:
    data = _object(value, f"{where}.fileData")
    uri = _optional_str(data.get("fileUri"), f"{where}.fileData.fileUri")
    if not uri:
        raise _Malformed(f"{where}.fileData has no fileUri")
    mime = _optional_str(data.get("mimeType"), f"{where}.fileData.mimeType")
    return FileData(file_uri=uri, mime_type=mime)


def _code(value: object, where: str) -> ExecutableCode:
    data = _object(value, f"{where}.executableCode")
    code = _optional_str(data.get("code"), f"{where}.executableCode.code") or ""
    language = _optional_str(data.get("language"), f"{where}.executableCode.language")
    return ExecutableCode(code=code, language=language)


def _code_result(value: object, where: str) -> CodeExecutionResult:
    data = _object(value, f"{where}.codeExecutionResult")
    return CodeExecutionResult(
        outcome=_optional_str(data.get("outcome"), f"{where}.codeExecutionResult.outcome"),
        output=_optional_str(data.get("output"), f"{where}.codeExecutionResult.output"),
    )


_USAGE_FIELDS = {
    "promptTokenCount": "prompt_token_count",
    "candidatesTokenCount": "candidates_token_count",
    "totalTokenCount": "total_token_count",
    "cachedContentTokenCount": "cached_content_token_count",
    "thoughtsTokenCount": "thoughts_token_count",
    "toolUsePromptTokenCount": "tool_use_prompt_token_count",
}


def _usage(value: object) -> UsageMetadata | None:
    if value is None:
        return None
    data = _object(value, "usageMetadata")
    counts = {
        field: _count(data.get(wire), f"usageMetadata.{wire}")
        for wire, field in _USAGE_FIELDS.items()
    }
    return UsageMetadata(**counts)


# -- errors reported in a body ---------------------------------------------------------------------


def is_error_payload(payload: object) -> bool:
    """Whether ``payload`` is a Google API error object (``{"error": {...}}``)."""
    return isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping)


def error_from_payload(
    payload: Mapping[str, Any], *, model: str = "unknown", scrub: Scrub = _same
) -> ModelHTTPError:
    """The error for a Google API error object sent in a stream, ``{"error": {code, message,
    status}}``: a :class:`ModelHTTPError` with ``code`` as the status (500 when absent),
    :class:`ModelRateLimitError` for 429."""
    error = payload.get("error")
    error = error if isinstance(error, Mapping) else {}
    code = error.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else 500
    kind = error.get("status")
    reason = scrub(f"error in the answer stream: {kind if isinstance(kind, str) else status}")
    body = scrub(_excerpt(payload))
    if status == 429:
        return ModelRateLimitError(reason, status=429, body=body, provider=PROVIDER, model=model)
    return ModelHTTPError(reason, status=status, body=body, provider=PROVIDER, model=model)


def _excerpt(payload: object) -> str:
    return json.dumps(payload, ensure_ascii=False, default=str)[:_ERROR_EXCERPT]


# -- stream reassembly -----------------------------------------------------------------------------


class StreamAccumulator:
    """Turns the stream's ``GenerateContentResponse`` chunks into partial responses and, at the
    end, one aggregate.

    Each chunk's text and thought parts become one partial response; function calls arrive whole
    and wait for the aggregate. The aggregate holds every part in order, with consecutive text
    (or thought) parts joined, the last finish reason, usage and model version reported. It is an
    error response when the prompt was blocked, when the model stopped (not ``STOP``) without any
    content, or when it stopped for a reason other than ``STOP`` or ``MAX_TOKENS`` (``SAFETY``,
    ``RECITATION``...) after some content: that content, already streamed, is kept, as ADK does.
    """

    def __init__(self, *, fail: Fail = _default_fail) -> None:
        self._fail = fail
        self._parts: list[Part] = []
        self._last = _Chunk()

    @property
    def done(self) -> bool:
        """Whether a chunk ended the answer (a finish reason, or a blocked prompt)."""
        return self._last.finish_reason is not None or self._last.block_reason is not None

    def feed(self, body: object) -> list[LlmResponse]:
        """The partial responses for one decoded chunk (none, or one)."""
        try:
            chunk = _parse_chunk(body)
        except _Malformed as exc:
            raise self._fail(str(exc)) from None
        self._remember(chunk)
        self._parts.extend(chunk.parts)
        shown = tuple(p for p in chunk.parts if p.text and p.function_call is None)
        if not shown:
            return []
        return [LlmResponse(content=Content(role="model", parts=shown), partial=True)]

    def _remember(self, chunk: _Chunk) -> None:
        last = self._last
        self._last = _Chunk(
            finish_reason=chunk.finish_reason or last.finish_reason,
            finish_message=chunk.finish_message or last.finish_message,
            block_reason=chunk.block_reason or last.block_reason,
            block_message=chunk.block_message or last.block_message,
            usage=chunk.usage or last.usage,  # a usage-less trailing chunk does not erase it
            version=chunk.version or last.version,
        )

    def final(self) -> LlmResponse:
        """The aggregate answer (``turn_complete``), possibly an error response."""
        last = self._last
        parts = _joined(self._parts)
        content = Content(role="model", parts=tuple(parts)) if parts else None
        if last.block_reason is not None and content is None:
            return attrs.evolve(_blocked(last), turn_complete=True)
        response = LlmResponse(
            content=content,
            finish_reason=last.finish_reason,
            usage_metadata=last.usage,
            model_version=last.version,
            turn_complete=True,
        )
        reason = last.finish_reason
        if reason is not None and reason != "STOP" and (content is None or reason != "MAX_TOKENS"):
            return _stopped(response, reason, last.finish_message)
        return response


def _joined(parts: Sequence[Part]) -> list[Part]:
    """Consecutive text parts of the same kind (thought or not) merged into one; the first
    thought signature of a run is kept (a signature may come on an empty trailing part)."""
    out: list[Part] = []
    for part in parts:
        previous = out[-1] if out else None
        if previous is not None and _same_run(previous, part):
            out[-1] = Part(
                text=(previous.text or "") + (part.text or ""),
                thought=previous.thought,
                thought_signature=previous.thought_signature or part.thought_signature,
            )
        else:
            out.append(part)
    return out


def _same_run(previous: Part, part: Part) -> bool:
    return _is_text(previous) and _is_text(part) and bool(previous.thought) == bool(part.thought)


def _is_text(part: Part) -> bool:
    return part.text is not None and not any(
        (
            part.function_call,
            part.function_response,
            part.inline_data,
            part.file_data,
            part.executable_code,
            part.code_execution_result,
        )
    )
