"""OpenAIModel over httpx.MockTransport: configuration, exact requests, answers, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trio

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
    FunctionDeclaration,
    LlmRequest,
    LlmResponse,
    OpenAIModel,
    RetryPolicy,
)
from trio_agents.models._openai_wire import build_request_body

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]

KEY = "sk-proj-TESTKEY-abcdefghijklmnop"
FAST = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05, total_timeout=5)
REQUEST = LlmRequest(
    system_instruction="Be brief.",
    contents=[Content.from_text("Weather in Paris?")],
    tools=[FunctionDeclaration(name="get_weather", parameters={"type": "object"})],
    generation_config={"temperature": 0, "max_output_tokens": 50},
)


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class Recorder:
    """A MockTransport handler answering from a list (the last repeats), recording requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def body(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)


def make(handler: Callable[[httpx.Request], Any], **kwargs: Any) -> OpenAIModel:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("retry", FAST)
    return OpenAIModel("gpt-4o", transport=httpx.MockTransport(handler), seed=0, **kwargs)


def answer(content: str | None = "Sunny.", **message: Any) -> httpx.Response:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
    return httpx.Response(200, json=body)


def sse_body(*chunks: Any) -> bytes:
    frames = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join(frames).encode()


def delta(content: str | None = None, finish: str | None = None, **more: Any) -> dict[str, Any]:
    d = {"content": content, **more} if content is not None else dict(more)
    return {
        "object": "chat.completion.chunk",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


USAGE_CHUNK = {
    "choices": [],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
}


def streamed(*chunks: Any) -> httpx.Response:
    return httpx.Response(
        200, content=sse_body(*chunks), headers={"content-type": "text/event-stream"}
    )


def assert_no_key(exc: BaseException) -> None:
    for text in (str(exc), repr(exc), str(getattr(exc, "body", ""))):
        assert KEY not in text


# -- configuration ---------------------------------------------------------------------------------


def test_key_and_base_url_from_parameters() -> None:
    model = OpenAIModel("gpt-4o", api_key=KEY, base_url="https://proxy.test/openai/v1")
    assert model.client.headers["authorization"] == f"Bearer {KEY}"
    assert str(model.client.base_url) == "https://proxy.test/openai/v1/"
    assert model.max_tokens_param == "max_tokens"
    assert KEY not in repr(model)


def test_key_and_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = OpenAIModel("gpt-4o")
    assert model.client.headers["authorization"] == f"Bearer {KEY}"
    assert str(model.client.base_url) == "https://api.openai.com/v1/"
    assert model.max_tokens_param == "max_completion_tokens"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    assert str(OpenAIModel("gpt-4o").client.base_url) == "http://localhost:8000/v1/"


def test_a_missing_key_for_openai_is_a_configuration_error_naming_the_variables() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY") as caught:
        OpenAIModel("gpt-4o")
    assert "OPENAI_BASE_URL" in str(caught.value)


def test_a_compatible_server_may_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    model = OpenAIModel("llama3", base_url="http://localhost:11434/v1")
    assert "authorization" not in model.client.headers
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    assert "authorization" not in OpenAIModel("llama3").client.headers


def test_extra_headers_win_over_the_authorization_header() -> None:
    model = OpenAIModel(
        "gpt-4o",
        api_key=KEY,
        headers={"Authorization": "Token other", "OpenAI-Organization": "org-1"},
    )
    assert model.client.headers["authorization"] == "Token other"
    assert model.client.headers["openai-organization"] == "org-1"


def test_from_name_without_a_key_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIModel.from_name("openai/gpt-4o")


def test_from_name_strips_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert OpenAIModel.from_name("openai/gpt-4o").model == "gpt-4o"
    assert OpenAIModel.from_name("openai/ft:gpt-4o:org:x").model == "ft:gpt-4o:org:x"
    with pytest.raises(ConfigurationError, match="openai/<model>"):
        OpenAIModel.from_name("openai/")


def test_invalid_configuration() -> None:
    with pytest.raises(ConfigurationError, match="model name"):
        OpenAIModel("", api_key=KEY)
    with pytest.raises(ConfigurationError, match="base URL"):
        OpenAIModel("m", base_url="http://[::1")


# -- non-streaming ---------------------------------------------------------------------------------


async def test_generate_posts_the_exact_request() -> None:
    recorder = Recorder(answer())
    async with make(recorder) as model:
        await model.generate(REQUEST)
    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert recorder.body() == build_request_body(REQUEST, "gpt-4o")
    assert recorder.body() == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
        "temperature": 0,
        "max_completion_tokens": 50,
    }


@pytest.mark.parametrize("base", ["http://localhost:11434/v1", "http://localhost:11434/v1/"])
async def test_a_compatible_server_gets_max_tokens_and_its_own_path(base: str) -> None:
    recorder = Recorder(answer())
    async with make(recorder, base_url=base, api_key=None) as model:
        await model.generate(REQUEST)
    assert str(recorder.requests[0].url) == "http://localhost:11434/v1/chat/completions"
    assert "authorization" not in recorder.requests[0].headers
    assert recorder.body()["max_tokens"] == 50


async def test_generate_returns_the_parsed_answer() -> None:
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    async with make(Recorder(answer(None, tool_calls=[call]))) as model:
        response = await model.generate(REQUEST)
    assert response.content == Content(
        role="model", parts=[Part.from_function_call("get_weather", {"city": "Paris"}, id="call_9")]
    )
    assert response.finish_reason == "STOP"
    assert response.usage_metadata is not None
    assert response.usage_metadata.total_token_count == 11


async def test_bad_request_is_an_http_error_with_status_and_body_excerpt() -> None:
    error = {
        "error": {"message": "Invalid 'messages': " + "x" * 900, "type": "invalid_request_error"}
    }
    recorder = Recorder(httpx.Response(400, json=error))
    async with make(recorder) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(REQUEST)
    assert caught.value.status == 400
    assert caught.value.body.startswith('{"error":{"message":"Invalid')
    assert len(caught.value.body) == 500
    assert "openai model 'gpt-4o'" in str(caught.value)
    assert len(recorder.requests) == 1


async def test_rate_limit_with_retry_after_is_retried(autojump_clock: Any) -> None:
    recorder = Recorder(
        httpx.Response(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}}),
        answer(),
    )
    async with make(recorder) as model:
        response = await model.generate(REQUEST)
    assert response.content == Content(role="model", parts=[Part(text="Sunny.")])
    assert len(recorder.requests) == 2


async def test_server_error_is_retried(autojump_clock: Any) -> None:
    recorder = Recorder(httpx.Response(500, text="oops"), answer())
    async with make(recorder) as model:
        await model.generate(REQUEST)
    assert len(recorder.requests) == 2


async def test_rate_limit_exhausted(autojump_clock: Any) -> None:
    recorder = Recorder(httpx.Response(429, json={"error": {"message": "quota"}}))
    async with make(recorder) as model:
        with pytest.raises(ModelRateLimitError):
            await model.generate(REQUEST)
    assert len(recorder.requests) == FAST.attempts


async def test_unauthorized_is_not_retried_and_the_key_is_scrubbed() -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}."}}
    recorder = Recorder(httpx.Response(401, json=echo), answer())
    async with make(recorder) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(REQUEST)
    assert caught.value.status == 401
    assert len(recorder.requests) == 1
    assert_no_key(caught.value)
    assert "Incorrect API key provided: ***" in caught.value.body


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text=f"<html>proxy error {KEY}</html>"),
        httpx.Response(200, json={"choices": []}),
        httpx.Response(200, json={"error": {"message": f"bad key {KEY}"}}),
        httpx.Response(
            200,
            json={
                "choices": [
                    {"message": {"tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}}
                ]
            },
        ),
    ],
)
async def test_malformed_answers_are_response_errors_without_the_key(
    response: httpx.Response,
) -> None:
    async with make(Recorder(response)) as model:
        with pytest.raises(ModelResponseError) as caught:
            await model.generate(REQUEST)
    assert caught.value.provider == "openai"
    assert caught.value.model == "gpt-4o"
    assert_no_key(caught.value)


async def test_transport_failure_exhausted(autojump_clock: Any) -> None:
    recorder = Recorder(httpx.ConnectError("connection refused"))
    async with make(recorder) as model:
        with pytest.raises(ModelTransportError, match="ConnectError"):
            await model.generate(REQUEST)
    assert len(recorder.requests) == FAST.attempts


# -- streaming -------------------------------------------------------------------------------------


async def collect(model: OpenAIModel, request: LlmRequest = REQUEST) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [chunk async for chunk in chunks]


async def test_stream_posts_stream_true_with_usage() -> None:
    recorder = Recorder(streamed(delta("Hi", "stop"), "[DONE]"))
    async with make(recorder) as model:
        await collect(model)
    body = recorder.body()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in body.items() if k not in ("stream", "stream_options")} == (
        build_request_body(REQUEST, "gpt-4o")
    )


async def test_stream_yields_deltas_then_the_aggregate() -> None:
    recorder = Recorder(
        streamed(
            delta("", role="assistant"),
            delta("It is "),
            delta("sunny."),
            delta(finish="stop"),
            USAGE_CHUNK,
            "[DONE]",
        )
    )
    async with make(recorder) as model:
        chunks = await collect(model)
    assert [(c.partial, c.content.text if c.content else None) for c in chunks] == [
        (True, "It is "),
        (True, "sunny."),
        (False, "It is sunny."),
    ]
    final = chunks[-1]
    assert final.finish_reason == "STOP"
    assert final.usage_metadata is not None
    assert final.usage_metadata.prompt_token_count == 9
    assert final.model_version == "gpt-4o-2024-08-06"


async def test_stream_reassembles_tool_calls() -> None:
    first = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    recorder = Recorder(
        streamed(
            delta(tool_calls=[first]),
            delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city":'}}]),
            delta(tool_calls=[{"index": 0, "function": {"arguments": ' "Paris"}'}}]),
            delta(finish="tool_calls"),
            "[DONE]",
        )
    )
    async with make(recorder) as model:
        (final,) = await collect(model)
    assert final.content == Content(
        role="model", parts=[Part.from_function_call("get_weather", {"city": "Paris"}, id="call_1")]
    )


async def test_stream_without_done_but_finished_is_accepted() -> None:
    async with make(Recorder(streamed(delta("ok", "stop")))) as model:
        chunks = await collect(model)
    assert chunks[-1].content is not None
    assert chunks[-1].content.text == "ok"


async def test_stream_ending_early_is_a_transport_error() -> None:
    async with make(Recorder(streamed(delta("Hel")))) as model:
        with pytest.raises(ModelTransportError, match=r"\[DONE\]"):
            await collect(model)


async def test_stream_error_status_raises_from_the_block() -> None:
    recorder = Recorder(httpx.Response(400, json={"error": {"message": f"bad {KEY}"}}))
    async with make(recorder) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await collect(model)
    assert caught.value.status == 400
    assert_no_key(caught.value)


async def test_stream_is_retried_before_the_first_byte(autojump_clock: Any) -> None:
    recorder = Recorder(httpx.Response(503), streamed(delta("ok", "stop"), "[DONE]"))
    async with make(recorder) as model:
        chunks = await collect(model)
    assert chunks[-1].content is not None
    assert len(recorder.requests) == 2


@pytest.mark.parametrize(
    "frames",
    [
        ("not json",),
        ({"error": {"message": f"overloaded {KEY}"}},),
        (delta("a"), {"choices": "x"}),
    ],
)
async def test_stream_malformed_chunks_are_response_errors(frames: tuple[Any, ...]) -> None:
    async with make(Recorder(streamed(*frames, "[DONE]"))) as model:
        with pytest.raises(ModelResponseError) as caught:
            await collect(model)
    assert_no_key(caught.value)


async def test_leaving_the_stream_early_closes_the_response() -> None:
    closed: list[bool] = []

    class Body(httpx.AsyncByteStream):
        def __init__(self) -> None:
            self.data = sse_body(delta("a"), delta("b"), delta("c", "stop"), "[DONE]")

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for line in self.data.splitlines(keepends=True):
                yield line

        async def aclose(self) -> None:
            closed.append(True)

    async with make(lambda request: httpx.Response(200, stream=Body())) as model:
        async with model.stream(REQUEST) as chunks:
            first = await chunks.receive()
        assert first.content is not None
        assert first.content.text == "a"
        assert closed == [True]
        assert not model.client.is_closed


async def test_a_server_keeping_the_body_open_after_done_is_given_up_on(
    autojump_clock: Any,
) -> None:
    class Lingering(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield sse_body(delta("ok", "stop"), "[DONE]")
            await trio.sleep_forever()

    async with make(lambda request: httpx.Response(200, stream=Lingering())) as model:
        start = trio.current_time()
        chunks = await collect(model)
    assert chunks[-1].content is not None
    assert chunks[-1].content.text == "ok"
    assert trio.current_time() - start == pytest.approx(1.0)  # the drain's bound
