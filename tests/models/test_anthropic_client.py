"""AnthropicModel over ``httpx.MockTransport``: exact requests, answers, streams, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from tests.models.anthropic_payloads import (
    MESSAGE_STOP,
    answer,
    block_start,
    block_stop,
    delta,
    message_delta,
    message_start,
    sse_text,
    text_stream,
)
from trio_agents import (
    ConfigurationError,
    Content,
    ModelHTTPError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTransportError,
    Part,
)
from trio_agents.models import (
    AnthropicModel,
    FunctionDeclaration,
    LlmRequest,
    LlmResponse,
    RetryPolicy,
)

KEY = "sk-ant-test-0123456789"
FAST_RETRY = RetryPolicy(attempts=3, initial_delay=0.5, jitter=0, total_timeout=60)

LEFT_EARLY = pytest.mark.filterwarnings(
    # An error event ends the stream while httpx's own line iterators are suspended; the response
    # is closed, but trio reports those iterators when they are collected (httpx#3686).
    r"ignore:Async generator 'httpx\..*' was garbage collected:ResourceWarning"
)


def sse_response(events: list[dict[str, Any]]) -> httpx.Response:
    return httpx.Response(200, text=sse_text(events), headers={"content-type": "text/event-stream"})


class Recorder:
    """A MockTransport handler answering from a script; keeps every request."""

    def __init__(self, *replies: httpx.Response | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def body(self, index: int = -1) -> dict[str, Any]:
        return dict(json.loads(self.requests[index].content))


def make_model(recorder: Recorder, **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault("retry", FAST_RETRY)
    return AnthropicModel(
        "claude-test", api_key=KEY, transport=httpx.MockTransport(recorder), seed=1, **kwargs
    )


def hello() -> LlmRequest:
    return LlmRequest(model="claude-test", contents=[Content.from_text("Hi")])


async def collect(model: AnthropicModel, request: LlmRequest) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [c async for c in chunks]


# -- construction ----------------------------------------------------------------------------------


def test_missing_key_is_a_configuration_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-test")
    with pytest.raises(ConfigurationError, match="model name"):
        AnthropicModel("", api_key=KEY)


async def test_from_name_strips_the_prefix_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.example/anthropic")
    async with AnthropicModel.from_name("anthropic/claude-sonnet-4-5") as model:
        assert model.model == "claude-sonnet-4-5"
        assert str(model.client.base_url) == "https://proxy.example/anthropic/"
        assert model.client.headers["x-api-key"] == KEY
        assert KEY not in repr(model)
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    async with AnthropicModel.from_name("claude-haiku-4-5") as model:
        assert model.model == "claude-haiku-4-5"
        assert str(model.client.base_url) == "https://api.anthropic.com"


# -- exact requests --------------------------------------------------------------------------------


async def test_generate_posts_the_exact_request_and_parses_the_answer() -> None:
    recorder = Recorder(httpx.Response(200, json=answer()))
    request = LlmRequest(
        model="claude-test",
        system_instruction="Be kind.",
        contents=[Content.from_text("Hi")],
        tools=[FunctionDeclaration(name="f", description="F.", parameters={"type": "object"})],
        generation_config={"temperature": 0.2, "max_output_tokens": 64},
    )
    async with make_model(recorder, headers={"anthropic-beta": "feature-x"}) as model:
        response = await model.generate(request)
    [sent] = recorder.requests
    assert sent.method == "POST"
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == "feature-x"
    assert sent.headers["content-type"] == "application/json"
    assert KEY not in str(sent.url)
    assert recorder.body() == {
        "model": "claude-test",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "system": "Be kind.",
        "temperature": 0.2,
        "tools": [{"name": "f", "description": "F.", "input_schema": {"type": "object"}}],
    }
    assert response.content == Content(role="model", parts=[Part(text="Hello!")])
    assert response.finish_reason == "STOP"
    assert response.usage_metadata is not None
    assert response.usage_metadata.total_token_count == 7


async def test_base_url_with_a_path_and_the_model_default_max_tokens() -> None:
    recorder = Recorder(httpx.Response(200, json=answer()))
    async with make_model(recorder, base_url="http://gateway.local/anthropic", max_tokens=9) as m:
        await m.generate(LlmRequest(contents=[Content.from_text("Hi")]))
    assert str(recorder.requests[0].url) == "http://gateway.local/anthropic/v1/messages"
    assert recorder.body()["max_tokens"] == 9
    assert recorder.body()["model"] == "claude-test"  # the request named no model


async def test_configuration_errors_are_raised_before_any_request() -> None:
    recorder = Recorder()
    request = LlmRequest(contents=[Content(role="model", parts=[Part.from_function_call("f")])])
    async with make_model(recorder) as model:
        with pytest.raises(ConfigurationError, match="no id"):
            await model.generate(request)
        with pytest.raises(ConfigurationError, match="no id"):
            await collect(model, request)
    assert recorder.requests == []


async def test_stream_posts_stream_true_and_yields_partials_then_the_aggregate() -> None:
    events = [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, "text_delta", text="Let me "),
        delta(0, "text_delta", text="check."),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        delta(1, "input_json_delta", partial_json=""),
        delta(1, "input_json_delta", partial_json='{"x": [1, '),
        delta(1, "input_json_delta", partial_json="2]}"),
        block_stop(1),
        message_delta("tool_use", 9),
        MESSAGE_STOP,
    ]
    recorder = Recorder(sse_response(events))
    async with make_model(recorder) as model:
        chunks = await collect(model, hello())
    assert recorder.body()["stream"] is True
    assert recorder.requests[0].headers["x-api-key"] == KEY
    assert [c.partial for c in chunks] == [True, True, False]
    assert [c.content.text for c in chunks[:2] if c.content] == ["Let me ", "check."]
    assert chunks[-1].content == Content(
        role="model",
        parts=[
            Part(text="Let me check."),
            Part.from_function_call("f", {"x": [1, 2]}, id="toolu_1"),
        ],
    )
    assert chunks[-1].finish_reason == "STOP"


async def test_response_schema_round_trip_through_the_client() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool_answer = answer(
        content=[{"type": "tool_use", "id": "t", "name": "json_answer", "input": {"city": "Oslo"}}],
        stop_reason="tool_use",
    )
    recorder = Recorder(httpx.Response(200, json=tool_answer))
    async with make_model(recorder) as model:
        response = await model.generate(
            LlmRequest(contents=[Content.from_text("City?")], response_schema=schema)
        )
    assert recorder.body()["tool_choice"] == {"type": "tool", "name": "json_answer"}
    assert response.content is not None
    assert json.loads(response.content.text or "") == {"city": "Oslo"}


# -- errors and retries ----------------------------------------------------------------------------

ERROR_BODY = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}


async def test_400_is_an_http_error_with_status_and_body_and_is_not_retried() -> None:
    recorder = Recorder(httpx.Response(400, json=ERROR_BODY))
    async with make_model(recorder) as model:
        with pytest.raises(ModelHTTPError) as info:
            await model.generate(hello())
    assert info.value.status == 400
    assert "invalid_request_error" in info.value.body
    assert "anthropic" in str(info.value)
    assert "claude-test" in str(info.value)
    assert len(recorder.requests) == 1


async def test_401_is_not_retried() -> None:
    recorder = Recorder(httpx.Response(401, json=ERROR_BODY), httpx.Response(200, json=answer()))
    async with make_model(recorder) as model:
        with pytest.raises(ModelHTTPError) as info:
            await model.generate(hello())
    assert info.value.status == 401
    assert len(recorder.requests) == 1


async def test_429_with_retry_after_is_retried_after_the_hinted_wait(autojump_clock: Any) -> None:
    recorder = Recorder(
        httpx.Response(429, json=ERROR_BODY, headers={"retry-after": "7"}),
        httpx.Response(200, json=answer("after wait")),
    )
    async with make_model(recorder) as model:
        start = trio.current_time()
        response = await model.generate(hello())
        waited = trio.current_time() - start
    assert response.content is not None
    assert response.content.text == "after wait"
    assert 7 <= waited < 8
    assert len(recorder.requests) == 2


async def test_429_until_the_attempts_run_out_is_a_rate_limit_error(autojump_clock: Any) -> None:
    limited = [httpx.Response(429, json=ERROR_BODY, headers={"retry-after": "1"})] * 3
    recorder = Recorder(*limited)
    async with make_model(recorder) as model:
        with pytest.raises(ModelRateLimitError) as info:
            await model.generate(hello())
    assert info.value.retry_after == 1
    assert len(recorder.requests) == 3


@pytest.mark.parametrize("status", [500, 529])
async def test_server_errors_are_retried_then_succeed(autojump_clock: Any, status: int) -> None:
    recorder = Recorder(httpx.Response(status, text="oops"), httpx.Response(200, json=answer()))
    async with make_model(recorder) as model:
        response = await model.generate(hello())
    assert response.finish_reason == "STOP"
    assert len(recorder.requests) == 2


async def test_stream_retries_before_the_stream_starts(autojump_clock: Any) -> None:
    recorder = Recorder(httpx.Response(503, text="busy"), sse_response(text_stream("ok")))
    async with make_model(recorder) as model:
        chunks = await collect(model, hello())
    assert chunks[-1].content is not None
    assert chunks[-1].content.text == "ok"
    assert len(recorder.requests) == 2


async def test_malformed_json_is_a_response_error() -> None:
    recorder = Recorder(httpx.Response(200, text="{not json"))
    async with make_model(recorder) as model:
        with pytest.raises(ModelResponseError):
            await model.generate(hello())


async def test_a_well_formed_json_that_is_no_message_is_a_response_error() -> None:
    recorder = Recorder(httpx.Response(200, json={"id": "x"}))
    async with make_model(recorder) as model:
        with pytest.raises(ModelResponseError, match="content"):
            await model.generate(hello())


@LEFT_EARLY
async def test_error_event_mid_stream_is_a_typed_error_and_not_retried() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    events = [message_start(), block_start(0, {"type": "text", "text": ""}), overloaded]
    recorder = Recorder(sse_response(events), sse_response(text_stream("never")))
    async with make_model(recorder) as model:
        with pytest.raises(ModelHTTPError) as info:
            await collect(model, hello())
    assert info.value.status == 529
    assert "overloaded_error" in str(info.value)
    assert len(recorder.requests) == 1


async def test_a_stream_cut_before_message_stop_is_a_transport_error() -> None:
    recorder = Recorder(sse_response(text_stream("half")[:-2]))
    async with make_model(recorder) as model:
        with pytest.raises(ModelTransportError, match="message_stop"):
            await collect(model, hello())


class CutAfter(httpx.AsyncByteStream):
    """A response body that sends ``data`` and then loses the connection."""

    def __init__(self, data: str) -> None:
        self.data = data.encode()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data
        raise httpx.ReadError("connection reset by peer")


@pytest.mark.parametrize(
    ("events", "complete"), [(text_stream("done"), True), (text_stream("x")[:3], False)]
)
async def test_a_connection_lost_after_message_stop_loses_nothing(
    events: list[dict[str, Any]], complete: bool
) -> None:
    cut = httpx.Response(200, stream=CutAfter(sse_text(events)))
    recorder = Recorder(cut)
    async with make_model(recorder) as model:
        if complete:
            chunks = await collect(model, hello())
            assert chunks[-1].content is not None
            assert chunks[-1].content.text == "done"
        else:
            with pytest.raises(ModelTransportError, match="ReadError"):
                await collect(model, hello())


async def test_transport_errors_are_retried_then_typed(autojump_clock: Any) -> None:
    failures = [httpx.ConnectError("connection refused")] * 3
    recorder = Recorder(*failures)
    async with make_model(recorder) as model:
        with pytest.raises(ModelTransportError, match="ConnectError"):
            await model.generate(hello())
    assert len(recorder.requests) == 3


# -- the key never shows ---------------------------------------------------------------------------

LEAKY_BODY = {"type": "error", "error": {"type": "authentication_error", "message": f"bad {KEY}"}}
LEAKY_EVENT = {"type": "error", "error": {"type": "api_error", "message": f"key was {KEY}"}}


@pytest.mark.parametrize(
    ("reply", "streamed"),
    [
        (httpx.Response(401, json=LEAKY_BODY), False),
        (httpx.Response(400, text=f"x-api-key: {KEY}"), True),
        (httpx.Response(200, text=f"not json {KEY}"), False),
        (httpx.Response(200, json=LEAKY_BODY), False),
        (httpx.ConnectError(f"failed with {KEY}"), False),
        (sse_response([message_start(), LEAKY_EVENT]), True),
    ],
)
@LEFT_EARLY
async def test_the_api_key_is_absent_from_every_error_text(
    reply: httpx.Response | Exception, streamed: bool
) -> None:
    recorder = Recorder(reply)
    async with make_model(recorder, retry=RetryPolicy(attempts=1)) as model:
        with pytest.raises(Exception) as info:
            if streamed:
                await collect(model, hello())
            else:
                await model.generate(hello())
    error = info.value
    texts = [str(error), repr(error), *(str(a) for a in error.args)]
    texts += [str(getattr(error, "body", ""))]
    assert all(KEY not in text for text in texts), texts
