"""Pure translation for Anthropic's Messages API: request bodies, answers, error payloads.

No I/O here; :mod:`trio_agents.models._anthropic` documents the decisions and holds the client
and the stream accumulator. Translators raise :class:`ConfigurationError` for requests the API
cannot express and :class:`ModelResponseError` for malformed answers, never bare ``KeyError`` or
``TypeError``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .._content import Blob, Content, FileData, FunctionCall, FunctionResponse, JSONValue, Part
from .._errors import (
    ConfigurationError,
    ModelError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelResponseError,
)
from .._events import UsageMetadata
from ._base import FunctionDeclaration, LlmRequest, LlmResponse

__all__ = [
    "ANSWER_TOOL",
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "answer_tool",
    "build_messages",
    "build_request_body",
    "error_from_payload",
    "parse_response",
    "parse_usage",
]

PROVIDER = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
MESSAGES_PATH = "/v1/messages"
ANSWER_TOOL = "json_answer"
"""The name of the tool that carries a ``response_schema`` answer."""
KEY_ENV = "ANTHROPIC_API_KEY"
URL_ENV = "ANTHROPIC_BASE_URL"

_DEFS_KEYS = ("$defs", "definitions")
_BODY_EXCERPT = 500

Json = dict[str, Any]
Scrub = Callable[[str], str]


def same(text: str) -> str:
    """``text`` unchanged (the default scrubber)."""
    return text


def malformed(message: str, model: str) -> ModelResponseError:
    """The :class:`ModelResponseError` for a malformed answer of ``model``."""
    return ModelResponseError(message, provider=PROVIDER, model=model)


# -- response_schema as a forced tool --------------------------------------------------------------


@attrs.frozen
class AnswerTool:
    """How a ``response_schema`` travels: the tool :data:`ANSWER_TOOL` whose input is the answer.

    ``wrapped`` is true when the schema is not an object schema, so the tool input is
    ``{"value": answer}``.
    """

    input_schema: Mapping[str, Any]
    wrapped: bool

    def declaration(self) -> Json:
        """The tool as the ``tools`` list of the request shows it."""
        return {
            "name": ANSWER_TOOL,
            "description": "Give the final answer. The input is the answer itself, "
            "following the required JSON schema.",
            "input_schema": dict(self.input_schema),
        }

    def answer_text(self, tool_input: Mapping[str, Any], *, model: str = "") -> str:
        """The JSON text of the answer carried by the tool input."""
        if not self.wrapped:
            return json.dumps(tool_input, ensure_ascii=False)
        if "value" not in tool_input:
            raise malformed(f"the {ANSWER_TOOL} tool input has no 'value'", model)
        return json.dumps(tool_input["value"], ensure_ascii=False)


def answer_tool(schema: Mapping[str, JSONValue] | None) -> AnswerTool | None:
    """The :class:`AnswerTool` for ``schema`` (``None`` when there is no schema)."""
    if schema is None:
        return None
    if schema.get("type") == "object":
        return AnswerTool(dict(schema), wrapped=False)
    inner = {k: v for k, v in schema.items() if k not in _DEFS_KEYS}
    wrapper: Json = {"type": "object", "properties": {"value": inner}, "required": ["value"]}
    wrapper.update({k: schema[k] for k in _DEFS_KEYS if k in schema})  # keep $refs resolvable
    return AnswerTool(wrapper, wrapped=True)


# -- requests --------------------------------------------------------------------------------------


def build_request_body(
    request: LlmRequest,
    model: str,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    stream: bool = False,
) -> Json:
    """The JSON body of ``POST /v1/messages`` for ``request``.

    Raises:
        ConfigurationError: the request cannot be expressed (a call without id, an unsupported
            part, a bad ``generation_config`` value).
    """
    config = request.generation_config
    answer = answer_tool(request.response_schema)
    body: Json = {
        "model": model,
        "max_tokens": _max_tokens(config, max_tokens),
        "messages": build_messages(request.contents),
    }
    if system := _system(request.system_instruction, answer):
        body["system"] = system
    body.update(_sampling(config))
    thinking = _thinking(config)
    if thinking is not None:
        body["thinking"] = thinking
    if tools := _tools(request.tools, answer):
        body["tools"] = tools
        thinking_on = thinking is not None and thinking.get("type") != "disabled"
        choice = _tool_choice(config, answer, bool(request.tools), thinking_on)
        if choice is not None:
            body["tool_choice"] = choice
    if stream:
        body["stream"] = True
    return body


def _max_tokens(config: Mapping[str, Any], default: int) -> int:
    value = config.get("max_output_tokens", default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_output_tokens must be a positive int, got {value!r}")
    return value


def _system(instruction: str | None, answer: AnswerTool | None) -> str:
    pieces = [instruction] if instruction else []
    if answer is not None:
        pieces.append(f"Give your final answer by calling the `{ANSWER_TOOL}` tool.")
    return "\n\n".join(pieces)


def _sampling(config: Mapping[str, Any]) -> Json:
    names = ("temperature", "top_p", "top_k", "stop_sequences")
    out = {name: config[name] for name in names if config.get(name) is not None}
    if "stop_sequences" in out:
        out["stop_sequences"] = list(out["stop_sequences"])
    return out


def _thinking(config: Mapping[str, Any]) -> Json | None:
    native = config.get("thinking")
    if native is not None:
        if not isinstance(native, Mapping):
            raise ConfigurationError(f"thinking must be an Anthropic thinking object: {native!r}")
        return dict(native)
    gemini = config.get("thinking_config")
    budget = gemini.get("thinking_budget") if isinstance(gemini, Mapping) else None
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        return {"type": "enabled", "budget_tokens": budget}
    return None


def _tools(declarations: Sequence[FunctionDeclaration], answer: AnswerTool | None) -> list[Json]:
    tools = [_tool(d) for d in declarations]
    if answer is not None:
        if any(d.name == ANSWER_TOOL for d in declarations):
            raise ConfigurationError(
                f"a tool is named {ANSWER_TOOL!r}, which carries response_schema answers"
            )
        tools.append(answer.declaration())
    return tools


def _tool(declaration: FunctionDeclaration) -> Json:
    schema = dict(declaration.parameters or {"type": "object", "properties": {}})
    tool: Json = {"name": declaration.name}
    if declaration.description:
        tool["description"] = declaration.description
    tool["input_schema"] = schema
    return tool


def _tool_choice(
    config: Mapping[str, Any], answer: AnswerTool | None, other_tools: bool, thinking: bool
) -> Json | None:
    given = config.get("tool_choice")
    if isinstance(given, str) and given in {"auto", "any", "none"}:
        return {"type": given}
    if isinstance(given, Mapping) and isinstance(given.get("type"), str):
        return dict(given)
    if given is not None:
        raise ConfigurationError(
            f"tool_choice must be 'auto', 'any', 'none' or an Anthropic tool_choice object, "
            f"got {given!r}"
        )
    if answer is None:
        return None
    if thinking:
        return {"type": "auto"}  # thinking rejects forced tool use
    return {"type": "any"} if other_tools else {"type": "tool", "name": ANSWER_TOOL}


def build_messages(contents: Sequence[Content]) -> list[Json]:
    """The ``messages`` list: alternating roles, tool results first in each user message."""
    messages: list[Json] = []
    for content in contents:
        role = "assistant" if content.role in {"model", "assistant"} else "user"
        blocks = [block for part in content.parts for block in _blocks(part)]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    for message in messages:
        if message["role"] == "user":
            message["content"].sort(key=lambda block: block["type"] != "tool_result")
    return messages


def _blocks(part: Part) -> list[Json]:
    if part.function_call is not None:
        return [_tool_use(part.function_call)]
    if part.function_response is not None:
        return [_tool_result(part.function_response)]
    if part.thought:
        return _thinking_blocks(part)
    if part.text is not None:
        return [{"type": "text", "text": part.text}] if part.text.strip() else []
    if part.inline_data is not None:
        return [_inline(part.inline_data)]
    if part.file_data is not None:
        return [_file(part.file_data)]
    if part.executable_code is not None or part.code_execution_result is not None:
        raise ConfigurationError("Anthropic models take no executable_code/code_execution parts")
    return []


def _tool_use(call: FunctionCall) -> Json:
    if not call.id:
        raise ConfigurationError(
            f"function call {call.name!r} has no id; Anthropic pairs tool_use and tool_result "
            "blocks by id"
        )
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.args)}


def _tool_result(response: FunctionResponse) -> Json:
    if not response.id:
        raise ConfigurationError(
            f"function response {response.name!r} has no id; Anthropic pairs tool_use and "
            "tool_result blocks by id"
        )
    try:
        text = json.dumps(response.response, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"function response {response.name!r} is not JSON-serializable: {exc}"
        ) from exc
    return {"type": "tool_result", "tool_use_id": response.id, "content": text}


def _thinking_blocks(part: Part) -> list[Json]:
    if part.thought_signature is None:
        return []  # unsigned thinking (another model's, or a summary) cannot be sent back
    signature = part.thought_signature.decode("utf-8", "replace")
    if part.text is None:
        return [{"type": "redacted_thinking", "data": signature}]
    return [{"type": "thinking", "thinking": part.text, "signature": signature}]


def _inline(blob: Blob) -> Json:
    mime = blob.mime_type or ""
    data = base64.b64encode(blob.data).decode("ascii")
    source = {"type": "base64", "media_type": mime, "data": data}
    if mime.startswith("image/"):
        return {"type": "image", "source": source}
    if mime == "application/pdf":
        return {"type": "document", "source": source}
    if mime == "text/plain":
        text = blob.data.decode("utf-8", "replace")
        return {"type": "document", "source": {"type": "text", "media_type": mime, "data": text}}
    raise ConfigurationError(f"Anthropic models take no inline data of type {mime or 'unknown'!r}")


def _file(file: FileData) -> Json:
    mime = file.mime_type or ""
    if file.file_uri.startswith(("https://", "http://")):
        source = {"type": "url", "url": file.file_uri}
        if mime.startswith("image/"):
            return {"type": "image", "source": source}
        if mime == "application/pdf":
            return {"type": "document", "source": source}
    raise ConfigurationError(
        f"Anthropic models take file_data only as http(s) URLs of images or PDFs, "
        f"got {file.file_uri!r} ({mime or 'no MIME type'})"
    )


# -- responses -------------------------------------------------------------------------------------

_FINISH = {
    "end_turn": "STOP",
    "stop_sequence": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "model_context_window_exceeded": "MAX_TOKENS",
    "refusal": "SAFETY",
}

_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def parse_response(
    body: object, *, model: str = "", answer: AnswerTool | None = None, scrub: Scrub = same
) -> LlmResponse:
    """The :class:`LlmResponse` for a Messages API answer (a ``message`` object).

    ``model`` names the model in errors; ``answer`` turns the answer tool's input into text;
    ``scrub`` cleans the text of an error answer.

    Raises:
        ModelResponseError: the answer is malformed.
        ModelHTTPError: the answer is an ``error`` object.
    """
    if not isinstance(body, Mapping):
        raise malformed(f"the answer is not a JSON object but {type(body).__name__}", model)
    if body.get("type") == "error":
        raise error_from_payload(body, model=model, scrub=scrub)
    blocks = body.get("content")
    if not isinstance(blocks, list):
        raise malformed("the answer has no 'content' list", model)
    parts = _answer_parts(blocks, answer, model)
    stop_reason = _optional_str(body, "stop_reason", model)
    stop_sequence = _optional_str(body, "stop_sequence", model)
    return _response(
        parts,
        stop_reason,
        stop_sequence,
        usage=parse_usage(body.get("usage"), model=model),
        model_version=_optional_str(body, "model", model),
    )


def _answer_parts(blocks: list[Any], answer: AnswerTool | None, model: str) -> list[Part]:
    """The parts of ``blocks``; text beside an answer-tool answer is left out (it is no JSON)."""
    per_block = [(_is_answer(b, answer), _parts(b, i, answer, model)) for i, b in enumerate(blocks)]
    answered = any(is_answer for is_answer, _ in per_block)
    return [
        part
        for is_answer, parts in per_block
        for part in parts
        if is_answer or not answered or part.text is None or part.thought
    ]


def _is_answer(block: object, answer: AnswerTool | None) -> bool:
    return (
        answer is not None
        and isinstance(block, Mapping)
        and block.get("type") == "tool_use"
        and block.get("name") == ANSWER_TOOL
    )


def _optional_str(body: Mapping[str, Any], key: str, model: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise malformed(f"'{key}' is a {type(value).__name__}, not a string", model)
    return value


def _parts(block: object, index: int, answer: AnswerTool | None, model: str) -> list[Part]:
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise malformed(f"content block {index} is not an object with a 'type'", model)
    kind = block["type"]
    where = f"content block {index} ({kind})"
    if kind == "text":
        return [Part(text=_str_field(block, "text", where, model))]
    if kind == "thinking":
        signature = block.get("signature")
        return [
            Part(
                text=_str_field(block, "thinking", where, model),
                thought=True,
                thought_signature=signature.encode() if isinstance(signature, str) else None,
            )
        ]
    if kind == "redacted_thinking":
        data = _str_field(block, "data", where, model)
        return [Part(thought=True, thought_signature=data.encode())]
    if kind == "tool_use":
        return [_call_part(block, where, answer, model)]
    return []  # server tools, citations, future block types: nothing ADK can use


def _str_field(block: Mapping[str, Any], key: str, where: str, model: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise malformed(f"{where} has no string '{key}'", model)
    return value


def _call_part(block: Mapping[str, Any], where: str, answer: AnswerTool | None, model: str) -> Part:
    name = _str_field(block, "name", where, model)
    tool_input = block.get("input")
    if not isinstance(tool_input, Mapping):
        raise malformed(f"{where} has no object 'input'", model)
    if answer is not None and name == ANSWER_TOOL:
        return Part(text=answer.answer_text(tool_input, model=model))
    call_id = _str_field(block, "id", where, model)
    return Part(function_call=FunctionCall(name=name, args=tool_input, id=call_id))


def _response(
    parts: list[Part],
    stop_reason: str | None,
    stop_sequence: str | None,
    *,
    usage: UsageMetadata | None,
    model_version: str | None,
) -> LlmResponse:
    finish = None if stop_reason is None else _FINISH.get(stop_reason, "OTHER")
    content = Content(role="model", parts=parts) if parts else None
    error_code = error_message = None
    if stop_reason == "refusal":
        error_code, error_message = "SAFETY", "The model refused to answer (stop_reason refusal)."
    elif content is None and finish not in {None, "STOP"}:
        error_code = finish
        error_message = f"The model stopped ({stop_reason}) before giving any content."
    metadata: Json = {}
    if stop_reason is not None:
        metadata["anthropic_stop_reason"] = stop_reason
    if stop_sequence is not None:
        metadata["anthropic_stop_sequence"] = stop_sequence
    return LlmResponse(
        content=content,
        finish_reason=finish,
        error_code=error_code,
        error_message=error_message,
        custom_metadata=metadata or None,
        usage_metadata=usage,
        model_version=model_version,
    )


def parse_usage(usage: object, *, model: str = "") -> UsageMetadata | None:
    """:class:`UsageMetadata` from the API's ``usage`` object (``None`` when absent)."""
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise malformed("'usage' is not an object", model)
    counts: dict[str, int | None] = {}
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
        value = usage.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise malformed(f"usage '{key}' is not an integer", model)
        counts[key] = value
    created = usage.get("cache_creation_input_tokens")
    created = created if isinstance(created, int) and not isinstance(created, bool) else 0
    inputs = counts["input_tokens"]
    prompt = None if inputs is None else inputs + (counts["cache_read_input_tokens"] or 0) + created
    output = counts["output_tokens"]
    total = None if prompt is None and output is None else (prompt or 0) + (output or 0)
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=output,
        total_token_count=total,
        cached_content_token_count=counts["cache_read_input_tokens"],
    )


def error_from_payload(
    payload: Mapping[str, Any], *, model: str = "", scrub: Scrub = same
) -> ModelError:
    """The error for an ``{"type": "error", "error": {"type", "message"}}`` payload.

    Known error types become :class:`ModelHTTPError` with the status the type has over HTTP
    (:class:`ModelRateLimitError` for ``rate_limit_error``; unknown types count as 500); a
    payload without an error object is a :class:`ModelResponseError`.
    """
    error = payload.get("error")
    if not isinstance(error, Mapping) or not isinstance(error.get("type"), str):
        return malformed("an error event without an error object", model)
    kind = error["type"]
    status = _ERROR_STATUS.get(kind, 500)
    body = scrub(json.dumps(payload, ensure_ascii=False)[:_BODY_EXCERPT])
    reason = scrub(f"error event {kind}")
    if status == 429:
        return ModelRateLimitError(reason, provider=PROVIDER, model=model, status=429, body=body)
    return ModelHTTPError(reason, provider=PROVIDER, model=model, status=status, body=body)
