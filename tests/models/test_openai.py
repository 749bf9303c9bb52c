"""OpenAI Chat Completions translation: request bodies, answers and stream reassembly (pure).

The client over HTTP is tested in ``test_openai_client.py`` (MockTransport) and
``test_provider_contract.py`` (a fake server on loopback sockets).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, strategies as st

from trio_agents import (
    Blob,
    ConfigurationError,
    Content,
    FileData,
    FunctionCall,
    ModelResponseError,
    Part,
    UsageMetadata,
)
from trio_agents.models import FunctionDeclaration, LlmRequest, LlmResponse, ServerSentEvent
from trio_agents.models._openai_wire import (
    StreamAccumulator,
    build_messages,
    build_request_body,
    parse_arguments,
    parse_response,
)


def user(*parts: Part | str) -> Content:
    return Content(role="user", parts=[Part(text=p) if isinstance(p, str) else p for p in parts])


def model_says(*parts: Part | str) -> Content:
    return Content(role="model", parts=[Part(text=p) if isinstance(p, str) else p for p in parts])


def completion(message: Mapping[str, Any], finish: str | None = "stop", **extra: Any) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": dict(message), "finish_reason": finish}],
        **extra,
    }


def tool_call(name: str, args: str, id: str = "call_1") -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


# -- request bodies --------------------------------------------------------------------------------


def test_minimal_body() -> None:
    request = LlmRequest(system_instruction="Be brief.", contents=[user("Hi")])
    assert build_request_body(request, "gpt-4o") == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
    }


def test_the_model_argument_names_the_model_not_request_model() -> None:
    request = LlmRequest(model="openai/other", contents=[user("Hi")])
    assert build_request_body(request, "gpt-4o")["model"] == "gpt-4o"


def test_no_system_message_without_instruction() -> None:
    assert build_messages(LlmRequest(contents=[user("Hi")])) == [{"role": "user", "content": "Hi"}]


def test_conversation_roles_map_to_user_and_assistant() -> None:
    request = LlmRequest(contents=[user("Hi"), model_says("Hello!"), user("Bye")])
    assert build_messages(request) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ]


def test_several_user_parts_become_typed_content_parts() -> None:
    png = b"\x89PNG..."
    request = LlmRequest(
        contents=[user("For context:", "[a] said: x", Part.from_bytes(png, "image/png"))]
    )
    (message,) = build_messages(request)
    encoded = base64.b64encode(png).decode()
    assert message == {
        "role": "user",
        "content": [
            {"type": "text", "text": "For context:"},
            {"type": "text", "text": "[a] said: x"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
        ],
    }


@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        (
            Blob(mime_type="audio/wav", data=b"RIFF"),
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ),
        (
            Blob(mime_type="audio/mpeg", data=b"ID3"),
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
        ),
        (
            Blob(mime_type="application/pdf", data=b"%PDF", display_name="r.pdf"),
            {
                "type": "file",
                "file": {"filename": "r.pdf", "file_data": "data:application/pdf;base64,JVBERg=="},
            },
        ),
    ],
)
def test_audio_and_pdf_inline_data(blob: Blob, expected: dict[str, Any]) -> None:
    (message,) = build_messages(LlmRequest(contents=[user(Part(inline_data=blob))]))
    assert message["content"] == [expected]


def test_image_file_data_is_sent_by_url() -> None:
    part = Part(file_data=FileData(file_uri="https://x.test/cat.jpg", mime_type="image/jpeg"))
    (message,) = build_messages(LlmRequest(contents=[user(part)]))
    assert message["content"] == [
        {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}}
    ]


@pytest.mark.parametrize(
    "part",
    [
        Part.from_bytes(b"x", "video/mp4"),
        Part(file_data=FileData(file_uri="gs://b/f.txt", mime_type="text/plain")),
    ],
)
def test_unsupported_media_is_a_configuration_error(part: Part) -> None:
    with pytest.raises(ConfigurationError, match="cannot carry"):
        build_messages(LlmRequest(contents=[user(part)]))


def test_media_in_model_content_is_a_configuration_error() -> None:
    content = model_says(Part.from_bytes(b"x", "image/png"))
    with pytest.raises(ConfigurationError, match="model messages cannot carry inline_data"):
        build_messages(LlmRequest(contents=[content]))


def test_function_calls_become_assistant_tool_calls() -> None:
    content = model_says(
        "Let me check.",
        Part.from_function_call("get_weather", {"city": "Paris", "days": [1, 2]}, id="call_a"),
        Part.from_function_call("get_time", {}, id="call_b"),
    )
    (message,) = build_messages(LlmRequest(contents=[content]))
    assert message["role"] == "assistant"
    assert message["content"] == "Let me check."
    assert [c["id"] for c in message["tool_calls"]] == ["call_a", "call_b"]
    assert message["tool_calls"][0]["type"] == "function"
    function = message["tool_calls"][0]["function"]
    assert function["name"] == "get_weather"
    assert isinstance(function["arguments"], str)
    assert json.loads(function["arguments"]) == {"city": "Paris", "days": [1, 2]}
    assert json.loads(message["tool_calls"][1]["function"]["arguments"]) == {}


def test_an_assistant_message_with_only_calls_has_empty_content() -> None:
    """Not null: llama.cpp's server rejects a null content beside tool calls (HTTP 500)."""
    content = model_says(Part.from_function_call("f", {}, id="c1"))
    (message,) = build_messages(LlmRequest(contents=[content]))
    assert message["content"] == ""


def test_function_responses_become_one_tool_message_each() -> None:
    request = LlmRequest(
        contents=[
            model_says(
                Part.from_function_call("f", {}, id="c1"), Part.from_function_call("g", {}, id="c2")
            ),
            user(
                Part.from_function_response("f", {"result": "sunny"}, id="c1"),
                Part.from_function_response("g", {"result": {"t": 21}}, id="c2"),
            ),
        ]
    )
    assert build_messages(request)[1:] == [
        {"role": "tool", "tool_call_id": "c1", "content": '{"result": "sunny"}'},
        {"role": "tool", "tool_call_id": "c2", "content": '{"result": {"t": 21}}'},
    ]


def test_tool_messages_come_before_text_of_the_same_content() -> None:
    request = LlmRequest(
        contents=[
            model_says(Part.from_function_call("f", {}, id="c1")),
            user(Part.from_function_response("f", {"ok": True}, id="c1"), "and now?"),
        ]
    )
    assert [m["role"] for m in build_messages(request)] == ["assistant", "tool", "user"]


def test_calls_and_responses_without_ids_are_paired_by_name_in_order() -> None:
    request = LlmRequest(
        contents=[
            model_says(
                Part.from_function_call("f", {"n": 1}), Part.from_function_call("f", {"n": 2})
            ),
            user(
                Part.from_function_response("f", {"r": 1}),
                Part.from_function_response("f", {"r": 2}),
            ),
        ]
    )
    assistant, first, second = build_messages(request)
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == 2
    assert [first["tool_call_id"], second["tool_call_id"]] == ids


def test_a_response_without_id_and_without_a_call_is_a_configuration_error() -> None:
    request = LlmRequest(contents=[user(Part.from_function_response("f", {"r": 1}))])
    with pytest.raises(ConfigurationError, match="answers no call"):
        build_messages(request)


def test_function_calls_in_user_content_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="model content"):
        build_messages(LlmRequest(contents=[user(Part.from_function_call("f", {}))]))


def test_thoughts_and_empty_contents_are_not_sent() -> None:
    request = LlmRequest(
        contents=[
            user("Hi"),
            model_says(Part(text="pondering", thought=True), "Hello"),
            model_says(Part(text="only thinking", thought=True)),
            Content(role="user", parts=[]),
        ]
    )
    assert build_messages(request) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]


def test_tools_are_declared_as_functions() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    request = LlmRequest(
        contents=[user("?")],
        tools=[
            FunctionDeclaration(name="get_weather", description="Weather.", parameters=params),
            FunctionDeclaration(name="ping"),
        ],
    )
    assert build_request_body(request, "m")["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather.", "parameters": params},
        },
        {"type": "function", "function": {"name": "ping"}},
    ]


def test_generation_config_is_translated() -> None:
    config = {
        "temperature": 0.2,
        "max_output_tokens": 100,
        "top_p": 0.9,
        "stop_sequences": ("END",),
        "seed": 7,
        "tool_choice": "required",
        "presence_penalty": 0.5,
        "top_k": 40,  # Gemini-only: ignored
        "safety_settings": [],
    }
    body = build_request_body(LlmRequest(contents=[user("?")], generation_config=config), "m")
    options = {k: v for k, v in body.items() if k not in ("model", "messages")}
    assert options == {
        "temperature": 0.2,
        "max_completion_tokens": 100,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "tool_choice": "required",
        "presence_penalty": 0.5,
    }


def test_max_output_tokens_may_be_sent_as_max_tokens() -> None:
    request = LlmRequest(contents=[user("?")], generation_config={"max_output_tokens": 5})
    body = build_request_body(request, "m", max_tokens_param="max_tokens")
    assert body["max_tokens"] == 5
    assert "max_completion_tokens" not in body


def test_extra_body_is_merged_last() -> None:
    config = {"temperature": 1, "extra_body": {"top_k": 3, "temperature": 0}}
    body = build_request_body(LlmRequest(contents=[user("?")], generation_config=config), "m")
    assert (body["top_k"], body["temperature"]) == (3, 0)
    with pytest.raises(ConfigurationError, match="extra_body"):
        build_request_body(LlmRequest(generation_config={"extra_body": 3}), "m")


def test_response_schema_becomes_a_json_schema_response_format() -> None:
    schema = {"title": "Answer", "type": "object", "properties": {"x": {"type": "integer"}}}
    request = LlmRequest(contents=[user("?")], response_schema=schema)
    assert build_request_body(request, "m")["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": schema},
    }
    request.generation_config["response_schema_strict"] = True
    request.response_schema = {"title": "not a valid name!", "type": "object"}
    assert build_request_body(request, "m")["response_format"]["json_schema"] == {
        "name": "response",
        "schema": {"title": "not a valid name!", "type": "object"},
        "strict": True,
    }


def test_json_mime_type_without_schema_asks_for_a_json_object() -> None:
    config = {"response_mime_type": "application/json"}
    body = build_request_body(LlmRequest(contents=[user("?")], generation_config=config), "m")
    assert body["response_format"] == {"type": "json_object"}


def test_streaming_asks_for_usage() -> None:
    body = build_request_body(LlmRequest(contents=[user("?")]), "m", stream=True)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


# -- answers ---------------------------------------------------------------------------------------


def test_text_answer_with_usage() -> None:
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "total_tokens": 17,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    body = completion({"role": "assistant", "content": "Hello!"}, usage=usage)
    assert parse_response(body) == LlmResponse(
        content=Content(role="model", parts=[Part(text="Hello!")]),
        finish_reason="STOP",
        usage_metadata=UsageMetadata(
            prompt_token_count=12,
            candidates_token_count=5,
            total_token_count=17,
            cached_content_token_count=4,
            thoughts_token_count=2,
        ),
        model_version="gpt-4o-2024-08-06",
    )


def test_tool_calls_answer() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            tool_call("get_weather", '{"city": "Paris"}', "call_a"),
            tool_call("ping", "", "call_b"),
        ],
    }
    response = parse_response(completion(message, "tool_calls"))
    assert response.content is not None
    assert [p.function_call for p in response.content.parts] == [
        FunctionCall(name="get_weather", args={"city": "Paris"}, id="call_a"),
        FunctionCall(name="ping", args={}, id="call_b"),
    ]
    assert response.finish_reason == "STOP"
    assert response.custom_metadata == {"openai_finish_reason": "tool_calls"}
    assert response.error_code is None


@pytest.mark.parametrize(
    ("raw", "finish", "error_code"),
    [
        ("stop", "STOP", None),
        ("length", "MAX_TOKENS", None),
        ("content_filter", "SAFETY", "SAFETY"),
        ("something_new", "OTHER", None),
        (None, None, None),
    ],
)
def test_finish_reasons(raw: str | None, finish: str | None, error_code: str | None) -> None:
    response = parse_response(completion({"content": "x"}, raw))
    assert (response.finish_reason, response.error_code) == (finish, error_code)
    renamed = raw not in ("stop", None)  # the raw value is kept when its name changes
    assert response.custom_metadata == ({"openai_finish_reason": raw} if renamed else None)
    if error_code:
        assert response.error_message


def test_a_refusal_is_an_error_response() -> None:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    response = parse_response(completion(message))
    assert response.error_code == "REFUSAL"
    assert response.error_message == "I can't help with that."
    assert response.content is None


def test_reasoning_of_compatible_servers_is_a_thought_part() -> None:
    message = {"content": "42", "reasoning_content": "Let me think."}
    response = parse_response(completion(message))
    assert response.content is not None
    assert response.content.parts == (Part(text="Let me think.", thought=True), Part(text="42"))
    assert response.content.text == "42"


def test_empty_answer_has_no_content() -> None:
    assert parse_response(completion({"content": None})).content is None
    assert parse_response(completion({"content": ""})).content is None


def test_text_content_given_as_parts_is_joined() -> None:
    message = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert parse_response(completion(message)).content == model_says("ab")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("  ", {}),
        (None, {}),
        ({"a": [1]}, {"a": [1]}),
    ],
)
def test_arguments(arguments: Any, expected: dict[str, Any]) -> None:
    assert parse_arguments(arguments) == expected


@pytest.mark.parametrize("arguments", ['{"a": ', "[1, 2]", "42", 42, ["x"]])
def test_malformed_arguments(arguments: Any) -> None:
    with pytest.raises(ModelResponseError, match="arguments"):
        parse_arguments(arguments)


MALFORMED: list[Any] = [
    None,
    [],
    "text",
    {},
    {"choices": None},
    {"choices": []},
    {"choices": ["x"]},
    {"choices": [{}]},
    {"choices": [{"message": "hi"}]},
    {"choices": [{"message": {"content": 3}}]},
    {"choices": [{"message": {"content": [3]}}]},
    {"choices": [{"message": {"content": "x", "refusal": 1}}]},
    {"choices": [{"message": {"tool_calls": {}}}]},
    {"choices": [{"message": {"tool_calls": ["x"]}}]},
    {"choices": [{"message": {"tool_calls": [{"type": "function"}]}}]},
    {"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]},
    {"choices": [{"message": {"tool_calls": [{"type": "custom", "custom": {}}]}}]},
    {"choices": [{"message": {"tool_calls": [tool_call("f", "{nope")]}}]},
    {"choices": [{"message": {"tool_calls": [tool_call("f", "[]")]}}]},
    {"choices": [{"message": {"content": "x"}, "finish_reason": 1}]},
    {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "3"}},
    {"choices": [{"message": {"content": "x"}}], "usage": {"total_tokens": True}},
    {"choices": [{"message": {"content": "x"}}], "usage": []},
    {"choices": [{"message": {"content": "x"}}], "model": 4},
    {"error": {"message": "overloaded", "type": "server_error"}},
]


@pytest.mark.parametrize("body", MALFORMED)
def test_malformed_answers_raise_model_response_error(body: Any) -> None:
    with pytest.raises(ModelResponseError) as caught:
        parse_response(body)
    assert caught.value.provider == "openai"


def test_the_fail_hook_builds_the_error() -> None:
    made: list[str] = []

    def fail(message: str) -> ModelResponseError:
        made.append(message)
        return ModelResponseError(message, provider="openai", model="mine")

    with pytest.raises(ModelResponseError, match="'mine'"):
        parse_response({"choices": []}, fail=fail)
    assert made == ["the answer has no choices"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "choices",
        "message",
        "content",
        "tool_calls",
        "function",
        "arguments",
        "name",
        "usage",
        "finish_reason",
        "refusal",
        "index",
        "delta",
        "id",
        "type",
        "model",
        "error",
    ]
)
shaped = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@given(body=shaped)
def test_property_any_json_answer_parses_or_raises_model_response_error(body: Any) -> None:
    try:
        response = parse_response(body)
    except ModelResponseError:
        return
    assert isinstance(response, LlmResponse)


@given(chunks=st.lists(shaped, max_size=6))
def test_property_any_json_chunks_accumulate_or_raise_model_response_error(
    chunks: list[Any],
) -> None:
    accumulator = StreamAccumulator()
    try:
        for chunk in chunks:
            for partial in accumulator.feed(chunk):
                assert partial.partial is True
        final = accumulator.final()
    except ModelResponseError:
        return
    assert final.partial is False


# -- round trips -----------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30)
_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,20}", fullmatch=True)
_args = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
_calls = st.lists(
    st.builds(
        FunctionCall,
        name=_names,
        args=_args,
        id=st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
    ),
    max_size=3,
    unique_by=lambda c: c.id,
)


@given(text=st.none() | _text, calls=_calls)
def test_property_model_content_round_trips_through_request_and_answer(
    text: str | None, calls: list[FunctionCall]
) -> None:
    parts = ([Part(text=text)] if text is not None else []) + [Part(function_call=c) for c in calls]
    if not parts:
        return
    content = Content(role="model", parts=parts)
    (message,) = build_messages(LlmRequest(contents=[content]))
    wire = json.loads(json.dumps(completion(message, "tool_calls" if calls else "stop")))
    assert parse_response(wire).content == content


# -- streaming -------------------------------------------------------------------------------------


def chunk(delta: Mapping[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict:
    choice = {"index": 0, "delta": dict(delta or {}), "finish_reason": finish}
    return {"object": "chat.completion.chunk", "model": "gpt-4o-x", "choices": [choice], **extra}


def feed_all(accumulator: StreamAccumulator, chunks: list[Any]) -> list[LlmResponse]:
    return [p for c in chunks for p in accumulator.feed(c)]


def test_text_deltas_are_partials_and_the_final_joins_them() -> None:
    accumulator = StreamAccumulator()
    partials = feed_all(
        accumulator,
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
            chunk({}, "stop"),
            {
                "choices": [],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            },
        ],
    )
    assert [p.content.text for p in partials if p.content] == ["Hel", "lo"]
    assert all(p.partial for p in partials)
    assert accumulator.feed_data("[DONE]") == []
    assert accumulator.done and accumulator.complete
    assert accumulator.final() == LlmResponse(
        content=model_says("Hello"),
        partial=False,
        finish_reason="STOP",
        usage_metadata=UsageMetadata(
            prompt_token_count=3, candidates_token_count=2, total_token_count=5
        ),
        model_version="gpt-4o-x",
    )


def test_tool_call_fragments_are_reassembled_by_index() -> None:
    accumulator = StreamAccumulator()
    first = {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    second = {
        "index": 1,
        "id": "call_b",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz"'},
    }
    partials = feed_all(
        accumulator,
        [
            chunk({"role": "assistant", "content": None, "tool_calls": [first]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
            chunk({"tool_calls": [second]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": ': "UTC"}'}}]}),
            chunk({}, "tool_calls"),
        ],
    )
    assert partials == []
    final = accumulator.final()
    assert final.content is not None
    assert [p.function_call for p in final.content.parts] == [
        FunctionCall(name="get_weather", args={"city": "Paris"}, id="call_a"),
        FunctionCall(name="get_time", args={"tz": "UTC"}, id="call_b"),
    ]
    assert final.finish_reason == "STOP"


def test_calls_sharing_index_zero_with_new_ids_are_distinct_calls() -> None:
    # Ollama numbers every call of a parallel batch 0 and tells them apart by id
    accumulator = StreamAccumulator()
    feed_all(
        accumulator,
        [
            chunk({"tool_calls": [tool_call("f", '{"n": 1}', "c1") | {"index": 0}]}),
            chunk({"tool_calls": [tool_call("g", '{"n": 2}', "c2") | {"index": 0}]}),
            chunk({}, "tool_calls"),
        ],
    )
    final = accumulator.final()
    assert final.content is not None
    assert [p.function_call for p in final.content.parts] == [
        FunctionCall(name="f", args={"n": 1}, id="c1"),
        FunctionCall(name="g", args={"n": 2}, id="c2"),
    ]


def test_whole_argument_objects_and_missing_indexes_are_accepted() -> None:
    accumulator = StreamAccumulator()
    feed_all(
        accumulator,
        [
            chunk({"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}]}),
            chunk({}, "tool_calls"),
        ],
    )
    final = accumulator.final()
    assert final.content is not None
    assert final.content.parts[0].function_call == FunctionCall(name="f", args={"a": 1}, id="c1")


def test_streamed_reasoning_is_a_thought() -> None:
    accumulator = StreamAccumulator()
    partials = feed_all(
        accumulator,
        [chunk({"reasoning_content": "hmm"}), chunk({"content": "ok"}, "stop")],
    )
    assert [p.content.parts[0].thought for p in partials if p.content] == [True, None]
    final = accumulator.final()
    assert final.content == Content(
        role="model", parts=[Part(text="hmm", thought=True), Part(text="ok")]
    )


def test_streamed_refusal_and_content_filter() -> None:
    accumulator = StreamAccumulator()
    feed_all(accumulator, [chunk({"refusal": "No"}), chunk({"refusal": "pe."}, "stop")])
    assert (accumulator.final().error_code, accumulator.final().error_message) == (
        "REFUSAL",
        "Nope.",
    )
    accumulator = StreamAccumulator()
    feed_all(accumulator, [chunk({"content": "bad"}), chunk({}, "content_filter")])
    assert accumulator.final().error_code == "SAFETY"


def test_other_choices_are_ignored() -> None:
    accumulator = StreamAccumulator()
    extra = {"index": 1, "delta": {"content": "other"}, "finish_reason": None}
    both = chunk({"content": "mine"})
    both["choices"].append(extra)
    assert [p.content.text for p in accumulator.feed(both) if p.content] == ["mine"]


def test_an_unfinished_stream_is_not_complete() -> None:
    accumulator = StreamAccumulator()
    accumulator.feed(chunk({"content": "Hel"}))
    assert not accumulator.complete
    accumulator.feed(chunk({}, "length"))
    assert accumulator.complete and not accumulator.done
    assert accumulator.final().finish_reason == "MAX_TOKENS"


@pytest.mark.parametrize(
    "event",
    [
        ServerSentEvent("not json"),
        ServerSentEvent('{"error": {"message": "server overloaded"}}'),
        ServerSentEvent("oops", event="error"),
        ServerSentEvent('{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0"}]}}]}'),
        ServerSentEvent('{"choices": [{"index": 0, "delta": {"content": 1}}]}'),
        ServerSentEvent('{"choices": {}}'),
    ],
)
def test_malformed_stream_chunks_raise_model_response_error(event: ServerSentEvent) -> None:
    with pytest.raises(ModelResponseError):
        StreamAccumulator().feed_event(event)


@pytest.mark.parametrize(
    "fragment",
    [
        {"index": 0, "id": "c1", "function": {"arguments": "{}"}},  # never named
        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{broken"}},
    ],
)
def test_malformed_streamed_calls_fail_at_the_end(fragment: dict[str, Any]) -> None:
    accumulator = StreamAccumulator()
    accumulator.feed(chunk({"tool_calls": [fragment]}, "tool_calls"))
    with pytest.raises(ModelResponseError, match="streamed tool call #0"):
        accumulator.final()


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@given(
    text=_text,
    args=_args,
    text_cuts=st.lists(st.integers(0, 40), max_size=6),
    args_cuts=st.lists(st.integers(0, 200), max_size=8),
)
def test_property_any_chunking_of_text_and_arguments_reassembles_the_whole(
    text: str, args: dict[str, Any], text_cuts: list[int], args_cuts: list[int]
) -> None:
    encoded = json.dumps(args)
    head = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _pieces(text, text_cuts)]
    chunks.append(chunk({"tool_calls": [head]}))
    chunks += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in _pieces(encoded, args_cuts)
    ]
    chunks.append(chunk({}, "tool_calls"))
    accumulator = StreamAccumulator()
    partials = feed_all(accumulator, json.loads(json.dumps(chunks)))
    assert "".join(p.content.text or "" for p in partials if p.content) == text
    final = accumulator.final()
    assert final.content == Content(
        role="model",
        parts=[Part(text=text), Part(function_call=FunctionCall(name="f", args=args, id="call_1"))],
    )
