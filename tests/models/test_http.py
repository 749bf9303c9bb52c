"""The shared HTTP plumbing of the model clients (``trio_agents.models._http``).

Most tests drive a trivial :class:`HttpModel` subclass through ``httpx.MockTransport`` (time is
virtual there: ``autojump_clock``); a few go through real loopback sockets with ``serve_app``.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trio_agents import (
    ModelError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTransportError,
)
from trio_agents.models import (
    HttpModel,
    LlmRequest,
    LlmResponse,
    RetryPolicy,
    ServerSentEvent,
    parse_sse_lines,
)
from trio_agents.models._http import _SseParser

# Leaving an httpx response stream early (errors, cancellation) abandons httpx's own nested
# async generators; trio reports each with a ResourceWarning (encode/httpx#3686). Only those.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]

KEY = "sk-test-SECRET-0123456789abcdef"
BASE = "https://llm.example.test/v1"
FAST = RetryPolicy(attempts=4, initial_delay=0.01, max_delay=0.05, total_timeout=5)

Handler = Callable[[httpx.Request], Any]


class Echo(HttpModel):
    """The smallest client: POSTs the request's labels and returns the answer as text."""

    provider = "echo"

    async def generate(self, request: LlmRequest) -> LlmResponse:
        answer = await self.post_json("gen", dict(request.labels))
        return LlmResponse(custom_metadata=answer)


def echo(handler: Handler, *, retry: RetryPolicy = FAST, **kwargs: Any) -> Echo:
    return Echo(
        "echo-1",
        api_key=KEY,
        base_url=BASE,
        headers={"Authorization": f"Bearer {KEY}"},
        transport=httpx.MockTransport(handler),
        retry=retry,
        seed=0,
        **kwargs,
    )


class Script:
    """A MockTransport handler answering from a list (the last answer repeats); records calls."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.times.append(trio.current_time())
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok(payload: Any = None) -> httpx.Response:
    return httpx.Response(200, json={"ok": True} if payload is None else payload)


def assert_no_key(exc: BaseException) -> None:
    texts = [str(exc), repr(exc), *(str(getattr(exc, a, "")) for a in ("body", "args"))]
    for text in texts:
        assert KEY not in text
        assert KEY[:12] not in text  # not even a prefix (the key straddling a cut)


# -- RetryPolicy -----------------------------------------------------------------------------------


@given(
    attempt=st.integers(min_value=2, max_value=5000),
    initial=st.floats(min_value=0, max_value=100),
    multiplier=st.floats(min_value=1, max_value=10),
    max_delay=st.floats(min_value=0, max_value=1000),
    jitter=st.floats(min_value=0, max_value=1),
    seed=st.integers(),
)
def test_backoff_stays_within_its_jitter_band_around_the_capped_exponential(
    attempt: int, initial: float, multiplier: float, max_delay: float, jitter: float, seed: int
) -> None:
    policy = RetryPolicy(
        initial_delay=initial, multiplier=multiplier, max_delay=max_delay, jitter=jitter
    )
    try:
        exponential = initial * multiplier ** (attempt - 2)
    except OverflowError:
        exponential = float("inf")
    base = min(max_delay, exponential) if initial else 0.0
    delay = policy.backoff(attempt, random.Random(seed))
    assert 0 <= delay <= max_delay * (1 + jitter) + 1e-9
    assert base * (1 - jitter) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9


def test_backoff_without_jitter_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_delay=0.5, multiplier=2, max_delay=3, jitter=0)
    rng = random.Random(0)
    assert [policy.backoff(n, rng) for n in range(2, 8)] == [0.5, 1, 2, 3, 3, 3]


def test_jitter_spreads_delays_and_a_seed_reproduces_them() -> None:
    policy = RetryPolicy(initial_delay=1, jitter=0.5)
    first = [policy.backoff(2, random.Random(7)) for _ in range(3)]
    assert len(set(first)) == 1  # same seed, same delay
    spread = {policy.backoff(2, rng) for rng in [random.Random(s) for s in range(20)]}
    assert len(spread) > 10
    assert all(0.5 <= d <= 1.5 for d in spread)


@pytest.mark.parametrize(
    "kwargs",
    [{"attempts": 0}, {"jitter": 1.5}, {"multiplier": 0.5}, {"total_timeout": 0}],
)
def test_retry_policy_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RetryPolicy(**kwargs)


# -- retries ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
async def test_retryable_status_then_success(status: int, autojump_clock: Any) -> None:
    script = Script(httpx.Response(status, text="busy"), ok({"n": 1}))
    async with echo(script) as model:
        response = await model.generate(LlmRequest())
    assert response.custom_metadata == {"n": 1}
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("bye")],
)
async def test_transport_error_then_success(error: Exception, autojump_clock: Any) -> None:
    script = Script(error, ok())
    async with echo(script) as model:
        await model.generate(LlmRequest())
    assert len(script.requests) == 2


async def test_attempts_bound_the_retries(autojump_clock: Any) -> None:
    script = Script(httpx.Response(503, text="down"))
    async with echo(script, retry=RetryPolicy(attempts=3, initial_delay=0.1)) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(LlmRequest())
    assert len(script.requests) == 3
    assert caught.value.status == 503
    assert type(caught.value) is ModelHTTPError


async def test_transport_errors_exhausted_raise_model_transport_error(
    autojump_clock: Any,
) -> None:
    script = Script(httpx.ConnectError("refused"))
    async with echo(script, retry=RetryPolicy(attempts=2)) as model:
        with pytest.raises(ModelTransportError, match="ConnectError") as caught:
            await model.generate(LlmRequest())
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(script.requests) == 2


async def test_rate_limit_exhausted_raises_rate_limit_error_with_the_hint(
    autojump_clock: Any,
) -> None:
    script = Script(httpx.Response(429, headers={"Retry-After": "2"}, text="slow down"))
    async with echo(script, retry=RetryPolicy(attempts=2)) as model:
        with pytest.raises(ModelRateLimitError) as caught:
            await model.generate(LlmRequest())
    assert caught.value.retry_after == 2
    assert caught.value.status == 429
    assert "slow down" in caught.value.body


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
async def test_non_retryable_statuses_raise_at_once(status: int, autojump_clock: Any) -> None:
    script = Script(httpx.Response(status, text="no"), ok())
    async with echo(script) as model:
        start = trio.current_time()
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(LlmRequest())
    assert caught.value.status == status
    assert len(script.requests) == 1
    assert trio.current_time() == start


async def test_retry_after_seconds_is_honoured(autojump_clock: Any) -> None:
    script = Script(httpx.Response(429, headers={"Retry-After": "7"}), ok())
    async with echo(script, retry=RetryPolicy(initial_delay=0.01, total_timeout=60)) as model:
        await model.generate(LlmRequest())
    assert script.times[1] - script.times[0] == pytest.approx(7)


async def test_retry_after_http_date_is_honoured(autojump_clock: Any) -> None:
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    script = Script(httpx.Response(503, headers={"Retry-After": when}), ok())
    async with echo(script, retry=RetryPolicy(initial_delay=0.01, total_timeout=60)) as model:
        await model.generate(LlmRequest())
    assert 18 <= script.times[1] - script.times[0] <= 21  # the date has whole seconds


async def test_retry_after_ms_wins_over_retry_after(autojump_clock: Any) -> None:
    headers = {"Retry-After": "9", "retry-after-ms": "1500"}
    script = Script(httpx.Response(429, headers=headers), ok())
    async with echo(script, retry=RetryPolicy(total_timeout=60)) as model:
        await model.generate(LlmRequest())
    assert script.times[1] - script.times[0] == pytest.approx(1.5)


@pytest.mark.parametrize("value", ["soon", "", "nan", "-5"])
async def test_unusable_retry_after_falls_back_to_backoff(value: str, autojump_clock: Any) -> None:
    policy = RetryPolicy(initial_delay=3, jitter=0, total_timeout=60)
    script = Script(httpx.Response(503, headers={"Retry-After": value}), ok())
    async with echo(script, retry=policy) as model:
        await model.generate(LlmRequest())
    waited = script.times[1] - script.times[0]
    assert waited == pytest.approx(0 if value == "-5" else 3)


async def test_total_timeout_bounds_the_retrying(autojump_clock: Any) -> None:
    policy = RetryPolicy(attempts=100, initial_delay=1, multiplier=2, jitter=0, total_timeout=10)
    script = Script(httpx.Response(503))
    async with echo(script, retry=policy) as model:
        start = trio.current_time()
        with pytest.raises(ModelHTTPError):
            await model.generate(LlmRequest())
    assert trio.current_time() - start <= 10
    assert script.times == pytest.approx([start, start + 1, start + 3, start + 7])


async def test_a_retry_after_beyond_the_deadline_fails_without_waiting(
    autojump_clock: Any,
) -> None:
    script = Script(httpx.Response(429, headers={"Retry-After": "3600"}), ok())
    async with echo(script, retry=RetryPolicy(total_timeout=60)) as model:
        start = trio.current_time()
        with pytest.raises(ModelRateLimitError) as caught:
            await model.generate(LlmRequest())
    assert trio.current_time() == start
    assert caught.value.retry_after == 3600
    assert len(script.requests) == 1


# -- errors ----------------------------------------------------------------------------------------


async def test_http_error_names_provider_model_status_and_a_body_excerpt() -> None:
    body = json.dumps({"error": {"message": "bad request " + "x" * 2000}})
    async with echo(Script(httpx.Response(400, text=body))) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(LlmRequest())
    error = caught.value
    assert (error.status, error.provider, error.model) == (400, "echo", "echo-1")
    assert len(error.body) == 500
    assert error.body == body[:500]
    assert "echo model 'echo-1'" in str(error)
    assert "HTTP 400" in str(error)


@pytest.mark.parametrize("where", [0, 250, 468, 475, 485, 600])  # key at where + 12
async def test_the_key_is_scrubbed_from_status_errors_wherever_it_sits(where: int) -> None:
    body = "a" * where + f"invalid key {KEY}" + "b" * 700
    async with echo(Script(httpx.Response(401, text=body))) as model:
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(LlmRequest())
    assert_no_key(caught.value)
    assert len(caught.value.body) <= 500


async def test_the_key_is_scrubbed_from_transport_errors(autojump_clock: Any) -> None:
    script = Script(httpx.ConnectError(f"could not send Bearer {KEY}"))
    async with echo(script, retry=RetryPolicy(attempts=1)) as model:
        with pytest.raises(ModelTransportError) as caught:
            await model.generate(LlmRequest())
    assert_no_key(caught.value)
    assert "***" in str(caught.value)


async def test_the_key_is_scrubbed_from_malformed_answers() -> None:
    script = Script(httpx.Response(200, text="x" * 180 + f"<html>{KEY}</html>"))  # cut at 200
    async with echo(script) as model:
        with pytest.raises(ModelResponseError, match="not JSON") as caught:
            await model.generate(LlmRequest())
    assert_no_key(caught.value)
    assert_no_key(model.response_error(f"field {KEY} missing"))
    assert KEY not in repr(model)


async def test_a_body_that_breaks_off_is_a_transport_error() -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'{"partial": '
            raise httpx.ReadError("connection reset")

    async with echo(lambda request: httpx.Response(200, stream=Broken())) as model:
        with pytest.raises(ModelTransportError, match="ReadError"):
            await model.generate(LlmRequest())


async def test_requests_carry_the_headers_and_json_body() -> None:
    script = Script(ok())
    async with echo(script) as model:
        await model.generate(LlmRequest(labels={"a": "b"}))
    (request,) = script.requests
    assert request.url == f"{BASE}/gen"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {"a": "b"}


async def test_async_with_closes_the_client_and_aclose_is_idempotent() -> None:
    model = echo(Script(ok()))
    async with model as entered:
        assert entered is model
        assert not model.client.is_closed
    assert model.client.is_closed
    await model.aclose()
    assert model.client.is_closed


# -- server-sent events ----------------------------------------------------------------------------


def sse(text: str) -> list[ServerSentEvent]:
    return parse_sse_lines(re.split(r"\r\n|\r|\n", text))


def test_sse_basic_fields_and_default_event_type() -> None:
    text = "event: add\ndata: 1\nid: 7\n\ndata: 2\n\n"
    assert sse(text) == [ServerSentEvent("1", "add", "7"), ServerSentEvent("2", "message", "7")]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_sse_accepts_every_line_ending(newline: str) -> None:
    text = newline.join(["data: a", "data: b", "", "event: e", "data: c", "", ""])
    assert sse(text) == [ServerSentEvent("a\nb"), ServerSentEvent("c", "e")]


def test_sse_lines_may_keep_their_line_breaks() -> None:
    lines = ["data: x\r\n", "\r\n", "data: y\n", "\n"]
    assert parse_sse_lines(lines) == [ServerSentEvent("x"), ServerSentEvent("y")]


def test_sse_comments_and_unknown_fields_are_ignored() -> None:
    text = ": ping\ndata: a\n: another\nretry: 10\nfoo: bar\n\n:\n\n"
    assert sse(text) == [ServerSentEvent("a")]


def test_sse_multi_line_data_is_joined_with_newlines() -> None:
    text = 'data: {\ndata:   "k": 1\ndata: }\n\n'
    assert sse(text) == [ServerSentEvent('{\n  "k": 1\n}')]


def test_sse_only_one_space_after_the_colon_is_removed() -> None:
    assert sse("data:x\n\ndata:  y\n\n") == [ServerSentEvent("x"), ServerSentEvent(" y")]


def test_sse_a_field_without_colon_has_an_empty_value() -> None:
    assert sse("data\ndata\n\n") == [ServerSentEvent("\n")]
    assert sse("data:\n\n") == [ServerSentEvent("")]


def test_sse_event_without_data_is_not_dispatched_and_its_type_resets() -> None:
    assert sse("event: lonely\n\ndata: x\n\n") == [ServerSentEvent("x", "message")]


def test_sse_id_persists_and_an_id_with_nul_is_ignored() -> None:
    text = "id: 1\ndata: a\n\ndata: b\n\nid: 2\0\ndata: c\n\nid\ndata: d\n\n"
    assert [e.id for e in sse(text)] == ["1", "1", "1", ""]


def test_sse_a_leading_byte_order_mark_is_skipped() -> None:
    assert sse("\ufeffdata: x\n\n") == [ServerSentEvent("x")]
    assert sse("data: x\n\n\ufeffdata: y\n\n") == [ServerSentEvent("x")]  # only the first


def test_sse_an_unterminated_last_event_is_discarded() -> None:
    assert sse("data: done\n\ndata: cut off") == [ServerSentEvent("done")]


_field_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\0"), max_size=12
)
_events = st.lists(
    st.builds(
        ServerSentEvent,
        data=st.lists(_field_text, min_size=1, max_size=3).map("\n".join),
        event=st.sampled_from(["message", "delta", "done"]),
        id=st.none() | _field_text,
    ),
    max_size=6,
)


def _encode(events: list[ServerSentEvent], newline: str, comments: bool) -> str:
    lines: list[str] = []
    for event in events:
        if comments:
            lines.append(": keep-alive")
        if event.event != "message":
            lines.append(f"event: {event.event}")
        if event.id is not None:
            lines.append(f"id: {event.id}")
        lines.extend(f"data: {d}" for d in event.data.split("\n"))
        lines.append("")
    return newline.join([*lines, ""])


def _expected(events: list[ServerSentEvent]) -> list[ServerSentEvent]:
    """The id buffer persists across events (WHATWG), so an event without id inherits one."""
    out, last = [], None
    for event in events:
        last = event.id if event.id is not None else last
        out.append(ServerSentEvent(event.data, event.event, last))
    return out


@given(events=_events, newline=st.sampled_from(["\n", "\r\n", "\r"]), comments=st.booleans())
def test_sse_property_encoded_events_parse_back(
    events: list[ServerSentEvent], newline: str, comments: bool
) -> None:
    assert sse(_encode(events, newline, comments)) == _expected(events)


class Chunked(httpx.AsyncByteStream):
    """A response body delivered in the given pieces (a checkpoint between pieces)."""

    def __init__(self, pieces: list[bytes], error: Exception | None = None) -> None:
        self.pieces = pieces
        self.error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            await trio.lowlevel.checkpoint()
            yield piece
        if self.error is not None:
            raise self.error


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


async def _collect(model: HttpModel) -> list[ServerSentEvent]:
    async with model.post_sse("stream", {}) as events:
        return [event async for event in events]


@given(
    events=_events,
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
async def test_sse_property_any_chunking_of_the_body_gives_the_same_events(
    events: list[ServerSentEvent], newline: str, cuts: list[int]
) -> None:
    data = _encode(events, newline, comments=True).encode()
    pieces = _split(data, cuts)
    async with echo(lambda request: httpx.Response(200, stream=Chunked(pieces))) as model:
        assert await _collect(model) == _expected(events)


async def test_post_sse_failure_mid_stream_is_a_transport_error() -> None:
    body = Chunked([b"data: one\n\n", b"data: tw"], error=httpx.ReadError(f"reset {KEY}"))
    seen: list[str] = []
    async with echo(lambda request: httpx.Response(200, stream=body)) as model:
        with pytest.raises(ModelTransportError, match="ReadError") as caught:
            async with model.post_sse("stream", {}) as events:
                async for event in events:
                    seen.append(event.data)
    assert seen == ["one"]
    assert_no_key(caught.value)


async def test_post_sse_retries_until_the_headers_arrive(autojump_clock: Any) -> None:
    script = Script(
        httpx.Response(503),
        httpx.ConnectError("refused"),
        httpx.Response(200, stream=Chunked([b"data: hi\n\n"])),
    )
    async with echo(script) as model:
        assert await _collect(model) == [ServerSentEvent("hi")]
    assert len(script.requests) == 3


async def test_post_sse_error_status_raises_before_any_event() -> None:
    async with echo(Script(httpx.Response(404, text="no such model"))) as model:
        with pytest.raises(ModelHTTPError, match="no such model"):
            await _collect(model)


# -- through real sockets --------------------------------------------------------------------------


def _app(state: dict[str, Any]) -> Starlette:
    async def flaky(request: Request) -> Response:
        state["calls"] = state.get("calls", 0) + 1
        if state["calls"] == 1:
            return Response("overloaded", status_code=503, headers={"Retry-After": "0"})
        return JSONResponse({"calls": state["calls"]})

    async def ticks(request: Request) -> Response:
        async def body() -> AsyncIterator[str]:
            for i in range(1000):
                yield f"data: {i}\n\n"
                await trio.sleep(0.02)

        return StreamingResponse(body(), media_type="text/event-stream")

    async def stall(request: Request) -> Response:
        async def body() -> AsyncIterator[str]:
            yield "data: first\n\n"
            await trio.sleep(5)
            yield "data: never\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/gen", flaky, methods=["POST"]),
            Route("/v1/ticks", ticks, methods=["POST"]),
            Route("/v1/stall", stall, methods=["POST"]),
        ]
    )


async def _served(serve_app: Any, state: dict[str, Any], **kwargs: Any) -> Echo:
    url = await serve_app(_app(state))
    return Echo("echo-1", api_key=KEY, base_url=f"{url}/v1", retry=FAST, **kwargs)


async def test_socket_retry_then_success(serve_app: Any) -> None:
    state: dict[str, Any] = {}
    async with await _served(serve_app, state) as model:
        response = await model.generate(LlmRequest())
    assert response.custom_metadata == {"calls": 2}


async def test_socket_cancellation_mid_stream_leaves_the_client_usable(serve_app: Any) -> None:
    state: dict[str, Any] = {}
    seen: list[str] = []
    async with await _served(serve_app, state) as model:
        # Cancelled from outside after three events, while the server is still sending (a
        # count, not a clock, decides when: a cold or busy machine reads slowly).
        with trio.fail_after(20), trio.CancelScope() as scope:
            async with model.post_sse("ticks", {}) as events:
                async for event in events:
                    seen.append(event.data)
                    if len(seen) == 3:
                        scope.cancel()
        assert scope.cancelled_caught
        assert seen[:3] == ["0", "1", "2"]
        assert len(seen) < 10  # the stream stopped at the cancellation, not at its end
        state["calls"] = 1  # the next /gen call succeeds at once
        response = await model.generate(LlmRequest())
    assert response.custom_metadata == {"calls": 2}


async def test_socket_stalled_stream_hits_the_read_timeout(serve_app: Any) -> None:
    state: dict[str, Any] = {}
    seen: list[str] = []
    async with await _served(serve_app, state, read_timeout=0.2) as model:
        with pytest.raises(ModelTransportError, match="ReadTimeout") as caught:
            async with model.post_sse("stall", {}) as events:
                async for event in events:
                    seen.append(event.data)
    assert seen == ["first"]
    assert isinstance(caught.value, ModelError)


async def test_post_sse_splits_lines_only_at_cr_and_lf() -> None:
    # httpx's aiter_lines() would also split at U+2028, U+0085, \x1e...: JSON may hold those raw
    text = '{"t": "a\u2028b\x85c\u2029d"} \x1e\x0b\x0c\x1c'
    data = f"data: {text}\r\n\r\n".encode()
    pieces = [data[:10], data[10:-3], data[-3:-1], data[-1:]]  # a CRLF cut in two
    async with echo(lambda request: httpx.Response(200, stream=Chunked(pieces))) as model:
        (event,) = await _collect(model)
    assert event.data == text


async def test_post_sse_decodes_utf8_across_chunks_and_replaces_invalid_bytes() -> None:
    data = "data: héllo €\n\n".encode()
    pieces = [data[:8], data[8:14], data[14:], b"data: \xff!\n\n"]
    async with echo(lambda request: httpx.Response(200, stream=Chunked(pieces))) as model:
        events = await _collect(model)
    assert [e.data for e in events] == ["héllo €", "\ufffd!"]


async def test_post_sse_drops_an_event_cut_off_by_the_end_of_the_body() -> None:
    pieces = [b"data: whole\n\n", b"data: cut"]
    async with echo(lambda request: httpx.Response(200, stream=Chunked(pieces))) as model:
        assert await _collect(model) == [ServerSentEvent("whole")]


@pytest.mark.parametrize(
    "pieces",
    [
        [b"data: x\r", b"", b"\ndata: y\r", b"\n\r\n"],  # an empty piece inside a CRLF
        [b"data: x\r", b"\xe2", b"\x82\xac\ndata: y\n\n"],  # half a character after a CR
    ],
)
def test_sse_byte_pieces_keep_a_pending_cr_until_text_arrives(pieces: list[bytes]) -> None:
    parser = _SseParser()
    events = [e for piece in pieces for e in parser.feed_bytes(piece)]
    assert [e.data for e in events] == ["x\ny"]
