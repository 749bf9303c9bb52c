"""GeminiModel over httpx.MockTransport: configuration, exact requests, answers, errors."""

from __future__ import annotations

import json
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
)
from trio_agents.models import (
    FunctionDeclaration,
    GeminiModel,
    LlmRequest,
    LlmResponse,
    RetryPolicy,
    resolve_model,
)
from trio_agents.models._gemini_wire import build_request_body

from .gemini_payloads import KEY, answer, call, sse, streamed, text, usage

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]

FAST = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05, total_timeout=60)
BASE = "https://gemini.test"
URL = f"{BASE}/v1beta/models/gemini-test:generateContent"
STREAM_URL = f"{BASE}/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
REQUEST = LlmRequest(
    system_instruction="Be brief.",
    contents=[Content.from_text("Weather in Paris?")],
    tools=[FunctionDeclaration(name="get_weather", parameters={"type": "object"})],
    generation_config={"temperature": 0, "max_output_tokens": 50},
)
EXPECTED_BODY = {
    "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "",
                    "parametersJsonSchema": {"type": "object"},
                }
            ]
        }
    ],
    "generationConfig": {"temperature": 0, "maxOutputTokens": 50},
}


@pytest.fixture(autouse=True)
def _no_gemini_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


class Recorder:
    """A MockTransport handler answering from a list (the last repeats), recording requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(reply, Exception):
            raise reply
        return reply


def model_for(recorder: Recorder, **kwargs: Any) -> GeminiModel:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("base_url", BASE)
    kwargs.setdefault("retry", FAST)
    return GeminiModel("gemini-test", transport=httpx.MockTransport(recorder), **kwargs)


def event_stream(body: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, text=body, headers={"content-type": "text/event-stream"})


def google_error(status: int, message: str, kind: str) -> httpx.Response:
    payload = {"error": {"code": status, "message": message, "status": kind}}
    return httpx.Response(status, json=payload)


async def collect(model: GeminiModel, request: LlmRequest = REQUEST) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [c async for c in chunks]


# -- configuration ---------------------------------------------------------------------------------


def test_a_missing_key_names_the_variables() -> None:
    with pytest.raises(ConfigurationError, match="GOOGLE_API_KEY or GEMINI_API_KEY"):
        GeminiModel("gemini-test")


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="model name"):
        GeminiModel("models/", api_key=KEY)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"GEMINI_API_KEY": "gemini-key"}, "gemini-key"),
        ({"GOOGLE_API_KEY": "google-key", "GEMINI_API_KEY": "gemini-key"}, "google-key"),
        ({"GOOGLE_API_KEY": "", "GEMINI_API_KEY": "gemini-key"}, "gemini-key"),
    ],
)
async def test_the_key_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    recorder = Recorder(httpx.Response(200, json=answer(text("hi"))))
    async with model_for(recorder, api_key=None) as model:
        await model.generate(REQUEST)
    assert recorder.requests[0].headers["x-goog-api-key"] == expected


async def test_an_explicit_key_and_base_url_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "env-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "https://env.test")
    recorder = Recorder(httpx.Response(200, json=answer(text("hi"))))
    async with model_for(recorder) as model:
        await model.generate(REQUEST)
    assert recorder.requests[0].headers["x-goog-api-key"] == KEY
    assert str(recorder.requests[0].url) == URL


async def test_base_url_from_the_environment_and_with_a_path_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "https://env.test")
    recorder = Recorder(httpx.Response(200, json=answer(text("hi"))))
    async with model_for(recorder, base_url=None) as model:
        await model.generate(REQUEST)
    async with model_for(recorder, base_url="https://proxy.test/google/") as model:
        await model.generate(REQUEST)
    assert [str(r.url) for r in recorder.requests] == [
        "https://env.test/v1beta/models/gemini-test:generateContent",
        "https://proxy.test/google/v1beta/models/gemini-test:generateContent",
    ]


@pytest.mark.parametrize("name", ["gemini-2.5-flash", "models/gemini-2.5-flash"])
async def test_registry_names_resolve_to_gemini(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    model = resolve_model(name)
    assert isinstance(model, GeminiModel)
    assert model.model == "gemini-2.5-flash"
    assert KEY not in repr(model)
    await model.aclose()


# -- exact requests and answers --------------------------------------------------------------------


async def test_generate_posts_the_body_with_the_key_in_a_header_only() -> None:
    reply = answer(text("Sunny."), usageMetadata=usage(), modelVersion="gemini-test-001")
    recorder = Recorder(httpx.Response(200, json=reply))
    async with model_for(recorder, headers={"x-extra": "1"}) as model:
        response = await model.generate(REQUEST)
    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == URL
    assert KEY not in str(request.url) and "key" not in request.url.params
    assert request.headers["x-goog-api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.headers["x-extra"] == "1"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == EXPECTED_BODY
    assert response.content is not None and response.content.text == "Sunny."
    assert (response.finish_reason, response.model_version) == ("STOP", "gemini-test-001")
    assert response.usage_metadata is not None
    assert response.usage_metadata.total_token_count == 12


async def test_the_model_prefix_is_dropped_from_the_path() -> None:
    recorder = Recorder(httpx.Response(200, json=answer(text("hi"))))
    transport = httpx.MockTransport(recorder)
    async with GeminiModel(
        "models/gemini-2.5-pro", api_key=KEY, base_url=BASE, transport=transport
    ) as model:
        await model.generate(REQUEST)
    assert recorder.requests[0].url.path == "/v1beta/models/gemini-2.5-pro:generateContent"


async def test_stream_posts_the_same_body_and_reads_crlf_events() -> None:
    chunks = streamed(["Sun", "ny."], last=call("get_weather", {"city": "Paris"}, "fc-1"))
    recorder = Recorder(event_stream(sse(*chunks)))
    async with model_for(recorder) as model:
        received = await collect(model)
    (request,) = recorder.requests
    assert str(request.url) == STREAM_URL
    assert request.headers["x-goog-api-key"] == KEY
    assert json.loads(request.content) == EXPECTED_BODY == build_request_body(REQUEST)
    assert [(r.partial, r.content.text if r.content else None) for r in received] == [
        (True, "Sun"),
        (True, "ny."),
        (None, "Sunny."),
    ]
    final = received[-1]
    assert final.turn_complete and final.finish_reason == "STOP"
    assert final.content is not None
    (function_call,) = [p.function_call for p in final.content.parts if p.function_call]
    assert (function_call.name, dict(function_call.args), function_call.id) == (
        "get_weather",
        {"city": "Paris"},
        "fc-1",
    )
    assert final.usage_metadata is not None and final.model_version == "gemini-test-001"


async def test_stream_events_separated_by_lf_and_split_anywhere() -> None:
    body = sse(*streamed(["a", "b", "c"])).replace("\r\n", "\n")

    async def pieces() -> Any:
        for i in range(0, len(body), 7):
            yield body[i : i + 7].encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"})

    transport = httpx.MockTransport(handler)
    async with GeminiModel("gemini-test", api_key=KEY, base_url=BASE, transport=transport) as m:
        received = await collect(m)
    assert [r.content.text for r in received if r.content] == ["a", "b", "c", "abc"]


async def test_a_blocked_prompt_is_an_error_response_not_an_exception() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage(3, 0)}
    recorder = Recorder(httpx.Response(200, json=blocked), event_stream(sse(blocked)))
    async with model_for(recorder) as model:
        response = await model.generate(REQUEST)
        streamed_answer = await collect(model)
    assert response.error_code == "SAFETY"
    assert [(r.error_code, r.turn_complete) for r in streamed_answer] == [("SAFETY", True)]


# -- errors ----------------------------------------------------------------------------------------


async def test_400_is_an_http_error_with_an_excerpt_and_not_retried() -> None:
    recorder = Recorder(google_error(400, f"API key {KEY} is wrong here", "INVALID_ARGUMENT"))
    async with model_for(recorder) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(REQUEST)
    error = caught.value
    assert (error.status, error.provider, error.model) == (400, "gemini", "gemini-test")
    assert "INVALID_ARGUMENT" in error.body
    assert "gemini model 'gemini-test'" in str(error)
    assert KEY not in str(error) and KEY not in error.body
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_client_errors_are_not_retried(status: int) -> None:
    recorder = Recorder(google_error(status, "no", "PERMISSION_DENIED"))
    async with model_for(recorder) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await collect(model)
    assert caught.value.status == status
    assert len(recorder.requests) == 1


async def test_429_waits_for_retry_after_then_succeeds(autojump_clock: trio.abc.Clock) -> None:
    limited = google_error(429, "quota", "RESOURCE_EXHAUSTED")
    limited.headers["retry-after"] = "7"
    recorder = Recorder(limited, httpx.Response(200, json=answer(text("ok"))))
    async with model_for(recorder) as model:
        start = trio.current_time()
        response = await model.generate(REQUEST)
        assert trio.current_time() - start == pytest.approx(7)
    assert response.content is not None and response.content.text == "ok"
    assert len(recorder.requests) == 2


async def test_429_until_the_retries_run_out(autojump_clock: trio.abc.Clock) -> None:
    limited = google_error(429, f"quota for {KEY}", "RESOURCE_EXHAUSTED")
    limited.headers["retry-after"] = "1"
    recorder = Recorder(limited)
    async with model_for(recorder) as model:
        with pytest.raises(ModelRateLimitError) as caught:
            await model.generate(REQUEST)
    assert caught.value.retry_after == 1
    assert KEY not in str(caught.value)
    assert len(recorder.requests) == FAST.attempts


@pytest.mark.parametrize("streaming", [False, True])
async def test_server_errors_then_success(autojump_clock: trio.abc.Clock, streaming: bool) -> None:
    ok = (
        event_stream(sse(*streamed(["ok"])))
        if streaming
        else httpx.Response(200, json=answer(text("ok")))
    )
    recorder = Recorder(
        google_error(500, "internal", "INTERNAL"), google_error(503, "busy", "UNAVAILABLE"), ok
    )
    async with model_for(recorder) as model:
        response = (await collect(model))[-1] if streaming else await model.generate(REQUEST)
    assert response.content is not None and response.content.text == "ok"
    assert len(recorder.requests) == 3


async def test_transport_errors_are_retried_then_reported(autojump_clock: trio.abc.Clock) -> None:
    refused = httpx.ConnectError(f"refused for {KEY}")
    recorder = Recorder(refused, httpx.Response(200, json=answer(text("ok"))))
    async with model_for(recorder) as model:
        assert (await model.generate(REQUEST)).content is not None
    failing = Recorder(refused)
    async with model_for(failing) as model:
        with pytest.raises(ModelTransportError, match="ConnectError") as caught:
            await model.generate(REQUEST)
    assert KEY not in str(caught.value)
    assert len(failing.requests) == FAST.attempts


@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(200, text=f"<html>oops {KEY}</html>"),
        httpx.Response(200, json={"candidates": [{"content": {"parts": [{"text": 1}]}}]}),
        httpx.Response(200, json=[KEY]),
    ],
)
async def test_malformed_answers_are_response_errors(reply: httpx.Response) -> None:
    async with model_for(Recorder(reply)) as model:
        with pytest.raises(ModelResponseError) as caught:
            await model.generate(REQUEST)
    assert "gemini model 'gemini-test'" in str(caught.value)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        (f"data: {{not json {KEY}\r\n\r\n", ModelResponseError, "not JSON"),
        (sse({"candidates": "x"}), ModelResponseError, "candidates"),
        (sse(answer(text("a"), reason=None)), ModelTransportError, "ended"),
        ("", ModelTransportError, "ended before a finish reason"),
        (
            sse(
                answer(text("a"), reason=None),
                {"error": {"code": 503, "message": f"overloaded {KEY}", "status": "UNAVAILABLE"}},
            ),
            ModelHTTPError,
            "UNAVAILABLE",
        ),
    ],
)
async def test_stream_failures_are_typed(body: str, error: type[Exception], match: str) -> None:
    recorder = Recorder(event_stream(body))
    async with model_for(recorder) as model:
        with pytest.raises(error, match=match) as caught:
            await collect(model)
    assert KEY not in str(caught.value)
    assert len(recorder.requests) == 1  # a stream that has begun is not retried


async def test_an_in_stream_rate_limit_is_a_rate_limit_error() -> None:
    payload = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    async with model_for(Recorder(event_stream(sse(payload)))) as model:
        with pytest.raises(ModelRateLimitError) as caught:
            await collect(model)
    assert caught.value.status == 429
