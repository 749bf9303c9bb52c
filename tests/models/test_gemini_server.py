"""GeminiModel against a fake Gemini API on real loopback sockets (hypercorn).

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
from trio_agents.models import GeminiModel, LlmRequest, LlmResponse, RetryPolicy

from .gemini_payloads import KEY, answer, call, streamed, text

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]

FAST = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05, total_timeout=5)
HELLO = LlmRequest(contents=[Content.from_text("Hi")])
GREETING = ["Hello", " from", " the", " fake", " Gemini!"]


@attrs.define
class Failure:
    status: int
    body: str = '{"error": {"code": 500, "message": "failure", "status": "INTERNAL"}}'
    headers: dict[str, str] = attrs.field(factory=dict)


@attrs.define
class FakeGemini:
    """A Gemini API server: scripted failures first, then answers made from the request.

    With tools and no tool result yet it calls the first tool with ``{"city": "Paris"}`` (with
    ``call_id`` as the call's id when set); after a tool result it answers with text quoting it;
    otherwise it greets. Streams send one chunk per word, the finish reason and usage on the last.
    ``mode`` changes how things go: ``"normal"``, ``"gated"`` (waits for :attr:`proceed` after the
    first chunk), ``"disconnect"`` (drops the connection after it), ``"stall"``, ``"endless"``
    (keep-alive comments forever after it), ``"malformed"`` (200 with a body that is not JSON),
    ``"blocked"`` (the prompt is blocked).
    """

    failures: list[Failure] = attrs.field(factory=list)
    mode: str = "normal"
    call_id: str | None = None
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)
    ports: list[int] = attrs.field(factory=list)
    proceed: trio.Event = attrs.field(factory=trio.Event)

    def app(self) -> Starlette:
        route = Route("/v1beta/models/{target:path}", self.handle, methods=["POST"])
        return Starlette(routes=[route])

    async def handle(self, request: Request) -> Response:
        if request.headers.get("x-goog-api-key") != KEY or "key" in request.query_params:
            error = {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}
            return JSONResponse({"error": error}, status_code=401)
        body = await request.json()
        self.bodies.append(body)
        self.paths.append(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        self.ports.append(request.client.port if request.client else 0)
        if self.failures:
            failure = self.failures.pop(0)
            return Response(failure.body, status_code=failure.status, headers=failure.headers)
        if self.mode == "malformed":
            return Response("<html>not json</html>", media_type="application/json")
        chunks = self.reply(body)
        if request.path_params["target"].endswith(":streamGenerateContent"):
            return StreamingResponse(self.frames(chunks), media_type="text/event-stream")
        return JSONResponse(merged(chunks))

    def reply(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        if self.mode == "blocked":
            return [{"promptFeedback": {"blockReason": "SAFETY"}}]
        last = body["contents"][-1]["parts"]
        results = [p["functionResponse"] for p in last if "functionResponse" in p]
        if results:
            return streamed(["It", " is", " " + results[0]["response"]["sky"]])
        if body.get("tools"):
            name = body["tools"][0]["functionDeclarations"][0]["name"]
            return streamed(["Let me check."], last=call(name, {"city": "Paris"}, self.call_id))
        return streamed(GREETING)

    async def frames(self, chunks: list[dict[str, Any]]) -> AsyncIterator[str]:
        for i, chunk in enumerate(chunks):
            yield f"data: {json.dumps(chunk)}\r\n\r\n"
            if i == 0:
                await self.after_first_chunk()
                while self.mode == "endless":  # keep-alive comments only, forever
                    yield ": keep-alive\r\n\r\n"
                    await trio.sleep(0.01)
            await trio.lowlevel.checkpoint()

    async def after_first_chunk(self) -> None:
        if self.mode == "gated":
            await self.proceed.wait()
        elif self.mode == "disconnect":
            raise RuntimeError("the server falls over mid-stream")
        elif self.mode == "stall":
            await trio.sleep(5)


def merged(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The non-streamed answer: the chunks' parts in one candidate, text joined."""
    if "candidates" not in chunks[-1]:
        return chunks[-1]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    texts = "".join(p["text"] for p in parts if "text" in p)
    others = [p for p in parts if "text" not in p]
    last = chunks[-1]
    return answer(
        text(texts), *others, usageMetadata=last["usageMetadata"], modelVersion=last["modelVersion"]
    )


async def served(serve_app: Any, server: FakeGemini, **kwargs: Any) -> GeminiModel:
    url = await serve_app(server.app())
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("api_key", KEY)
    return GeminiModel("gemini-test", base_url=url, **kwargs)


async def collect(model: GeminiModel, request: LlmRequest = HELLO) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [c async for c in chunks]


# -- the client over sockets -----------------------------------------------------------------------


async def test_generate(serve_app: Any) -> None:
    server = FakeGemini()
    async with await served(serve_app, server) as model:
        response = await model.generate(HELLO)
    assert response.content is not None
    assert response.content.text == "Hello from the fake Gemini!"
    assert response.usage_metadata is not None and response.model_version == "gemini-test-001"
    assert server.bodies == [{"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}]
    assert server.paths == ["/v1beta/models/gemini-test:generateContent"]


async def test_streaming_is_incremental(serve_app: Any) -> None:
    server = FakeGemini(mode="gated")
    texts: list[str | None] = []
    async with await served(serve_app, server) as model:
        with trio.fail_after(5):  # a buffering client would wait for the gate forever
            async with model.stream(HELLO) as chunks:
                first = await chunks.receive()
                assert first.partial
                texts.append(first.content.text if first.content else None)
                server.proceed.set()
                texts += [c.content.text if c.content else None async for c in chunks]
    assert texts == [*GREETING, "Hello from the fake Gemini!"]
    assert server.paths == ["/v1beta/models/gemini-test:streamGenerateContent?alt=sse"]


async def test_a_finished_stream_hands_its_connection_back_for_reuse(serve_app: Any) -> None:
    server = FakeGemini()
    async with await served(serve_app, server) as model:
        await collect(model)
        await collect(model)
        await model.generate(HELLO)
    assert len(set(server.ports)) == 1  # one keep-alive connection: each stream was read to EOF


async def test_a_server_dropping_the_stream_is_a_transport_error(serve_app: Any) -> None:
    server = FakeGemini(mode="disconnect")
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with pytest.raises(ModelTransportError) as caught:
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
    assert [c.content.text for c in seen if c.content] == ["Hello"]
    assert KEY not in str(caught.value)
    assert len(server.bodies) == 1  # no retry once the stream has begun


async def test_rate_limit_with_retry_after_then_success(serve_app: Any) -> None:
    body = '{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}'
    server = FakeGemini(failures=[Failure(429, body, {"Retry-After": "0.05"})])
    async with await served(serve_app, server) as model:
        start = trio.current_time()
        response = await model.generate(HELLO)
    assert trio.current_time() - start >= 0.05
    assert response.content is not None
    assert len(server.bodies) == 2


async def test_server_errors_then_success_also_when_streaming(serve_app: Any) -> None:
    server = FakeGemini(failures=[Failure(500), Failure(503)])
    async with await served(serve_app, server) as model:
        chunks = await collect(model)
    assert chunks[-1].content is not None
    assert chunks[-1].content.text == "Hello from the fake Gemini!"
    assert len(server.bodies) == 3


async def test_a_wrong_key_is_not_retried_and_not_shown(serve_app: Any) -> None:
    server = FakeGemini()
    wrong = "AIzaSy-wrong-key-9876543210"
    async with await served(serve_app, server, api_key=wrong) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(HELLO)
    assert caught.value.status == 401
    assert "UNAUTHENTICATED" in caught.value.body
    assert wrong not in str(caught.value)
    assert server.bodies == []  # refused before the body was read, and asked once


async def test_malformed_json_is_a_response_error(serve_app: Any) -> None:
    server = FakeGemini(mode="malformed")
    async with await served(serve_app, server) as model:
        with pytest.raises(ModelResponseError, match="not JSON"):
            await model.generate(HELLO)


async def test_a_stalled_stream_hits_the_read_timeout(serve_app: Any) -> None:
    server = FakeGemini(mode="stall")
    seen: list[LlmResponse] = []
    async with await served(serve_app, server, read_timeout=0.2) as model:
        with trio.fail_after(3), pytest.raises(ModelTransportError, match="ReadTimeout"):
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
    assert len(seen) == 1


async def test_cancellation_mid_stream_leaves_the_model_usable(serve_app: Any) -> None:
    server = FakeGemini(mode="endless")
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with trio.move_on_after(0.2) as scope:
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
        assert scope.cancelled_caught
        assert len(seen) == 1
        server.mode = "normal"
        after = await collect(model)
        response = await model.generate(HELLO)
    assert after[-1].content is not None and after[-1].content.text == "Hello from the fake Gemini!"
    assert response.content is not None


# -- end to end: an LlmAgent with a FunctionTool ---------------------------------------------------


def get_weather(city: str) -> dict[str, str]:
    """The weather of a city.

    Args:
        city: The city.
    """
    return {"sky": f"sunny in {city}"}


async def run_agent(
    model: GeminiModel, streaming: StreamingMode, message: str = "Weather in Paris?"
) -> list[Any]:
    agent = LlmAgent(name="weather", model=model, instruction="Help.", tools=[get_weather])
    runner = InMemoryRunner(agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    async with runner.run(
        user_id="u",
        session_id=session.id,
        new_message=message,
        run_config=RunConfig(streaming_mode=streaming),
    ) as events:
        return [e async for e in events]


@pytest.mark.parametrize("call_id", [None, "fc-1"])
@pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])
async def test_agent_with_a_tool_through_the_runner(
    serve_app: Any, streaming: StreamingMode, call_id: str | None
) -> None:
    server = FakeGemini(call_id=call_id)
    async with await served(serve_app, server) as model:
        delivered = await run_agent(model, streaming)

    final = [e for e in delivered if not e.partial]
    assert len(final) == 3
    (function_call,) = final[0].get_function_calls()
    assert (function_call.name, dict(function_call.args)) == ("get_weather", {"city": "Paris"})
    assert function_call.id == call_id or (call_id is None and function_call.id.startswith("adk-"))
    assert final[0].text == "Let me check."
    (function_response,) = final[1].get_function_responses()
    assert function_response.id == function_call.id
    assert final[2].text == "It is sunny in Paris"
    assert final[2].is_final_response()
    assert final[2].usage_metadata is not None
    partial_text = "".join(e.text or "" for e in delivered if e.partial)
    expected = "Let me check.It is sunny in Paris" if streaming is StreamingMode.SSE else ""
    assert partial_text == expected

    first, second = server.bodies
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "get_weather"
    assert declaration["parametersJsonSchema"]["properties"]["city"]["type"] == "string"
    assert "Help." in first["systemInstruction"]["parts"][0]["text"]
    assert first["contents"] == [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
    model_turn, tool_turn = second["contents"][-2:]
    sent_call: dict[str, Any] = {"name": "get_weather", "args": {"city": "Paris"}}
    sent_result: dict[str, Any] = {"name": "get_weather", "response": {"sky": "sunny in Paris"}}
    if call_id is not None:  # the API's id is echoed; the client's own adk- ids are not sent
        sent_call["id"] = sent_result["id"] = call_id
    assert model_turn == {
        "role": "model",
        "parts": [{"text": "Let me check."}, {"functionCall": sent_call}],
    }
    assert tool_turn == {"role": "user", "parts": [{"functionResponse": sent_result}]}
    kind = "streamGenerateContent?alt=sse" if streaming is StreamingMode.SSE else "generateContent"
    assert server.paths == [f"/v1beta/models/gemini-test:{kind}"] * 2


@pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])
async def test_a_blocked_prompt_is_an_error_event(serve_app: Any, streaming: StreamingMode) -> None:
    server = FakeGemini(mode="blocked")
    async with await served(serve_app, server) as model:
        delivered = await run_agent(model, streaming)
    (event,) = delivered
    assert (event.error_code, event.content) == ("SAFETY", None)
    assert event.error_message == "the prompt was blocked: SAFETY"
