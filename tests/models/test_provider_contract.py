"""The contract every HTTP model client keeps, run against each provider's fake API on real
loopback sockets (``fake_provider.py``; the wire formats in ``wires.py``).

Streaming, disconnects, retries, timeouts and cancellation behave here as they do on a network;
the end-to-end tests run an LlmAgent with a FunctionTool through InMemoryRunner. Real sockets need
the real clock: every wait is at most a few tenths of a second, with ``trio.fail_after`` guards
that turn a hang into a failure. Provider-specific behaviour: ``test_<provider>_server.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_agents import ModelHTTPError, ModelResponseError, ModelTransportError, StreamingMode
from trio_agents.models import LlmResponse

from .fake_provider import (
    GREETING,
    HELLO,
    HTTPX_LEFTOVERS,
    Failure,
    FakeProvider,
    check_agent_run,
    collect,
    run_agent,
    served,
)
from .wires import WIRES

pytestmark = HTTPX_LEFTOVERS

WHOLE = "".join(GREETING)


@pytest.fixture(params=sorted(WIRES))
def server(request: pytest.FixtureRequest) -> FakeProvider:
    """A fresh fake API of each provider."""
    return FakeProvider(WIRES[request.param])


def text_of(response: LlmResponse) -> str | None:
    return response.content.text if response.content else None


# -- the client over sockets -----------------------------------------------------------------------


async def test_generate(serve_app: Any, server: FakeProvider) -> None:
    async with await served(serve_app, server) as model:
        response = await model.generate(HELLO)
    assert text_of(response) == WHOLE
    server.wire.check_hello(server, response)


async def test_streaming_is_incremental(serve_app: Any, server: FakeProvider) -> None:
    server.mode = "gated"
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with trio.fail_after(5):  # a buffering client would wait for the gate forever
            async with model.stream(HELLO) as chunks:
                seen.append(await chunks.receive())
                server.proceed.set()
                seen += [c async for c in chunks]
    assert [text_of(c) for c in seen] == [*GREETING, WHOLE]
    assert [c.partial for c in seen[:-1]] == [True] * len(GREETING)
    assert not seen[-1].partial
    server.wire.check_stream(server, seen)


async def test_a_finished_stream_hands_its_connection_back_for_reuse(
    serve_app: Any, server: FakeProvider
) -> None:
    async with await served(serve_app, server) as model:
        await collect(model)
        await collect(model)
        await model.generate(HELLO)
    assert len(server.ports) == 3
    assert len(set(server.ports)) == 1  # one keep-alive connection: each stream was read to EOF


async def test_a_server_dropping_the_stream_is_a_transport_error(
    serve_app: Any, server: FakeProvider
) -> None:
    server.mode = "disconnect"
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with trio.fail_after(5), pytest.raises(ModelTransportError) as caught:
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
    assert [text_of(c) for c in seen] == ["Hello"]
    assert server.wire.key not in str(caught.value)
    assert "RemoteProtocolError" in str(caught.value)
    assert len(server.bodies) == 1  # no retry once the stream has begun


async def test_rate_limit_with_retry_after_then_success(
    serve_app: Any, server: FakeProvider
) -> None:
    server.failures = [Failure(429, {"Retry-After": "0.05"})]
    async with await served(serve_app, server) as model:
        with trio.fail_after(5):
            start = trio.current_time()
            response = await model.generate(HELLO)
    assert trio.current_time() - start >= 0.05
    assert text_of(response) == WHOLE
    assert len(server.bodies) == 2


@pytest.mark.parametrize("statuses", [(500, 503), (500, 502), (500,)])
async def test_server_errors_then_success_also_when_streaming(
    serve_app: Any, server: FakeProvider, statuses: tuple[int, ...]
) -> None:
    server.failures = [Failure(status) for status in statuses]
    async with await served(serve_app, server) as model:
        with trio.fail_after(5):
            chunks = await collect(model)
    assert text_of(chunks[-1]) == WHOLE
    assert len(server.bodies) == len(statuses) + 1


async def test_a_wrong_key_is_not_retried_and_not_shown(
    serve_app: Any, server: FakeProvider
) -> None:
    wrong = "sk-wrong-key-9876543210"
    async with await served(serve_app, server, api_key=wrong) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(HELLO)
    assert caught.value.status == 401
    assert server.wire.unauthorized_marker in caught.value.body
    assert wrong not in str(caught.value)
    assert server.bodies == []  # refused before the body was read
    assert server.requests == 1  # and asked once


async def test_a_client_error_is_not_retried(serve_app: Any, server: FakeProvider) -> None:
    server.failures = [Failure(400)]
    async with await served(serve_app, server) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(HELLO)
    assert caught.value.status == 400
    assert len(server.bodies) == 1


async def test_malformed_json_is_a_response_error(serve_app: Any, server: FakeProvider) -> None:
    server.mode = "malformed"
    async with await served(serve_app, server) as model:
        with pytest.raises(ModelResponseError, match="not JSON"):
            await model.generate(HELLO)


async def test_a_stalled_stream_hits_the_read_timeout(serve_app: Any, server: FakeProvider) -> None:
    server.mode = "stall"
    seen: list[LlmResponse] = []
    async with await served(serve_app, server, read_timeout=0.2) as model:
        with trio.fail_after(3), pytest.raises(ModelTransportError, match="ReadTimeout"):
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
    assert [text_of(c) for c in seen] == ["Hello"]


@pytest.mark.parametrize("mode", ["endless", "chatter"])
async def test_cancellation_mid_stream_leaves_the_model_usable(
    serve_app: Any, server: FakeProvider, mode: str
) -> None:
    """Cancelled while waiting between chunks (``endless``: keep-alives only) or while chunks
    keep coming (``chatter``): the model still streams and answers afterwards."""
    server.mode = mode
    seen: list[LlmResponse] = []
    async with await served(serve_app, server) as model:
        with trio.CancelScope() as scope:
            async with model.stream(HELLO) as chunks:
                async for c in chunks:
                    seen.append(c)
                    scope.deadline = min(scope.deadline, trio.current_time() + 0.1)
        assert scope.cancelled_caught
        assert seen
        assert {text_of(c) for c in seen} == {"Hello"}
        if mode == "endless":
            assert len(seen) == 1
        server.mode = "normal"
        with trio.fail_after(5):
            after = await collect(model)
            response = await model.generate(HELLO)
    assert text_of(after[-1]) == WHOLE
    assert text_of(response) == WHOLE


# -- end to end: an LlmAgent with a FunctionTool ---------------------------------------------------


@pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])
async def test_agent_with_a_tool_through_the_runner(
    serve_app: Any, server: FakeProvider, streaming: StreamingMode
) -> None:
    async with await served(serve_app, server) as model:
        delivered = await run_agent(model, streaming)
    assert server.wire.call_id is not None
    check_agent_run(server, delivered, streaming, server.wire.call_id)
