"""AnthropicModel against an in-process fake Messages API over real sockets (hypercorn).

Real sockets need the real clock: every wait here is at most a few tenths of a second, and
``trio.fail_after`` guards turn a hang into a failure.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.models.anthropic_payloads import (
    MESSAGE_STOP,
    answer,
    block_start,
    block_stop,
    delta,
    message_delta,
    message_start,
    sse_frame,
    text_stream,
)
from trio_agents import (
    Content,
    Event,
    InMemoryRunner,
    LlmAgent,
    ModelHTTPError,
    ModelResponseError,
    ModelTransportError,
    RunConfig,
    StreamingMode,
)
from trio_agents.models import AnthropicModel, LlmRequest, LlmResponse, RetryPolicy
from trio_agents.tools import FunctionTool

KEY = "sk-ant-server-test"
QUICK_RETRY = RetryPolicy(attempts=3, initial_delay=0.05, max_delay=0.2, total_timeout=5)
LEFT_EARLY = pytest.mark.filterwarnings(
    # A cancellation that lands while the stream waits for its consumer leaves httpx's own line
    # iterators suspended; the response itself is closed, but trio reports them (httpx#3686).
    r"ignore:Async generator 'httpx\..*' was garbage collected:ResourceWarning"
)

Step = dict[str, Any] | Callable[[], Awaitable[None]] | Exception
Reply = Callable[[dict[str, Any]], Response]


def streaming(*steps: Step) -> StreamingResponse:
    """An SSE answer: events are sent, callables awaited, exceptions raised (cutting the stream)."""

    async def frames() -> AsyncIterator[str]:
        for step in steps:
            if isinstance(step, dict):
                yield sse_frame(step)
            elif isinstance(step, Exception):
                raise step
            else:
                await step()

    return StreamingResponse(frames(), media_type="text/event-stream")


def sleep(seconds: float) -> Callable[[], Awaitable[None]]:
    async def wait() -> None:
        await trio.sleep(seconds)

    return wait


class FakeAnthropic:
    """``POST /v1/messages`` answering from a script of replies; records bodies and headers."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(routes=[Route("/v1/messages", self.messages, methods=["POST"])])

    async def messages(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        return self.replies.pop(0)(body)


def json_reply(payload: dict[str, Any], status: int = 200, **headers: str) -> Reply:
    return lambda body: JSONResponse(payload, status_code=status, headers=headers)


def stream_reply(*steps: Step) -> Reply:
    return lambda body: streaming(*steps)


async def start(serve_app: Any, fake: FakeAnthropic, **kwargs: Any) -> AnthropicModel:
    base_url = await serve_app(fake.app)
    kwargs.setdefault("retry", QUICK_RETRY)
    return AnthropicModel("claude-test", api_key=KEY, base_url=base_url, **kwargs)


def hello() -> LlmRequest:
    return LlmRequest(contents=[Content.from_text("Hi")])


async def collect(model: AnthropicModel, request: LlmRequest) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [c async for c in chunks]


# -- streaming -------------------------------------------------------------------------------------


async def test_chunks_arrive_while_the_server_is_still_streaming(serve_app: Any) -> None:
    release = trio.Event()
    fake = FakeAnthropic(
        stream_reply(
            message_start(),
            block_start(0, {"type": "text", "text": ""}),
            delta(0, "text_delta", text="Hel"),
            release.wait,  # the rest only after the client has seen "Hel"
            {"type": "ping"},
            delta(0, "text_delta", text="lo"),
            block_stop(0),
            message_delta("end_turn", 3),
            MESSAGE_STOP,
        )
    )
    seen: list[LlmResponse] = []
    with trio.fail_after(5):
        async with await start(serve_app, fake) as model, model.stream(hello()) as chunks:
            async for chunk in chunks:
                seen.append(chunk)
                release.set()
    assert [c.content.text for c in seen if c.content] == ["Hel", "lo", "Hello"]
    assert [c.partial for c in seen] == [True, True, False]
    assert fake.bodies[0]["stream"] is True
    assert fake.headers[0]["x-api-key"] == KEY
    assert fake.headers[0]["anthropic-version"] == "2023-06-01"


async def test_a_server_that_disconnects_mid_stream_is_a_transport_error(serve_app: Any) -> None:
    started = [message_start(), block_start(0, {"type": "text", "text": ""})]
    fake = FakeAnthropic(
        stream_reply(*started, delta(0, "text_delta", text="par"), RuntimeError("server died"))
    )
    with trio.fail_after(5):
        async with await start(serve_app, fake) as model:
            with pytest.raises(ModelTransportError):
                await collect(model, hello())
    assert len(fake.bodies) == 1  # nothing is retried once the stream has started


async def test_a_stalled_stream_hits_the_read_timeout(serve_app: Any) -> None:
    fake = FakeAnthropic(stream_reply(message_start(), trio.sleep_forever))
    with trio.fail_after(5):
        async with await start(serve_app, fake, read_timeout=0.2) as model:
            with pytest.raises(ModelTransportError, match="ReadTimeout"):
                await collect(model, hello())


@LEFT_EARLY
async def test_cancelling_mid_stream_leaves_the_model_usable(serve_app: Any) -> None:
    endless = [delta(0, "text_delta", text="la"), sleep(0.02)] * 1000
    fake = FakeAnthropic(
        stream_reply(message_start(), block_start(0, {"type": "text", "text": ""}), *endless),
        json_reply(answer("still here")),
    )
    received = 0
    async with await start(serve_app, fake) as model:
        with trio.move_on_after(0.25) as scope:
            async with model.stream(hello()) as chunks:
                async for _ in chunks:
                    received += 1
        assert scope.cancelled_caught
        assert received > 0
        with trio.fail_after(5):
            response = await model.generate(hello())
    assert response.content is not None
    assert response.content.text == "still here"


# -- retries and errors ----------------------------------------------------------------------------

OVERLOADED = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


async def test_429_with_retry_after_then_success(serve_app: Any) -> None:
    fake = FakeAnthropic(
        json_reply(OVERLOADED, 429, **{"retry-after": "0.1"}), json_reply(answer("ok"))
    )
    with trio.fail_after(5):
        async with await start(serve_app, fake) as model:
            before = trio.current_time()
            response = await model.generate(hello())
            waited = trio.current_time() - before
    assert response.content is not None
    assert response.content.text == "ok"
    assert waited >= 0.1
    assert len(fake.bodies) == 2


async def test_500_then_success_also_for_streams(serve_app: Any) -> None:
    fake = FakeAnthropic(
        json_reply({"type": "error", "error": {"type": "api_error"}}, 500),
        stream_reply(*text_stream("fine")),
    )
    with trio.fail_after(5):
        async with await start(serve_app, fake) as model:
            chunks = await collect(model, hello())
    assert chunks[-1].content is not None
    assert chunks[-1].content.text == "fine"
    assert len(fake.bodies) == 2


async def test_a_400_is_not_retried(serve_app: Any) -> None:
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    fake = FakeAnthropic(json_reply(bad, 400), json_reply(answer()))
    async with await start(serve_app, fake) as model:
        with pytest.raises(ModelHTTPError) as info:
            await model.generate(hello())
    assert info.value.status == 400
    assert len(fake.bodies) == 1


async def test_malformed_json_is_a_response_error(serve_app: Any) -> None:
    fake = FakeAnthropic(lambda body: Response("{oops", media_type="application/json"))
    async with await start(serve_app, fake) as model:
        with pytest.raises(ModelResponseError):
            await model.generate(hello())


# -- an agent with a tool, end to end --------------------------------------------------------------


def get_weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"city": city, "sky": "sunny"}


def agent_replies() -> list[Reply]:
    """Call get_weather, then answer from its result; JSON or SSE as the request asks."""
    call = {"type": "tool_use", "id": "toolu_42", "name": "get_weather", "input": {"city": "Paris"}}

    def first(body: dict[str, Any]) -> Response:
        assert [t["name"] for t in body["tools"]] == ["get_weather"]
        if not body.get("stream"):
            return JSONResponse(answer(content=[call], stop_reason="tool_use"))
        start = {**call, "input": {}}
        return streaming(
            message_start(),
            block_start(0, start),
            delta(0, "input_json_delta", partial_json=""),
            delta(0, "input_json_delta", partial_json='{"city": '),
            delta(0, "input_json_delta", partial_json='"Paris"}'),
            block_stop(0),
            message_delta("tool_use"),
            MESSAGE_STOP,
        )

    def second(body: dict[str, Any]) -> Response:
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert messages[1]["content"] == [{**call, "type": "tool_use"}]
        [result] = messages[2]["content"]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == "toolu_42"
        assert json.loads(result["content"]) == {"city": "Paris", "sky": "sunny"}
        if not body.get("stream"):
            return JSONResponse(answer("It is sunny in Paris."))
        return streaming(*text_stream("It is sunny ", "in Paris."))

    return [first, second]


async def run_agent(model: AnthropicModel, run_config: RunConfig | None) -> list[Event]:
    agent = LlmAgent(name="forecaster", model=model, tools=[FunctionTool(get_weather)])
    runner = InMemoryRunner(agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    async with runner.run(
        user_id="u", session_id=session.id, new_message="Weather in Paris?", run_config=run_config
    ) as events:
        return [e async for e in events]


@pytest.mark.parametrize("mode", [StreamingMode.NONE, StreamingMode.SSE])
async def test_an_agent_calls_a_tool_and_answers_through_the_fake_api(
    serve_app: Any, mode: StreamingMode
) -> None:
    fake = FakeAnthropic(*agent_replies())
    with trio.fail_after(10):
        async with await start(serve_app, fake) as model:
            events = await run_agent(model, RunConfig(streaming_mode=mode))
    final = [e for e in events if not e.partial]
    [call] = final[0].get_function_calls()
    assert (call.name, dict(call.args), call.id) == ("get_weather", {"city": "Paris"}, "toolu_42")
    [response] = final[1].get_function_responses()
    assert response.id == "toolu_42"
    assert final[2].text == "It is sunny in Paris."
    assert final[2].is_final_response()
    assert len(final) == 3
    partial_texts = [e.text for e in events if e.partial]
    if mode is StreamingMode.SSE:
        assert partial_texts == ["It is sunny ", "in Paris."]
    else:
        assert partial_texts == []
    assert len(fake.bodies) == 2
    assert all(b.get("stream", False) is (mode is StreamingMode.SSE) for b in fake.bodies)
