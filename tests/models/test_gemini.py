"""GeminiModel's pure translation: request bodies, answers, stream reassembly (no HTTP)."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, strategies as st

from trio_agents import (
    CodeExecutionResult,
    Content,
    ExecutableCode,
    FileData,
    FunctionCall,
    ModelHTTPError,
    ModelRateLimitError,
    ModelResponseError,
    Part,
)
from trio_agents.models import FunctionDeclaration, LlmRequest
from trio_agents.models._gemini_wire import (
    StreamAccumulator,
    build_request_body,
    error_from_payload,
    is_error_payload,
    parse_response,
)

from .gemini_payloads import KEY, answer, call, streamed, text, usage

SIGNATURE = b"\x01signature\xff"
SIGNATURE_B64 = base64.b64encode(SIGNATURE).decode()


# -- request building ------------------------------------------------------------------------------


def test_contents_instruction_tools_and_config() -> None:
    request = LlmRequest(
        model="ignored",
        contents=[
            Content.from_text("hi"),
            Content(role="model", parts=(Part.from_function_call("f", {"a": 1}, id="adk-1"),)),
            Content(role="user", parts=(Part.from_function_response("f", {"r": 2}, id="adk-1"),)),
            Content(role="model", parts=(Part.from_function_call("g", {}, id="api-7"),)),
            Content(role="user", parts=(Part.from_function_response("g", {}, id="api-7"),)),
            Content(role="user", parts=(Part.from_bytes(b"\x00\xff", "image/png"),)),
        ],
        system_instruction="Be brief.",
        tools=[
            FunctionDeclaration(name="f", description="F.", parameters={"type": "object"}),
            FunctionDeclaration(name="g"),
        ],
        generation_config={
            "temperature": 0.2,
            "top_p": 0.9,
            "topK": 40,
            "max_output_tokens": 50,
            "stop_sequences": ["x"],
            "candidate_count": 1,
            "seed": 7,
            "thinking_config": {"include_thoughts": True, "thinking_budget": 128},
            "tool_config": {"function_calling_config": {"mode": "ANY"}},
            "safety_settings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"}],
            "unknown": 1,
            "extra_body": {"x": 1},
        },
    )
    body = build_request_body(request)
    assert body == {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            # R-EV-6: ids minted by the client are not sent; the API's own ids are echoed
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"r": 2}}}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "g", "args": {}, "id": "api-7"}}],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "g", "response": {}, "id": "api-7"}}],
            },
            {
                "role": "user",
                "parts": [{"inlineData": {"mimeType": "image/png", "data": "AP8="}}],
            },
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "f", "description": "F.", "parametersJsonSchema": {"type": "object"}},
                    {"name": "g", "description": ""},
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"}],
        "generationConfig": {
            "temperature": 0.2,
            "topP": 0.9,
            "topK": 40,
            "maxOutputTokens": 50,
            "stopSequences": ["x"],
            "candidateCount": 1,
            "seed": 7,
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 128},
        },
    }


def test_response_schema_is_sent_verbatim_as_a_json_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"user_name": {"type": "string"}, "n": {"anyOf": [{"type": "integer"}]}},
        "required": ["user_name"],
    }
    request = LlmRequest(
        response_schema=schema,
        generation_config={"response_schema": {"type": "STRING"}, "temperature": 0},
    )
    generation = build_request_body(request)["generationConfig"]
    assert generation == {
        "temperature": 0,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,  # snake_case property names untouched
    }


def test_a_json_schema_in_generation_config_keeps_its_keys() -> None:
    schema = {"type": "object", "properties": {"first_name": {"type": "string"}}}
    config = {"response_mime_type": "application/json", "response_json_schema": schema}
    generation = build_request_body(LlmRequest(generation_config=config))["generationConfig"]
    assert generation == {"responseMimeType": "application/json", "responseJsonSchema": schema}


def test_thoughts_signatures_files_and_code_parts() -> None:
    content = Content(
        role="model",
        parts=(
            Part(text="pondering", thought=True, thought_signature=SIGNATURE),
            Part(function_call=FunctionCall(name="f"), thought_signature=SIGNATURE),
            Part(file_data=FileData(file_uri="gs://b/o.pdf", mime_type="application/pdf")),
            Part(executable_code=ExecutableCode(code="print(1)")),
            Part(code_execution_result=CodeExecutionResult(outcome="OUTCOME_OK", output="1\n")),
        ),
    )
    parts = build_request_body(LlmRequest(contents=[content]))["contents"][0]["parts"]
    assert parts == [
        {"text": "pondering", "thought": True, "thoughtSignature": SIGNATURE_B64},
        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": SIGNATURE_B64},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/o.pdf"}},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
    ]


def test_empty_parts_and_contents_are_not_sent() -> None:
    request = LlmRequest(
        contents=[
            Content(role="user", parts=()),
            Content(role="model", parts=(Part(), Part(thought=True), Part(text="kept"))),
            Content(role="system", parts=(Part(),)),
        ]
    )
    assert build_request_body(request)["contents"] == [
        {"role": "model", "parts": [{"text": "kept"}]}
    ]


def test_roles_other_than_model_are_sent_as_user() -> None:
    request = LlmRequest(contents=[Content.from_text("x", role="tool"), Content.from_text("y")])
    assert [c["role"] for c in build_request_body(request)["contents"]] == ["user", "user"]


# -- response parsing ------------------------------------------------------------------------------


def test_text_thoughts_calls_usage_and_version() -> None:
    body = answer(
        text("thinking...", thought=True, thoughtSignature=SIGNATURE_B64),
        text("Hello"),
        call("f", {"x": [1, {"y": None}]}, "c9"),
        {"inlineData": {"mimeType": "image/png", "data": "AP8="}},
        usageMetadata=usage(3, 4, thoughtsTokenCount=2, cachedContentTokenCount=1),
        modelVersion="gemini-test-001",
    )
    response = parse_response(body)
    assert response.content == Content(
        role="model",
        parts=(
            Part(text="thinking...", thought=True, thought_signature=SIGNATURE),
            Part(text="Hello"),
            Part.from_function_call("f", {"x": [1, {"y": None}]}, id="c9"),
            Part.from_bytes(b"\x00\xff", "image/png"),
        ),
    )
    assert (response.finish_reason, response.error_code) == ("STOP", None)
    assert response.partial is None
    usage_metadata = response.usage_metadata
    assert usage_metadata is not None
    assert (
        usage_metadata.prompt_token_count,
        usage_metadata.candidates_token_count,
        usage_metadata.total_token_count,
        usage_metadata.thoughts_token_count,
        usage_metadata.cached_content_token_count,
    ) == (3, 4, 10, 2, 1)
    assert response.model_version == "gemini-test-001"


def test_files_code_and_url_safe_signatures_are_parsed() -> None:
    body = answer(
        {"fileData": {"fileUri": "gs://b/o", "mimeType": "text/plain"}},
        {"executableCode": {"language": "PYTHON", "code": "1+1"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2"}},
        {"text": "", "thoughtSignature": base64.urlsafe_b64encode(b"\xfb\xff").decode()},
        {"someFutureKind": {}},
    )
    response = parse_response(body)
    assert response.content is not None
    assert response.content.parts == (
        Part(file_data=FileData(file_uri="gs://b/o", mime_type="text/plain")),
        Part(executable_code=ExecutableCode(code="1+1", language="PYTHON")),
        Part(code_execution_result=CodeExecutionResult(outcome="OUTCOME_OK", output="2")),
        Part(text="", thought_signature=b"\xfb\xff"),
    )


def test_a_blocked_prompt_is_an_error_response() -> None:
    body = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "No."},
        "usageMetadata": usage(3, 0),
        "modelVersion": "gemini-test-001",
    }
    response = parse_response(body)
    assert (response.error_code, response.error_message) == ("PROHIBITED_CONTENT", "No.")
    assert response.content is None
    assert response.usage_metadata is not None and response.model_version == "gemini-test-001"
    default = parse_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert default.error_message == "the prompt was blocked: SAFETY"


@pytest.mark.parametrize(
    "reason", ["SAFETY", "RECITATION", "MAX_TOKENS", "MALFORMED_FUNCTION_CALL", "OTHER"]
)
def test_a_candidate_stopped_without_content_is_an_error_response(reason: str) -> None:
    response = parse_response({"candidates": [{"finishReason": reason, "index": 0}]})
    assert (response.error_code, response.finish_reason) == (reason, reason)
    assert response.error_message == f"the model stopped: {reason}"
    with_message = {"candidates": [{"finishReason": reason, "finishMessage": "why"}]}
    assert parse_response(with_message).error_message == "why"
    empty_parts = {"candidates": [{"content": {"parts": []}, "finishReason": reason}]}
    assert parse_response(empty_parts).error_code == reason


def test_finish_reasons_with_content_are_kept_as_they_are() -> None:
    response = parse_response(answer(text("cut"), reason="MAX_TOKENS"))
    assert (response.finish_reason, response.error_code) == ("MAX_TOKENS", None)
    assert parse_response(answer(text("?"), reason="NEW_REASON")).finish_reason == "NEW_REASON"


def test_stop_without_content_and_no_candidates_are_empty_answers() -> None:
    # As in ADK; the agent flow then reports "no content" for the STOP (R-LLM-6).
    stopped = parse_response({"candidates": [{"finishReason": "STOP"}]})
    assert (stopped.content, stopped.error_code, stopped.finish_reason) == (None, None, "STOP")
    nothing = parse_response({"usageMetadata": usage()})
    assert (nothing.content, nothing.error_code) == (None, None)


@pytest.mark.parametrize(
    "body",
    [
        [],
        "text",
        {"candidates": {}},
        {"candidates": ["x"]},
        {"candidates": [{"content": []}]},
        {"candidates": [{"content": {"parts": {}}}]},
        {"candidates": [{"content": {"parts": ["x"]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": []}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": 1}}]}}]},
        {"candidates": [{"content": {"parts": [{"text": 3}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "a", "thought": "yes"}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "a", "thoughtSignature": "%%"}]}}]},
        {"candidates": [{"content": {"parts": [{"inlineData": {"data": "!!"}}]}}]},
        {"candidates": [{"content": {"parts": [{"inlineData": "AP8="}]}}]},
        {"candidates": [{"content": {"parts": [{"fileData": {"mimeType": "x/y"}}]}}]},
        {"candidates": [{"finishReason": 1}]},
        {"candidates": [], "usageMetadata": {"promptTokenCount": "3"}},
        {"candidates": [], "usageMetadata": {"promptTokenCount": True}},
        {"candidates": [], "usageMetadata": []},
        {"promptFeedback": {"blockReason": 2}},
        {"modelVersion": 1},
        {"error": {"code": 500, "message": "internal"}},
    ],
)
def test_malformed_answers_raise_a_typed_error(body: Any) -> None:
    with pytest.raises(ModelResponseError):
        parse_response(body)
    with pytest.raises(ModelResponseError):
        StreamAccumulator().feed(body)


def test_the_fail_hook_makes_the_error() -> None:
    made = ModelResponseError("custom", provider="gemini", model="m")
    with pytest.raises(ModelResponseError) as caught:
        parse_response([], fail=lambda message: made)
    assert caught.value is made


def test_error_payloads_become_http_errors_with_their_code() -> None:
    payload = {"error": {"code": 503, "message": f"overloaded {KEY}", "status": "UNAVAILABLE"}}
    assert is_error_payload(payload) and not is_error_payload(answer(text("x")))
    error = error_from_payload(payload, model="m", scrub=lambda s: s.replace(KEY, "***"))
    assert type(error) is ModelHTTPError
    assert (error.status, error.provider, error.model) == (503, "gemini", "m")
    assert "UNAVAILABLE" in str(error) and "overloaded" in error.body
    assert KEY not in str(error)
    limited = error_from_payload({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}})
    assert isinstance(limited, ModelRateLimitError) and limited.status == 429
    assert error_from_payload({"error": {"message": "?"}}).status == 500


# -- stream reassembly -----------------------------------------------------------------------------


def test_text_deltas_are_partial_and_the_aggregate_joins_them() -> None:
    accumulator = StreamAccumulator()
    chunks = streamed(["Hel", "lo"], last=call("f", {"x": 1}, "c1"))
    partial = [r for c in chunks for r in accumulator.feed(c)]
    assert [(r.partial, r.content.text if r.content else None) for r in partial] == [
        (True, "Hel"),
        (True, "lo"),
    ]
    assert accumulator.done
    final = accumulator.final()
    assert (final.partial, final.turn_complete, final.finish_reason) == (None, True, "STOP")
    assert final.content == Content(
        role="model",
        parts=(Part(text="Hello"), Part.from_function_call("f", {"x": 1}, id="c1")),
    )
    assert final.usage_metadata is not None and final.usage_metadata.total_token_count == 12
    assert final.model_version == "gemini-test-001"


def test_thoughts_stream_apart_from_text_and_keep_their_signature() -> None:
    accumulator = StreamAccumulator()
    chunks = [
        answer(text("Let me ", thought=True), reason=None),
        answer(text("think.", thought=True), reason=None),
        answer(text("Answer"), reason=None),
        answer({"text": "", "thoughtSignature": SIGNATURE_B64}),
    ]
    partial = [r for c in chunks for r in accumulator.feed(c)]
    assert [p.content.parts[0].thought if p.content else None for p in partial] == [
        True,
        True,
        None,
    ]  # the empty trailing part is not a delta
    final = accumulator.final()
    assert final.content is not None
    assert final.content.parts == (
        Part(text="Let me think.", thought=True),
        Part(text="Answer", thought_signature=SIGNATURE),
    )


def test_usage_and_finish_reason_survive_trailing_chunks_without_them() -> None:
    accumulator = StreamAccumulator()
    accumulator.feed(answer(text("a"), reason=None, usageMetadata=usage(1, 1)))
    accumulator.feed(answer(text("b"), usageMetadata=usage(1, 2)))
    accumulator.feed({"candidates": [{"content": {"parts": []}}]})
    final = accumulator.final()
    assert final.finish_reason == "STOP"
    assert final.usage_metadata is not None and final.usage_metadata.candidates_token_count == 2


def test_a_blocked_prompt_ends_the_stream_in_an_error() -> None:
    accumulator = StreamAccumulator()
    assert accumulator.feed({"promptFeedback": {"blockReason": "SAFETY"}}) == []
    assert accumulator.done
    final = accumulator.final()
    assert (final.error_code, final.content, final.turn_complete) == ("SAFETY", None, True)


def test_a_safety_stop_after_text_is_an_error_that_keeps_the_text() -> None:
    accumulator = StreamAccumulator()
    accumulator.feed(answer(text("Here is how"), reason=None))
    accumulator.feed({"candidates": [{"finishReason": "SAFETY", "finishMessage": "unsafe"}]})
    final = accumulator.final()
    assert (final.error_code, final.error_message, final.finish_reason) == (
        "SAFETY",
        "unsafe",
        "SAFETY",
    )
    assert final.content is not None and final.content.text == "Here is how"


def test_max_tokens_after_text_is_a_truncated_answer_not_an_error() -> None:
    accumulator = StreamAccumulator()
    accumulator.feed(answer(text("Once upon"), reason=None))
    accumulator.feed({"candidates": [{"finishReason": "MAX_TOKENS"}]})
    final = accumulator.final()
    assert (final.error_code, final.finish_reason) == (None, "MAX_TOKENS")
    empty = StreamAccumulator()
    empty.feed({"candidates": [{"finishReason": "MAX_TOKENS"}]})
    assert empty.final().error_code == "MAX_TOKENS"


def test_a_stream_without_a_finish_reason_is_not_done() -> None:
    accumulator = StreamAccumulator()
    assert not accumulator.done
    accumulator.feed(answer(text("a"), reason=None))
    assert not accumulator.done


# -- properties ------------------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
args = st.dictionaries(texts, json_values, max_size=4)
call_ids = st.none() | st.text("abcdefghij0123456789-_", min_size=1).filter(
    lambda s: not s.startswith("adk-")
)
model_parts = st.one_of(
    st.builds(Part, text=texts),
    st.builds(Part, text=texts, thought=st.just(True)),
    st.builds(Part, text=texts, thought_signature=st.binary(min_size=1)),
    st.builds(
        Part.from_function_call, name=st.text("abcdefgh_", min_size=1), args=args, id=call_ids
    ),
    st.builds(Part.from_bytes, data=st.binary(), mime_type=st.sampled_from(["image/png", "a/b"])),
)


def wire(value: Any) -> Any:
    """What crosses the network: JSON text, decoded again."""
    return json.loads(json.dumps(value))


@given(parts=st.lists(model_parts, min_size=1, max_size=6))
def test_model_content_survives_request_and_answer(parts: list[Part]) -> None:
    content = Content(role="model", parts=tuple(parts))
    sent = wire(build_request_body(LlmRequest(contents=[content]))["contents"][0])
    parsed = parse_response({"candidates": [{"content": sent, "finishReason": "STOP"}]})
    assert parsed.content == content


@given(whole=texts.filter(bool), thought=texts, cuts=st.lists(st.integers(0, 60), max_size=8))
def test_any_chunking_of_a_stream_aggregates_to_the_whole(
    whole: str, thought: str, cuts: list[int]
) -> None:
    def pieces(value: str) -> list[str]:
        bounds = sorted({min(c, len(value)) for c in cuts} | {0, len(value)})
        return [value[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    chunks = [answer(text(p, thought=True), reason=None) for p in pieces(thought)]
    chunks += [answer(text(p), reason=None) for p in pieces(whole)]
    chunks.append(answer(call("f", {"t": whole}), usageMetadata=usage()))
    accumulator = StreamAccumulator()
    partial = [r for c in wire(chunks) for r in accumulator.feed(c)]
    final = accumulator.final()
    assert "".join(p.content.text or "" for p in partial if p.content) == whole
    expected = ([Part(text=thought, thought=True)] if thought else []) + [
        Part(text=whole),
        Part.from_function_call("f", {"t": whole}),
    ]
    assert final.content == Content(role="model", parts=tuple(expected))
    one_piece = [text(thought, thought=True)] if thought else []
    whole_answer = answer(*one_piece, text(whole), call("f", {"t": whole}), usageMetadata=usage())
    assert final == attrs.evolve(parse_response(whole_answer), turn_complete=True)
