"""OpenAIModel against a fake Chat Completions server on real loopback sockets (hypercorn).

Streaming, disconnects, retries, timeouts and cancellation behave here as they do on a network;
the end-to-end tests run an LlmAgent with a FunctionTool through InMemoryRunner.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trio_agents import (
    Content,
    InMemoryRunner,
    LlmAgent,
    ModelHTTPError,
    ModelResponseError,
    ModelTransportError,
    RunConfig,
    StreamingMode,
)
from trio_agents.models import LlmRequest, LlmResponse, OpenAIModel, RetryPolicy

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]

KEY = "sk-fake-server-key-0123456789"
FAST = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05, total_timeout=5)


@attrs.define
class Failure:
    status: int
    body: str = "failure"
    headers: dict[str, str] = attrs.field(factory=dict)


@attrs.define
class FakeOpenAI:
    """A Chat Completions server: scripted failures first, then answers made from the request.

    With tools and no tool result yet it calls the first tool with ``{"city": "Paris"}``; after a
    tool result it answers with text quoting it; otherwise it says hello. ``mode`` changes how a
    stream goes: ``"normal"``, ``"gated"`` (waits for :attr:`proceed` after the first delta),
    ``"disconnect"`` (drops the connection after the first delta), ``"stall"``, ``"endless"``;
    ``"malformed"`` answers 200 with a body that is not JSON.
    """

    failures: list[Failure] = attrs.field(factory=list)
    mode: str = "normal"
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    ports: list[int] = attrs.field(factory=list)
    proceed: trio.Event = attrs.field(factory=trio.Event)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return JSONResponse({"error": {"message": "no key"}}, status_code=401)
        body = await request.json()
        self.bodies.append(body)
        self.ports.append(request.client.port if request.client else 0)
        if self.failures:
            failure = self.failures.pop(0)
            return Response(failure.body, status_code=failure.status, headers=failure.headers)
        if self.mode == "malformed":
            return Response("<html>not json</html>", media_type="application/json")
        text, call = self.reply(body)
        if body.get("stream"):
            return StreamingResponse(self.frames(text, call), media_type="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if call:
            message["tool_calls"] = [call]
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish(call)}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    @staticmethod
    def reply(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"Result: {json.loads(last['content'])['result']}", None
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            arguments = json.dumps({"city": "Paris"})
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            return None, call
        return "Hello from the fake server!", None

    async def frames(self, text: str | None, call: dict[str, Any] | None) -> AsyncIterator[str]:
        for i, piece in enumerate(deltas(text, call)):
            yield f"data: {json.dumps(piece)}\n\n"
            if i == 1:  # after the role-only first chunk comes the first real delta
                await self.after_first_delta()
                while self.mode == "endless":  # keep-alive comments only, forever
                    yield ": keep-alive\n\n"
                    await trio.sleep(0.01)
            await trio.lowlevel.checkpoint()
        yield f"data: {json.dumps(chunk({}, finish(call)))}\n\n"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    async def after_first_delta(self) -> None:
        if self.mode == "gated":
            await self.proceed.wait()
        elif self.mode == "disconnect":
            raise RuntimeError("the server falls over mid-stream")
        elif self.mode == "stall":
            await trio.sleep(5)


def finish(call: dict[str, Any] | None) -> str:
    return "tool_calls" if call else "stop"


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {"object": "chat.completion.chunk", "model": "fake", "choices": [choice]}


def deltas(text: str | None, call: dict[str, Any] | None) -> list[dict[str, Any]]:
    out = [chunk({"role": "assistant", "content": ""})]
    words = (text or "").split(" ")
    out += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words) if text]
    if call:
        arguments = call["function"]["arguments"]
        head = {"index": 0, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        out.append(chunk({"tool_calls": [head]}))
        for i in range(0, len(arguments), 4):
            piece = {"index": 0, "function": {"arguments": arguments[i : i + 4]}}
            out.append(chunk({"tool_calls": [piece]}))
    return out


async def served(serve_app: Any, server: FakeOpenAI, **kwargs: Any) -> OpenAIModel:
    url = await serve_app(server.app())
    kwargs.setdefault("retry", FAST)
    return OpenAIModel("gpt-fake", api_key=KEY, base_url=f"{url}/v1", **kwargs)


HELLO = LlmRequest(contents=[Content.from_text("Hi")])


async def collect(model: OpenAIModel, request: LlmRequest = HELLO) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [c async for c in chunks]


# -- the client over sockets -----------------------------------------------------------------------


async def test_generate(serve_app: Any) -> None:
    server = FakeOpenAI()
    async with await served(serve_app, server) as model:
        response = await model.generate(HELLO)
    assert response.content is not None
    assert response.content.text == "Hello from the fake server!"
    assert server.bodies[0]["messages"] == [{"role": "user", "content": "Hi"}]


async def test_streaming_is_incremental(serve_app: Any) -> None:
    server = FakeOpenAI(mode="gated")
    texts: list[str | None] = []
    async with await served(serve_app, server) as model:
        with trio.fail_after(5):  # a buffering client would wait for the gate forever
            async with model.stream(HELLO) as chunks:
                first = await chunks.receive()
                assert first.partial
                texts.append(first.content.text if first.content else None)
                server.proceed.set()
                texts += [c.content.text if c.content else None async for c in chunks]
    assert texts == ["Hello", " from", " the", " fake", " server!", "Hello from the fake server!"]


async def test_a_finished_stream_hands_its_connection_back_for_reuse(serve_app: Any) -> None:
    server = FakeOpenAI()
    async with await served(serve_app, server) as model:
        await collect(model)
        await collect(model)
        await model.generate(HELLO)
    assert len(set(server.ports)) == 1  # one keep-alive connection: each stream was read to EOF


async def test_a_server_dropping_the_stream_is_a_transport_error(serve_app: Any) -> None:
    server = FakeOpenAI(mode="disconnect")
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with pytest.raises(ModelTransportError) as caught:
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
    assert [c.content.text for c in seen if c.content] == ["Hello"]
    assert KEY not in str(caught.value)
    assert "RemoteProtocolError" in str(caught.value)
    assert len(server.bodies) == 1  # no retry once the stream has begun


async def test_rate_limit_with_retry_after_then_success(serve_app: Any) -> None:
    server = FakeOpenAI(failures=[Failure(429, "slow down", {"Retry-After": "0.05"})])
    async with await served(serve_app, server) as model:
        start = trio.current_time()
        response = await model.generate(HELLO)
    assert trio.current_time() - start >= 0.05
    assert response.content is not None
    assert len(server.bodies) == 2


async def test_server_error_then_success_also_when_streaming(serve_app: Any) -> None:
    server = FakeOpenAI(failures=[Failure(500), Failure(502)])
    async with await served(serve_app, server) as model:
        chunks = await collect(model)
    assert chunks[-1].content is not None
    assert chunks[-1].content.text == "Hello from the fake server!"
    assert len(server.bodies) == 3


async def test_unauthorized_is_not_retried(serve_app: Any) -> None:
    server = FakeOpenAI()
    url = await serve_app(server.app())
    async with OpenAIModel("m", api_key="sk-wrong-key-123", base_url=f"{url}/v1") as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(HELLO)
    assert caught.value.status == 401
    assert "sk-wrong-key-123" not in str(caught.value)


async def test_malformed_json_is_a_response_error(serve_app: Any) -> None:
    server = FakeOpenAI(mode="malformed")
    async with await served(serve_app, server) as model:
        with pytest.raises(ModelResponseError, match="not JSON"):
            await model.generate(HELLO)


async def test_a_stalled_stream_hits_the_read_timeout(serve_app: Any) -> None:
    server = FakeOpenAI(mode="stall")
    seen: list[LlmResponse] = []
    async with await served(serve_app, server, read_timeout=0.2) as model:
        with trio.fail_after(3), pytest.raises(ModelTransportError, match="ReadTimeout"):
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
    assert len(seen) == 1


async def test_cancellation_mid_stream_leaves_the_model_usable(serve_app: Any) -> None:
    server = FakeOpenAI(mode="endless")
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with trio.move_on_after(0.2) as scope:
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
        assert scope.cancelled_caught
        assert len(seen) == 1
        server.mode = "normal"
        chunks_after = await collect(model)
        response = await model.generate(HELLO)
    assert chunks_after[-1].content is not None
    assert response.content is not None


# -- end to end: an LlmAgent with a FunctionTool ---------------------------------------------------


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])
async def test_agent_with_a_tool_through_the_runner(
    serve_app: Any, streaming: StreamingMode
) -> None:
    server = FakeOpenAI()
    async with await served(serve_app, server) as model:
        agent = LlmAgent(name="weather", model=model, instruction="Help.", tools=[get_weather])
        runner = InMemoryRunner(agent)
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        async with runner.run(
            user_id="u",
            session_id=session.id,
            new_message="Weather in Paris?",
            run_config=RunConfig(streaming_mode=streaming),
        ) as events:
            delivered = [e async for e in events]

    final = [e for e in delivered if not e.partial]
    calls = final[0].get_function_calls()
    assert [(c.name, dict(c.args), c.id) for c in calls] == [
        ("get_weather", {"city": "Paris"}, "call_1")
    ]
    responses = final[1].get_function_responses()
    assert [(r.name, r.id) for r in responses] == [("get_weather", "call_1")]
    assert final[2].text == "Result: sunny in Paris"
    assert final[2].is_final_response()
    assert final[2].usage_metadata is not None
    assert len(final) == 3
    partial_text = "".join(e.text or "" for e in delivered if e.partial)
    assert partial_text == ("Result: sunny in Paris" if streaming is StreamingMode.SSE else "")

    first, second = server.bodies
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert first["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "Weather in Paris?"}
    assert bool(first.get("stream")) is (streaming is StreamingMode.SSE)
    assistant, tool = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": json.dumps({"result": "sunny in Paris"}),
    }
