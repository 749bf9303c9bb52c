"""Anthropic Messages API translation, without HTTP: request bodies, answers, stream events.

The client (MockTransport) is tested in ``test_anthropic_client.py``, the fake server over real
sockets in ``test_provider_contract.py``.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tests.models.anthropic_payloads import (
    MESSAGE_STOP,
    block_start,
    block_stop,
    delta,
    message_delta,
    message_start,
    sse,
    text_stream,
)
from trio_agents import (
    Blob,
    ConfigurationError,
    Content,
    ExecutableCode,
    FileData,
    ModelHTTPError,
    ModelRateLimitError,
    ModelResponseError,
    Part,
    UsageMetadata,
)
from trio_agents.models import FunctionDeclaration, LlmRequest, LlmResponse, ServerSentEvent
from trio_agents.models._anthropic import StreamAccumulator
from trio_agents.models._anthropic_wire import (
    ANSWER_TOOL,
    DEFAULT_MAX_TOKENS,
    answer_tool,
    build_messages,
    build_request_body,
    error_from_payload,
    parse_response,
    parse_usage,
)


def user(text: str) -> Content:
    return Content.from_text(text, role="user")


def model_says(*parts: Part) -> Content:
    return Content(role="model", parts=parts)


def body_for(**kwargs: Any) -> dict[str, Any]:
    return build_request_body(LlmRequest(**kwargs), "claude-test")


# -- request bodies --------------------------------------------------------------------------------


def test_minimal_request_has_model_max_tokens_and_messages_only() -> None:
    assert body_for(contents=[user("hi")]) == {
        "model": "claude-test",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_system_instruction_becomes_system_and_model_role_becomes_assistant() -> None:
    body = body_for(
        system_instruction="Be brief.",
        contents=[user("hi"), model_says(Part(text="hello")), user("bye")],
    )
    assert body["system"] == "Be brief."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


def test_generation_config_maps_to_anthropic_names() -> None:
    body = body_for(
        contents=[user("hi")],
        generation_config={
            "max_output_tokens": 100,
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "stop_sequences": ("END",),
            "candidate_count": 3,  # not an Anthropic option: ignored
        },
    )
    assert body["max_tokens"] == 100
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.5, 0.9, 40)
    assert body["stop_sequences"] == ["END"]
    assert "candidate_count" not in body


def test_default_max_tokens_can_be_chosen_by_the_caller() -> None:
    body = build_request_body(LlmRequest(contents=[user("x")]), "m", max_tokens=77, stream=True)
    assert body["max_tokens"] == 77
    assert body["stream"] is True


@pytest.mark.parametrize("value", [0, -1, True, "100", 1.5])
def test_bad_max_output_tokens_is_a_configuration_error(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_output_tokens"):
        body_for(contents=[user("x")], generation_config={"max_output_tokens": value})


def test_thinking_comes_from_native_object_or_gemini_budget() -> None:
    native = {"type": "enabled", "budget_tokens": 2048}
    assert body_for(generation_config={"thinking": native})["thinking"] == native
    gemini = {"thinking_config": {"thinking_budget": 1024, "include_thoughts": True}}
    assert body_for(generation_config=gemini)["thinking"] == {
        "type": "enabled",
        "budget_tokens": 1024,
    }
    assert "thinking" not in body_for(generation_config={"thinking_config": {"thinking_budget": 0}})
    with pytest.raises(ConfigurationError, match="thinking"):
        body_for(generation_config={"thinking": "on"})


def test_tools_become_name_description_input_schema() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    body = body_for(
        contents=[user("x")],
        tools=[
            FunctionDeclaration(name="weather", description="Weather.", parameters=params),
            FunctionDeclaration(name="noargs"),
        ],
    )
    assert body["tools"] == [
        {"name": "weather", "description": "Weather.", "input_schema": params},
        {"name": "noargs", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("any", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"type": "tool", "name": "t"}, {"type": "tool", "name": "t"}),
    ],
)
def test_tool_choice_from_generation_config(given: object, sent: dict[str, Any]) -> None:
    body = body_for(tools=[FunctionDeclaration(name="t")], generation_config={"tool_choice": given})
    assert body["tool_choice"] == sent


def test_tool_choice_is_not_sent_without_tools_and_bad_values_are_refused() -> None:
    assert "tool_choice" not in body_for(generation_config={"tool_choice": "any"})
    with pytest.raises(ConfigurationError, match="tool_choice"):
        body_for(tools=[FunctionDeclaration(name="t")], generation_config={"tool_choice": "must"})


def test_consecutive_contents_of_one_role_are_merged_with_tool_results_first() -> None:
    contents = [
        user("first"),
        user("second"),
        model_says(Part.from_function_call("f", {"a": 1}, id="toolu_1")),
        model_says(Part.from_function_call("g", {}, id="toolu_2")),
        Content(role="user", parts=[Part.from_function_response("f", {"r": 1}, id="toolu_1")]),
        user("and also"),
        Content(role="user", parts=[Part.from_function_response("g", {"r": 2}, id="toolu_2")]),
    ]
    messages = build_messages(contents)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["text"] for b in messages[0]["content"]] == ["first", "second"]
    assert [b["id"] for b in messages[1]["content"]] == ["toolu_1", "toolu_2"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert [b.get("tool_use_id") for b in messages[2]["content"]] == ["toolu_1", "toolu_2", None]


def test_function_calls_and_responses_carry_ids_and_json_text() -> None:
    messages = build_messages(
        [
            model_says(
                Part(text="Let me look."), Part.from_function_call("f", {"q": "é"}, id="c1")
            ),
            Content(role="user", parts=[Part.from_function_response("f", {"ok": "é"}, id="c1")]),
        ]
    )
    assert messages[0]["content"][1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "f",
        "input": {"q": "é"},
    }
    result = messages[1]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "c1", "content": '{"ok": "é"}'}
    assert json.loads(result["content"]) == {"ok": "é"}


def test_calls_and_responses_without_ids_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"function call 'f' has no id"):
        build_messages([model_says(Part.from_function_call("f", {}))])
    with pytest.raises(ConfigurationError, match=r"function response 'f' has no id"):
        build_messages([Content(role="user", parts=[Part.from_function_response("f", {})])])


def test_unserializable_function_response_is_a_configuration_error() -> None:
    part = Part.from_function_response("f", {"x": object()}, id="c")
    with pytest.raises(ConfigurationError, match="not JSON-serializable"):
        build_messages([Content(role="user", parts=[part])])


def test_empty_and_whitespace_text_is_dropped_with_empty_messages() -> None:
    messages = build_messages([user("hi"), model_says(Part(text="  \n")), user("")])
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_inline_images_pdfs_and_text_documents() -> None:
    png, pdf = b"\x89PNG....", b"%PDF-1.4"
    blocks = build_messages(
        [
            Content(
                role="user",
                parts=[
                    Part.from_bytes(png, "image/png"),
                    Part.from_bytes(pdf, "application/pdf"),
                    Part.from_bytes(b"notes", "text/plain"),
                ],
            )
        ]
    )[0]["content"]
    assert blocks == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(png).decode(),
            },
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(pdf).decode(),
            },
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
        },
    ]


def test_file_data_urls_and_unsupported_parts() -> None:
    url = "https://example.com/cat.jpg"
    part = Part(file_data=FileData(file_uri=url, mime_type="image/jpeg"))
    block = build_messages([Content(role="user", parts=[part])])[0]["content"][0]
    assert block == {"type": "image", "source": {"type": "url", "url": url}}
    bad_parts = [
        Part(inline_data=Blob(mime_type="audio/wav", data=b"RIFF")),
        Part(file_data=FileData(file_uri="gs://bucket/cat.jpg", mime_type="image/jpeg")),
        Part(file_data=FileData(file_uri="https://example.com/a.mp3", mime_type="audio/mpeg")),
        Part(executable_code=ExecutableCode(code="print(1)")),
    ]
    for bad in bad_parts:
        with pytest.raises(ConfigurationError, match="Anthropic models take"):
            build_messages([Content(role="user", parts=[bad])])


def test_signed_thoughts_go_back_as_thinking_and_unsigned_ones_are_dropped() -> None:
    content = model_says(
        Part(text="hmm", thought=True, thought_signature=b"sig-1"),
        Part(thought=True, thought_signature=b"redacted-data"),
        Part(text="unsigned", thought=True),
        Part(text="answer"),
    )
    assert build_messages([content])[0]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "redacted-data"},
        {"type": "text", "text": "answer"},
    ]


# -- response_schema as a forced tool --------------------------------------------------------------

OBJECT_SCHEMA = {
    "type": "object",
    "properties": {"capital": {"type": "string"}},
    "required": ["capital"],
}


def test_object_schema_becomes_a_forced_answer_tool() -> None:
    body = body_for(contents=[user("x")], system_instruction="Hi.", response_schema=OBJECT_SCHEMA)
    assert body["tools"][-1]["name"] == ANSWER_TOOL
    assert body["tools"][-1]["input_schema"] == OBJECT_SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
    assert body["system"].startswith("Hi.\n\n")
    assert ANSWER_TOOL in body["system"]


def test_non_object_schema_is_wrapped_with_definitions_kept_at_the_root() -> None:
    schema = {"type": "array", "items": {"$ref": "#/$defs/Item"}, "$defs": {"Item": {}}}
    tool = answer_tool(schema)
    assert tool is not None
    assert tool.wrapped
    assert tool.input_schema == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["value"],
        "$defs": {"Item": {}},
    }
    assert answer_tool(None) is None


def test_answer_tool_choice_with_other_tools_thinking_or_an_explicit_choice() -> None:
    tools = [FunctionDeclaration(name="f")]
    with_tools = body_for(tools=tools, response_schema=OBJECT_SCHEMA)
    assert [t["name"] for t in with_tools["tools"]] == ["f", ANSWER_TOOL]
    assert with_tools["tool_choice"] == {"type": "any"}
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert body_for(response_schema=OBJECT_SCHEMA, generation_config=thinking)["tool_choice"] == {
        "type": "auto"
    }
    explicit = body_for(response_schema=OBJECT_SCHEMA, generation_config={"tool_choice": "auto"})
    assert explicit["tool_choice"] == {"type": "auto"}


def test_a_tool_named_like_the_answer_tool_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=ANSWER_TOOL):
        body_for(tools=[FunctionDeclaration(name=ANSWER_TOOL)], response_schema=OBJECT_SCHEMA)


def test_answer_tool_input_comes_back_as_json_text() -> None:
    block = {"type": "tool_use", "id": "t", "name": ANSWER_TOOL, "input": {"capital": "Paris"}}
    answer = answer_tool(OBJECT_SCHEMA)
    response = parse_response({"content": [block], "stop_reason": "tool_use"}, answer=answer)
    assert response.content is not None
    assert json.loads(response.content.text or "") == {"capital": "Paris"}
    assert response.content.parts[0].function_call is None
    assert response.finish_reason == "STOP"
    wrapped = answer_tool({"type": "array", "items": {"type": "integer"}})
    block["input"] = {"value": [1, 2]}
    listed = parse_response({"content": [block]}, answer=wrapped)
    assert listed.content is not None
    assert listed.content.text == "[1, 2]"
    block["input"] = {"other": 1}
    with pytest.raises(ModelResponseError, match="no 'value'"):
        parse_response({"content": [block]}, answer=wrapped)


def test_text_beside_the_answer_tool_is_left_out_but_thoughts_stay() -> None:
    blocks = [
        {"type": "thinking", "thinking": "Paris.", "signature": "s"},
        {"type": "text", "text": "Here is the JSON:"},
        {"type": "tool_use", "id": "t", "name": ANSWER_TOOL, "input": {"capital": "Paris"}},
    ]
    response = parse_response({"content": blocks}, answer=answer_tool(OBJECT_SCHEMA))
    assert response.content is not None
    assert [p.thought for p in response.content.parts] == [True, None]
    assert json.loads(response.content.text or "") == {"capital": "Paris"}
    plain = parse_response({"content": blocks[:2]}, answer=answer_tool(OBJECT_SCHEMA))
    assert plain.content is not None
    assert plain.content.text == "Here is the JSON:"  # no answer tool call: the text is kept


def test_without_a_schema_a_tool_named_like_the_answer_tool_is_a_call() -> None:
    block = {"type": "tool_use", "id": "t", "name": ANSWER_TOOL, "input": {}}
    response = parse_response({"content": [block]})
    assert response.content is not None
    assert response.content.parts[0].function_call is not None


# -- answers ---------------------------------------------------------------------------------------


def full_message(**overrides: Any) -> dict[str, Any]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "I'll check."},
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }
    return {**message, **overrides}


def test_answer_blocks_become_parts_in_order() -> None:
    response = parse_response(full_message())
    assert response.content == Content(
        role="model",
        parts=[
            Part(text="Let me think.", thought=True, thought_signature=b"sig"),
            Part(thought=True, thought_signature=b"opaque"),
            Part(text="I'll check."),
            Part.from_function_call("weather", {"city": "Paris"}, id="toolu_1"),
        ],
    )
    assert response.finish_reason == "STOP"
    assert response.model_version == "claude-test-20250101"
    assert response.custom_metadata == {"anthropic_stop_reason": "tool_use"}
    assert response.error_code is None
    assert response.partial is None


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "STOP"),
        ("stop_sequence", "STOP"),
        ("tool_use", "STOP"),
        ("max_tokens", "MAX_TOKENS"),
        ("model_context_window_exceeded", "MAX_TOKENS"),
        ("pause_turn", "OTHER"),
        ("something_new", "OTHER"),
        (None, None),
    ],
)
def test_stop_reasons_map_to_finish_reasons(stop_reason: str | None, finish: str | None) -> None:
    response = parse_response(full_message(stop_reason=stop_reason))
    assert response.finish_reason == finish
    assert response.error_code is None


def test_stop_sequence_is_kept_in_custom_metadata() -> None:
    response = parse_response(full_message(stop_reason="stop_sequence", stop_sequence="END"))
    assert response.custom_metadata == {
        "anthropic_stop_reason": "stop_sequence",
        "anthropic_stop_sequence": "END",
    }


def test_refusal_is_an_error_response_not_an_exception() -> None:
    response = parse_response(
        full_message(content=[{"type": "text", "text": "I can't"}], stop_reason="refusal")
    )
    assert response.finish_reason == "SAFETY"
    assert response.error_code == "SAFETY"
    assert response.error_message is not None
    assert "refus" in response.error_message
    assert response.content is not None


def test_max_tokens_without_content_is_an_error_response() -> None:
    response = parse_response(full_message(content=[], stop_reason="max_tokens"))
    assert response.content is None
    assert response.error_code == "MAX_TOKENS"
    stopped = parse_response(full_message(content=[], stop_reason="end_turn"))
    assert stopped.content is None
    assert stopped.error_code is None  # the LLM flow reports an empty STOP itself


def test_usage_maps_counts_including_cached_input() -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 100,
        "output_tokens": 7,
    }
    assert parse_usage(usage) == UsageMetadata(
        prompt_token_count=115,
        candidates_token_count=7,
        total_token_count=122,
        cached_content_token_count=100,
    )
    assert parse_usage(None) is None
    assert parse_usage({"output_tokens": 3}) == UsageMetadata(
        candidates_token_count=3, total_token_count=3
    )


@pytest.mark.parametrize(
    "body",
    [
        [],
        "text",
        {"content": "hi"},
        {},
        {"content": ["hi"]},
        {"content": [{"text": "no type"}]},
        {"content": [{"type": "text"}]},
        {"content": [{"type": "text", "text": 3}]},
        {"content": [{"type": "thinking", "signature": "s"}]},
        {"content": [{"type": "redacted_thinking"}]},
        {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]},
        {"content": [{"type": "tool_use", "name": "f", "input": {}}]},
        {"content": [{"type": "tool_use", "id": "t", "input": {}}]},
        {"content": [], "stop_reason": 1},
        {"content": [], "model": ["x"]},
        {"content": [], "usage": "lots"},
        {"content": [], "usage": {"input_tokens": "10"}},
        {"content": [], "usage": {"output_tokens": True}},
        {"type": "error", "error": "overloaded"},
    ],
)
def test_malformed_answers_are_response_errors(body: object) -> None:
    with pytest.raises(ModelResponseError) as info:
        parse_response(body, model="claude-test")
    assert info.value.provider == "anthropic"
    assert info.value.model == "claude-test"


# -- error payloads --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "cls"),
    [
        ("invalid_request_error", 400, ModelHTTPError),
        ("authentication_error", 401, ModelHTTPError),
        ("permission_error", 403, ModelHTTPError),
        ("not_found_error", 404, ModelHTTPError),
        ("request_too_large", 413, ModelHTTPError),
        ("rate_limit_error", 429, ModelRateLimitError),
        ("api_error", 500, ModelHTTPError),
        ("overloaded_error", 529, ModelHTTPError),
        ("brand_new_error", 500, ModelHTTPError),
    ],
)
def test_error_payloads_become_http_errors_by_type(kind: str, status: int, cls: type) -> None:
    payload = {"type": "error", "error": {"type": kind, "message": "Overloaded"}}
    error = error_from_payload(payload, model="m")
    assert type(error) is cls
    assert isinstance(error, ModelHTTPError)
    assert error.status == status
    assert kind in str(error)
    assert "Overloaded" in error.body


def test_error_payloads_are_scrubbed_and_malformed_ones_are_response_errors() -> None:
    payload = {"type": "error", "error": {"type": "api_error", "message": "key sk-secret"}}
    error = error_from_payload(payload, scrub=lambda t: t.replace("sk-secret", "***"))
    assert "sk-secret" not in str(error)
    assert isinstance(error_from_payload({"type": "error"}), ModelResponseError)
    with pytest.raises(ModelHTTPError):
        parse_response(payload)


# -- stream accumulation ---------------------------------------------------------------------------


def feed_all(
    events: list[dict[str, Any]], accumulator: StreamAccumulator | None = None, named: bool = True
) -> tuple[list[LlmResponse], StreamAccumulator]:
    acc = accumulator or StreamAccumulator(model="claude-test")
    chunks = [c for e in events for c in acc.feed(sse(e, named=named))]
    return chunks, acc


def test_a_full_stream_gives_partials_then_an_aggregate() -> None:
    events = [
        message_start(),
        block_start(0, {"type": "thinking", "thinking": ""}),
        delta(0, "thinking_delta", thinking="Hmm, "),
        delta(0, "thinking_delta", thinking="weather."),
        delta(0, "signature_delta", signature="sig=="),
        block_stop(0),
        {"type": "ping"},
        block_start(1, {"type": "text", "text": ""}),
        delta(1, "text_delta", text="Let me "),
        delta(1, "text_delta", text="check."),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {}}),
        delta(2, "input_json_delta", partial_json=""),
        delta(2, "input_json_delta", partial_json='{"city": "Pa'),
        delta(2, "input_json_delta", partial_json='ris"}'),
        block_stop(2),
        message_delta("tool_use", 42),
        MESSAGE_STOP,
    ]
    chunks, acc = feed_all(events)
    assert all(c.partial is True for c in chunks)
    assert [
        (p.text, p.thought) for c in chunks for p in (c.content.parts if c.content else ())
    ] == [
        ("Hmm, ", True),
        ("weather.", True),
        ("Let me ", None),
        ("check.", None),
    ]
    assert acc.done
    final = acc.final()
    assert final.partial is False
    assert final.content == Content(
        role="model",
        parts=[
            Part(text="Hmm, weather.", thought=True, thought_signature=b"sig=="),
            Part(text="Let me check."),
            Part.from_function_call("weather", {"city": "Paris"}, id="toolu_9"),
        ],
    )
    assert final.finish_reason == "STOP"
    assert final.usage_metadata == UsageMetadata(
        prompt_token_count=12, candidates_token_count=42, total_token_count=54
    )
    assert final.model_version == "claude-test"


def test_event_type_is_read_from_the_data_when_the_event_has_no_name() -> None:
    chunks, acc = feed_all(text_stream("a", "b"), named=False)
    assert [c.content.text for c in chunks if c.content] == ["a", "b"]
    assert acc.final().content == model_says(Part(text="ab"))


def test_unknown_events_and_deltas_are_ignored_and_events_after_stop_too() -> None:
    events = text_stream("x")
    events.insert(2, {"type": "future_event", "stuff": 1})
    events.insert(3, delta(0, "citations_delta", citation="{}"))
    chunks, acc = feed_all([*events, {"type": "error", "error": {"type": "api_error"}}])
    assert len(chunks) == 1
    assert acc.final().content == model_says(Part(text="x"))


def test_text_given_at_block_start_is_a_chunk_and_part_of_the_aggregate() -> None:
    events = text_stream("b")
    events[1] = block_start(0, {"type": "text", "text": "a"})
    chunks, acc = feed_all(events)
    assert [c.content.text for c in chunks if c.content] == ["a", "b"]
    assert acc.final().content == model_says(Part(text="ab"))


def test_a_block_never_stopped_is_still_finished_at_message_stop() -> None:
    events = [
        message_start(),
        block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        delta(0, "input_json_delta", partial_json='{"n": 1}'),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    _, acc = feed_all(events)
    assert acc.final().content == model_says(Part.from_function_call("f", {"n": 1}, id="t"))


def test_a_tool_call_without_input_fragments_has_empty_args() -> None:
    events = [
        message_start(),
        block_start(0, {"type": "tool_use", "id": "t", "name": "now", "input": {}}),
        block_stop(0),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    _, acc = feed_all(events)
    assert acc.final().content == model_says(Part.from_function_call("now", {}, id="t"))


def test_answer_tool_stream_gives_json_text_without_partials() -> None:
    events = [
        message_start(),
        block_start(0, {"type": "tool_use", "id": "t", "name": ANSWER_TOOL, "input": {}}),
        delta(0, "input_json_delta", partial_json='{"capital":'),
        delta(0, "input_json_delta", partial_json=' "Paris"}'),
        block_stop(0),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    acc = StreamAccumulator(answer=answer_tool(OBJECT_SCHEMA))
    chunks, _ = feed_all(events, acc)
    assert chunks == []
    final = acc.final()
    assert final.content is not None
    assert json.loads(final.content.text or "") == {"capital": "Paris"}


def test_refusal_in_a_stream_ends_with_an_error_response() -> None:
    _, acc = feed_all(text_stream("I won't", stop_reason="refusal"))
    final = acc.final()
    assert final.error_code == "SAFETY"
    assert final.content == model_says(Part(text="I won't"))


def test_error_event_raises_a_typed_error() -> None:
    acc = StreamAccumulator(model="claude-test")
    acc.feed(sse(message_start()))
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ModelHTTPError) as info:
        acc.feed(sse(error))
    assert info.value.status == 529
    assert "overloaded_error" in str(info.value)


@pytest.mark.parametrize(
    "events",
    [
        [ServerSentEvent("not json", "message_start")],
        [ServerSentEvent("[1, 2]", "message_start")],
        [sse({"type": "message_start", "message": "hi"})],
        [sse(delta(0, "text_delta", text="orphan"))],
        [sse(block_start(0, {"type": "text"})), sse(delta(0, "text_delta", text=3))],  # type: ignore[arg-type]
        [sse(block_start(0, {"text": ""}))],
        [sse({"type": "content_block_start", "content_block": {"type": "text"}})],
        [sse({"type": "content_block_stop", "index": "0"})],
        [sse({"type": "message_delta", "delta": {}, "usage": 5})],
        [
            sse(block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}})),
            sse(delta(0, "input_json_delta", partial_json='{"a": ')),
            sse(block_stop(0)),
        ],
        [
            sse(block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}})),
            sse(delta(0, "input_json_delta", partial_json="[1]")),
            sse(block_stop(0)),
        ],
    ],
)
def test_malformed_stream_events_are_response_errors(events: list[ServerSentEvent]) -> None:
    acc = StreamAccumulator(model="claude-test")
    with pytest.raises(ModelResponseError):
        for event in events:
            acc.feed(event)


def test_final_before_message_stop_is_a_response_error() -> None:
    _, acc = feed_all(text_stream("x")[:-1])
    assert not acc.done
    with pytest.raises(ModelResponseError, match="message_stop"):
        acc.final()


# -- properties ------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_-]{0,20}", fullmatch=True)
visible_text = st.text(min_size=1, max_size=30).filter(lambda t: bool(t.strip()))
call_parts = st.builds(
    Part.from_function_call,
    names,
    json_objects,
    id=st.from_regex(r"toolu_[A-Za-z0-9]{1,12}", fullmatch=True),
)
thought_parts = st.builds(
    lambda text, sig: Part(text=text, thought=True, thought_signature=sig.encode()),
    st.text(max_size=20),
    st.from_regex(r"[A-Za-z0-9+/=]{1,20}", fullmatch=True),
)
model_parts = st.one_of(visible_text.map(Part.from_text), call_parts, thought_parts)


@given(st.lists(model_parts, min_size=1, max_size=6))
def test_model_content_round_trips_through_a_request_and_an_answer(parts: list[Part]) -> None:
    content = Content(role="model", parts=parts)
    [message] = build_messages([content])
    assert message["role"] == "assistant"
    answer = json.loads(json.dumps({"content": message["content"], "stop_reason": "end_turn"}))
    assert parse_response(answer).content == content


contents_strategy = st.lists(
    st.builds(
        Content,
        role=st.sampled_from(["user", "model", None]),
        parts=st.lists(
            st.one_of(
                st.text(max_size=5).map(Part.from_text),
                call_parts,
                st.builds(Part.from_function_response, names, json_objects, id=names),
            ),
            max_size=3,
        ),
    ),
    max_size=8,
)


@given(contents_strategy)
def test_messages_alternate_and_are_never_empty(contents: list[Content]) -> None:
    messages = build_messages(contents)
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles))
    for message in messages:
        assert message["content"]
        types = [b["type"] for b in message["content"]]
        if message["role"] == "user":
            assert types == sorted(types, key=lambda t: t != "tool_result")
    kept = sum(1 for c in contents for p in c.parts if p.text is None or p.text.strip())
    assert sum(len(m["content"]) for m in messages) == kept


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(
    text=st.text(max_size=40),
    args=json_objects,
    text_cuts=st.lists(st.integers(0, 40), max_size=6),
    json_cuts=st.lists(st.integers(0, 200), max_size=8),
)
def test_any_chunking_of_text_and_tool_input_reassembles_to_the_whole(
    text: str, args: dict[str, Any], text_cuts: list[int], json_cuts: list[int]
) -> None:
    encoded = json.dumps(args)
    events = [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        *[delta(0, "text_delta", text=piece) for piece in chunked(text, text_cuts)],
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        delta(1, "input_json_delta", partial_json=""),
        *[delta(1, "input_json_delta", partial_json=p) for p in chunked(encoded, json_cuts)],
        block_stop(1),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    chunks, acc = feed_all(events)
    assert "".join(c.content.text or "" for c in chunks if c.content) == text
    final = acc.final()
    assert final.content is not None
    assert final.content.text == text
    [call] = [p.function_call for p in final.content.parts if p.function_call]
    assert call.args == args
    assert call.id == "t1"
