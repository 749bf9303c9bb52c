"""One fake model API server for every provider, on real loopback sockets (hypercorn).

:class:`FakeProvider` holds what all providers share: scripted failures, the behaviour modes, and
records of what the client sent. It decides *what* to answer as a provider-neutral
:class:`Reply`; a :class:`Wire` adapter (``tests/models/wires.py``, one per provider) says *how*:
the route, the key check, the request fields it reads, and the JSON answer and SSE frames.

The answer is made from the request: with tools and no tool result yet it says "Let me check."
and calls the first tool with ``{"city": "Paris"}``; after a tool result it answers
"It is <sky>"; otherwise it greets. ``mode`` changes how things go: ``"normal"``, ``"gated"``
(waits for :attr:`FakeProvider.proceed` after the first text chunk), ``"disconnect"`` (drops the
connection after it), ``"stall"``, ``"endless"`` (keep-alive comments forever after it),
``"chatter"`` (the first text chunk again, forever), ``"malformed"`` (200 with a body that is not
JSON), ``"blocked"`` (the prompt is blocked; Gemini only).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import attrs
import pytest
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trio_agents import Content, Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from trio_agents.models import HttpModel, LlmRequest, LlmResponse, RetryPolicy

HTTPX_LEFTOVERS = [
    # A cancellation that lands while a stream waits for its reader leaves httpx's own line
    # iterators suspended; the response itself is closed, but trio reports them (httpx#3686).
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]
GREETING = ["Hello", " from", " the", " fake", " server!"]
CHECKING = "Let me check."
QUESTION = "Weather in Paris?"
SKY = "sunny in Paris"
ARGS = {"city": "Paris"}
FAST = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05, total_timeout=5)
HELLO = LlmRequest(contents=[Content.from_text("Hi")])


@attrs.frozen
class Reply:
    """What the fake answers, whatever the provider: text pieces, then maybe one tool call."""

    words: list[str]
    call: str | None = None  # the name of the tool called with ARGS
    blocked: bool = False


@attrs.define
class Failure:
    """A scripted failure: the status, its headers, and (by default) the provider's error body."""

    status: int
    headers: dict[str, str] = attrs.field(factory=dict)
    body: str | None = None


class Wire(Protocol):
    """A provider's side of the fake: its wire format and the client made for it."""

    @property
    def key(self) -> str: ...
    @property
    def route(self) -> str: ...
    @property
    def keep_alive(self) -> str: ...
    @property
    def first_text_frame(self) -> int:
        """The index of the SSE frame carrying the first text piece."""

    @property
    def unauthorized_marker(self) -> str:
        """A word the 401 body holds."""

    def model(self, url: str, **kwargs: Any) -> HttpModel: ...
    def authorized(self, request: Request) -> bool: ...
    def unauthorized(self) -> Response: ...
    def error_body(self, status: int) -> str: ...
    def streams(self, request: Request, body: dict[str, Any]) -> bool: ...
    def tool_name(self, body: dict[str, Any]) -> str | None: ...
    def tool_result(self, body: dict[str, Any]) -> str | None: ...
    def answer(self, reply: Reply) -> dict[str, Any]: ...
    def frames(self, reply: Reply) -> list[str]: ...

    # What the client must have sent (asserts), and the id the API gives its tool call.
    @property
    def call_id(self) -> str | None: ...
    def check_hello(self, server: FakeProvider, response: LlmResponse) -> None: ...
    def check_stream(self, server: FakeProvider, seen: list[LlmResponse]) -> None: ...
    def check_agent(self, server: FakeProvider, streaming: bool) -> None: ...


@attrs.define
class FakeProvider:
    """A provider's API: scripted failures first, then answers made from the request."""

    wire: Wire
    failures: list[Failure] = attrs.field(factory=list)
    mode: str = "normal"
    requests: int = 0
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    headers: list[dict[str, str]] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)
    ports: list[int] = attrs.field(factory=list)
    proceed: trio.Event = attrs.field(factory=trio.Event)

    def app(self) -> Starlette:
        return Starlette(routes=[Route(self.wire.route, self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> Response:
        self.requests += 1
        if not self.wire.authorized(request):
            return self.wire.unauthorized()
        body = await request.json()
        self.record(request, body)
        if self.failures:
            return self.fail(self.failures.pop(0))
        if self.mode == "malformed":
            return Response("<html>not json</html>", media_type="application/json")
        reply = self.reply(body)
        if self.wire.streams(request, body):
            frames = self.stream(self.wire.frames(reply))
            return StreamingResponse(frames, media_type="text/event-stream")
        return JSONResponse(self.wire.answer(reply))

    def record(self, request: Request, body: dict[str, Any]) -> None:
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        query = request.url.query
        self.paths.append(request.url.path + (f"?{query}" if query else ""))
        self.ports.append(request.client.port if request.client else 0)

    def fail(self, failure: Failure) -> Response:
        body = failure.body if failure.body is not None else self.wire.error_body(failure.status)
        headers = {"content-type": "application/json", **failure.headers}
        return Response(body, status_code=failure.status, headers=headers)

    def reply(self, body: dict[str, Any]) -> Reply:
        if self.mode == "blocked":
            return Reply([], blocked=True)
        result = self.wire.tool_result(body)
        if result is not None:
            return Reply(["It", " is", " " + result])
        name = self.wire.tool_name(body)
        if name is not None:
            return Reply([CHECKING], call=name)
        return Reply(GREETING)

    async def stream(self, frames: list[str]) -> AsyncIterator[str]:
        for i, frame in enumerate(frames):
            yield frame
            if i == self.wire.first_text_frame:
                async for extra in self.after_first_text(frame):
                    yield extra
            await trio.lowlevel.checkpoint()

    async def after_first_text(self, frame: str) -> AsyncIterator[str]:
        if self.mode == "gated":
            await self.proceed.wait()
        elif self.mode == "disconnect":
            raise RuntimeError("the server falls over mid-stream")
        elif self.mode == "stall":
            await trio.sleep_forever()
        while self.mode in ("endless", "chatter"):  # paced, so the client keeps up
            yield self.wire.keep_alive if self.mode == "endless" else frame
            await trio.sleep(0.01)


async def served(serve_app: Any, server: FakeProvider, **kwargs: Any) -> HttpModel:
    """The provider's client for ``server``, served on loopback (quick retries by default)."""
    url = await serve_app(server.app())
    kwargs.setdefault("retry", FAST)
    return server.wire.model(url, **kwargs)


async def collect(model: HttpModel, request: LlmRequest = HELLO) -> list[LlmResponse]:
    async with model.stream(request) as chunks:
        return [c async for c in chunks]


# -- the end-to-end scenario: an LlmAgent with a FunctionTool --------------------------------------


def tool_answer(sky: str) -> dict[str, str]:
    """What the scenario's tool returns."""
    return {"sky": sky}


def get_weather(city: str) -> dict[str, str]:
    """The weather of a city.

    Args:
        city: The city.
    """
    return tool_answer(f"sunny in {city}")


async def run_agent(model: HttpModel, streaming: StreamingMode) -> list[Event]:
    """Ask the weather agent once; every event delivered."""
    agent = LlmAgent(name="weather", model=model, instruction="Help.", tools=[get_weather])
    runner = InMemoryRunner(agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    with trio.fail_after(10):
        async with runner.run(
            user_id="u",
            session_id=session.id,
            new_message=QUESTION,
            run_config=RunConfig(streaming_mode=streaming),
        ) as events:
            return [e async for e in events]


def check_agent_run(
    server: FakeProvider, delivered: list[Event], streaming: StreamingMode, call_id: str
) -> None:
    """The run called the tool once (id ``call_id``), answered from its result, and sent the
    provider the requests its wire adapter expects."""
    final = [e for e in delivered if not e.partial]
    assert len(final) == 3
    (function_call,) = final[0].get_function_calls()
    assert (function_call.name, dict(function_call.args)) == ("get_weather", ARGS)
    assert function_call.id == call_id
    assert final[0].text == CHECKING
    (function_response,) = final[1].get_function_responses()
    assert (function_response.name, function_response.id) == ("get_weather", call_id)
    assert final[2].text == f"It is {SKY}"
    assert final[2].is_final_response()
    assert final[2].usage_metadata is not None
    partial = [e.text for e in delivered if e.partial]
    sse = streaming is StreamingMode.SSE
    assert partial == ([CHECKING, "It", " is", f" {SKY}"] if sse else [])
    assert len(server.bodies) == 2
    server.wire.check_agent(server, sse)
