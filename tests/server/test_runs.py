"""Runs over HTTP against a real server: streaming, terminal frames, cancel, disconnect, resume.

ARCHITECTURE §3 "HTTP API" fixes the routes and frames; S-API-n refer to ADK-SEMANTICS §4.2.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx
import pytest
import trio

from tests.server.conftest import Start
from tests.server.helpers import (
    HTTPX_LEFT_EARLY,
    Failing,
    Frame,
    Gated,
    SseReader,
    read_frames,
    session_service,
    user_text,
    weather_agent,
)
from trio_agents import BaseAgent, Event, InvocationContext
from trio_agents.server import _live, create_app, serve
from trio_agents.server._runs import follow
from trio_agents.sessions import InMemorySessionService, SessionService

SERVICES = ["memory", "sqlite"]

pytestmark = HTTPX_LEFT_EARLY


class Apps:
    """A server with the test apps; ``gated`` waits for ``gate`` (forever by default)."""

    def __init__(self, service: SessionService | None = None, **options: Any) -> None:
        self.gate: trio.Event | None = None
        self.entered = trio.Event()
        self.gated = Gated(name="gated", entered=self.entered)
        agents: dict[str, BaseAgent] = {
            "weather": weather_agent(),
            "gated": self.gated,
            "failing": Failing(name="failing"),
        }
        self.service = service or InMemorySessionService()
        self.app = create_app(agents, session_service=self.service, **options)
        self.url = ""

    def open_gate_later(self) -> trio.Event:
        self.gated.gate = self.gate = trio.Event()
        return self.gate

    async def start(self, start_server: Start) -> Apps:
        self.url = await start_server(self.app)
        return self

    async def session(self, client: httpx.AsyncClient, app: str, sid: str = "s1") -> None:
        response = await client.post(
            f"{self.url}/apps/{app}/users/u1/sessions", json={"sessionId": sid}
        )
        assert response.status_code == 200

    async def stored(self, app: str, sid: str = "s1") -> list[Event]:
        session = await self.service.get_session(app_name=app, user_id="u1", session_id=sid)
        assert session is not None
        return list(session.events)

    def events_url(self, app: str, sid: str = "s1") -> str:
        return f"{self.url}/apps/{app}/users/u1/sessions/{sid}/events"

    def cancel_url(self, app: str, invocation_id: str, sid: str = "s1") -> str:
        return f"{self.url}/apps/{app}/users/u1/sessions/{sid}/invocations/{invocation_id}/cancel"


def body(app: str, sid: str = "s1", **extra: Any) -> dict[str, Any]:
    return {
        "appName": app,
        "userId": "u1",
        "sessionId": sid,
        "newMessage": user_text("hi"),
        **extra,
    }


async def follow_to_end(client: httpx.AsyncClient, url: str, **params: Any) -> list[Frame]:
    async with client.stream("GET", url, params=params) as response:
        assert response.status_code == 200
        return await read_frames(response)


def check_frames(frames: list[Frame], stored: list[Event], kind: str) -> None:
    """Exactly one terminal frame, last; each event frame's id is its commit sequence."""
    *events, terminal = frames
    assert terminal.event == kind
    assert all(f.event is None for f in events)
    for frame in events:
        if frame.data.get("partial"):
            assert all(e.id != frame.data["id"] for e in stored)
        else:
            assert stored[frame.id - 1].id == frame.data["id"]


# -- streaming -----------------------------------------------------------------------------------


async def test_run_sse_streams_partial_chunks_then_done_s_api_4(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    async with client.stream(
        "POST", apps.url + "/run_sse", json=body("weather", streaming=True)
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = await read_frames(response)
    stored = await apps.stored("weather")
    check_frames(frames, stored, "done")
    assert [f.id for f in frames] == [2, 3, 3, 3, 4, None]
    assert [f.data.get("partial") for f in frames[:-1]] == [None, None, True, True, False]
    assert [f.data["content"]["parts"][0].get("text") for f in frames[2:5]] == [
        "It is ",
        "sunny.",
        "It is sunny.",
    ]
    assert frames[1].data["actions"]["stateDelta"] == {"x": 1}
    invocation_id = frames[0].data["invocationId"]
    assert frames[-1].data == {"invocationId": invocation_id}
    assert [e.invocation_id for e in stored] == [invocation_id] * 4


async def test_run_sse_without_streaming_has_no_partial_chunks(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    async with client.stream("POST", apps.url + "/run_sse", json=body("weather")) as response:
        frames = await read_frames(response)
    assert [f.id for f in frames] == [2, 3, 4, None]
    check_frames(frames, await apps.stored("weather"), "done")


async def test_run_returns_the_runs_events_without_the_user_event_s_api_3(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    response = await client.post(apps.url + "/run", json=body("weather", streaming=True))
    assert response.status_code == 200
    assert response.headers["run-outcome"] == "done"
    events = response.json()
    stored = await apps.stored("weather")
    assert [e["id"] for e in events] == [e.id for e in stored[1:]]
    call = events[0]["content"]["parts"][0]["functionCall"]
    assert call["id"].startswith("adk-")
    assert events[0]["invocationId"].startswith("e-")
    assert events[1]["actions"]["stateDelta"] == {"x": 1}
    assert events[2]["content"]["parts"] == [{"text": "It is sunny."}]
    assert not any(e.get("partial") for e in events)


async def test_missing_session_is_404_before_any_stream_s_api_6(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    for route in ("/run", "/run_sse"):
        response = await client.post(apps.url + route, json=body("weather", sid="nope"))
        assert response.status_code == 404
        assert response.json() == {"detail": "Session not found: nope"}


async def test_custom_metadata_and_state_delta_reach_the_stored_events(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    extra = {"customMetadata": {"tag": "t1"}, "stateDelta": {"from_client": 1}}
    await client.post(apps.url + "/run", json=body("weather", **extra))
    user, *rest = await apps.stored("weather")
    assert user.actions.state_delta == {"from_client": 1}
    assert all((e.custom_metadata or {}).get("tag") == "t1" for e in rest)


async def test_idle_streams_send_ping_comments(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps(ping_interval=0.01).start(start_server)
    await apps.session(client, "gated")
    async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
        async for line in response.aiter_lines():
            if line.startswith(":"):
                assert line == ": ping"
                break


# -- errors --------------------------------------------------------------------------------------


async def test_a_failing_run_ends_with_an_error_frame(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "failing")
    async with client.stream("POST", apps.url + "/run_sse", json=body("failing")) as response:
        frames = await read_frames(response)
    stored = await apps.stored("failing")
    check_frames(frames, stored, "error")
    first, error_event, terminal = frames
    assert first.data["actions"]["stateDelta"] == {"before": 1}
    assert error_event.data["errorCode"] == "ValueError"  # the aftermath is streamed too
    assert error_event.id == 3
    assert terminal.data == {
        "invocationId": first.data["invocationId"],
        "error": "ValueError: the agent broke",
        "errorDetails": {"type": "ValueError", "message": "the agent broke"},
    }


async def test_a_failing_plain_run_is_500_with_the_error(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "failing")
    response = await client.post(apps.url + "/run", json=body("failing"))
    assert response.status_code == 500
    assert response.headers["run-outcome"] == "error"
    data = response.json()
    assert data["detail"] == "ValueError: the agent broke"
    assert data["error"] == "ValueError: the agent broke"
    assert data["errorDetails"] == {"type": "ValueError", "message": "the agent broke"}
    assert data["invocationId"].startswith("e-")
    stored = await apps.stored("failing")
    assert [e["id"] for e in data["events"]] == [e.id for e in stored[1:]]
    assert data["events"][-1]["errorCode"] == "ValueError"  # the error event is in the list


# -- cancel route --------------------------------------------------------------------------------


async def test_cancel_route_cancels_a_streamed_run(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "gated")
    async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
        frames = SseReader(response)
        call = await anext(frames)
        invocation_id = call.data["invocationId"]
        assert (await client.post(apps.cancel_url("gated", "e-other"))).status_code == 404
        cancelled = await client.post(apps.cancel_url("gated", invocation_id))
        assert cancelled.status_code == 202
        assert cancelled.json() == {"invocationId": invocation_id, "status": "cancelling"}
        rest = [frame async for frame in frames]
    stored = await apps.stored("gated")
    check_frames([call, *rest], stored, "cancelled")
    closing, terminal = rest
    (answer,) = closing.data["content"]["parts"]
    assert answer["functionResponse"]["id"] == f"call-{invocation_id}"
    assert answer["functionResponse"]["response"]["error"] == "cancelled"
    assert terminal.data == {"invocationId": invocation_id}
    assert [e.author for e in stored] == ["user", "gated", "gated"]
    again = await client.post(apps.cancel_url("gated", invocation_id))
    assert again.status_code == 404


async def test_cancel_route_stops_a_plain_run(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "gated")
    results: list[httpx.Response] = []

    async def run() -> None:
        results.append(await client.post(apps.url + "/run", json=body("gated")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await apps.entered.wait()
        invocation_id = (await apps.stored("gated"))[-1].invocation_id
        assert (await client.post(apps.cancel_url("gated", invocation_id))).status_code == 202
    (response,) = results
    assert response.status_code == 200
    assert response.headers["run-outcome"] == "cancelled"
    _call, closing = response.json()
    assert closing["content"]["parts"][0]["functionResponse"]["response"]["error"] == "cancelled"


async def test_cancel_route_of_an_unknown_app_or_idle_session_is_404(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    assert (await client.post(apps.cancel_url("weather", "e-x"))).status_code == 404
    assert (await client.post(apps.cancel_url("nope", "e-x"))).status_code == 404


# -- one run per session -------------------------------------------------------------------------


async def test_second_run_on_a_busy_session_is_409_and_stores_nothing(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    gate = apps.open_gate_later()
    await apps.session(client, "gated")
    session_url = f"{apps.url}/apps/gated/users/u1/sessions/s1"
    async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
        frames = SseReader(response)
        await anext(frames)
        before = await apps.stored("gated")
        for route in ("/run", "/run_sse"):
            busy = await client.post(apps.url + route, json=body("gated", stateDelta={"no": 1}))
            assert busy.status_code == 409
            assert "already has a run in flight" in busy.json()["detail"]
        assert (await client.patch(session_url, json={"stateDelta": {"no": 1}})).status_code == 409
        assert (await client.delete(session_url)).status_code == 409
        assert await apps.stored("gated") == before
        gate.set()
        rest = [frame async for frame in frames]
    assert rest[-1].event == "done"
    stored = await apps.stored("gated")
    assert [e.text for e in stored][-1] == "done"
    assert "no" not in (await client.get(session_url)).json()["state"]


async def test_runs_on_other_sessions_go_on_in_parallel(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "gated")
    await apps.session(client, "weather", "s2")
    async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
        await SseReader(response).next()
        other = await client.post(apps.url + "/run", json=body("weather", sid="s2"))
        assert other.status_code == 200


# -- client disconnect ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SERVICES)
async def test_disconnect_cancels_the_run_by_default(
    start_server: Start, client: httpx.AsyncClient, kind: str, tmp_path: Any
) -> None:
    async with session_service(kind, tmp_path) as service:
        apps = await Apps(service).start(start_server)
        await apps.session(client, "gated")
        async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
            call = await SseReader(response).next()
        # The run never ends by itself: following it ends only because the disconnect cancelled it.
        frames = await follow_to_end(client, apps.events_url("gated"))
        stored = await apps.stored("gated")
        check_frames(frames, stored, "cancelled")
        assert [e.id for e in stored] == [f.data["id"] for f in frames[:-1]]
        _user, stored_call, closing = stored
        assert stored_call.id == call.data["id"]
        (answer,) = closing.get_function_responses()
        assert answer.id == f"call-{call.data['invocationId']}"
        assert answer.response["error"] == "cancelled"


async def test_disconnect_cancels_a_plain_run_too(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "gated")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(client.post, apps.url + "/run", json=body("gated"))
            )
            await apps.entered.wait()
            scope.cancel()  # the client gives up: its connection closes
    frames = await follow_to_end(client, apps.events_url("gated"))
    assert frames[-1].event == "cancelled"
    assert (await apps.stored("gated"))[-1].get_function_responses()[0].response[
        "error"
    ] == "cancelled"


@pytest.mark.parametrize("kind", SERVICES)
async def test_detached_run_completes_after_the_client_left(
    start_server: Start, client: httpx.AsyncClient, kind: str, tmp_path: Any
) -> None:
    async with session_service(kind, tmp_path) as service:
        apps = await Apps(service).start(start_server)
        gate = apps.open_gate_later()
        await apps.session(client, "gated")
        request = body("gated", onDisconnect="detach")
        async with client.stream("POST", apps.url + "/run_sse", json=request) as response:
            await SseReader(response).next()
        live = apps.app.state.core.live["gated", "u1", "s1"]
        await live.primary_gone.wait()  # the server saw the client go
        gate.set()
        frames = await follow_to_end(client, apps.events_url("gated"), after=2)
        stored = await apps.stored("gated")
        check_frames(frames, stored, "done")
        assert [e.text for e in stored] == ["hi", None, None, "done"]
        assert stored[2].get_function_responses()[0].response == {"ok": True}
        assert apps.app.state.core.detached_runs == 0


async def test_detached_runs_are_bounded(start_server: Start, client: httpx.AsyncClient) -> None:
    apps = await Apps(max_detached_runs=1).start(start_server)
    gate = apps.open_gate_later()
    await apps.session(client, "gated")
    await apps.session(client, "weather", "s2")
    detached = body("gated", onDisconnect="detach")
    async with client.stream("POST", apps.url + "/run_sse", json=detached) as response:
        reader = SseReader(response)
        await reader.next()
        refused = await client.post(
            apps.url + "/run", json=body("weather", sid="s2", onDisconnect="detach")
        )
        assert refused.status_code == 503
        assert "limit is 1" in refused.json()["detail"]
        assert await apps.stored("weather", "s2") == []
        attached = await client.post(apps.url + "/run", json=body("weather", sid="s2"))
        assert attached.status_code == 200
        gate.set()
        assert (await reader.rest())[-1].event == "done"
    again = await client.post(
        apps.url + "/run", json=body("weather", sid="s2", onDisconnect="detach")
    )
    assert again.status_code == 200


async def test_shutdown_cancels_detached_runs_and_stores_their_aftermath(
    client: httpx.AsyncClient,
) -> None:
    apps = Apps()
    async with trio.open_nursery() as server:
        urls = await server.start(functools.partial(serve, apps.app, port=0, graceful_timeout=0.1))
        apps.url = urls[0]
        await apps.session(client, "gated")
        request = body("gated", onDisconnect="detach")
        async with client.stream("POST", apps.url + "/run_sse", json=request) as response:
            await SseReader(response).next()
        await apps.app.state.core.live["gated", "u1", "s1"].primary_gone.wait()
        server.cancel_scope.cancel()
    _user, _call, closing = await apps.stored("gated")
    assert closing.get_function_responses()[0].response["error"] == "cancelled"
    assert apps.app.state.core.live == {}


async def test_detach_needs_the_lifespan(client: httpx.AsyncClient) -> None:
    apps = Apps()
    transport = httpx.ASGITransport(app=apps.app)  # no lifespan: no nursery for detached runs
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as local:
        await local.post("/apps/weather/users/u1/sessions", json={"sessionId": "s1"})
        response = await local.post("/run", json=body("weather", onDisconnect="detach"))
        assert response.status_code == 503
        assert (await local.post("/run", json=body("weather"))).status_code == 200


# -- resuming a stream ---------------------------------------------------------------------------


async def test_resume_replays_the_stored_events_after_a_seq(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    await client.post(apps.url + "/run", json=body("weather"))
    stored = await apps.stored("weather")
    for after in range(len(stored) + 2):
        frames = await follow_to_end(client, apps.events_url("weather"), after=after)
        assert [f.data["id"] for f in frames[:-1]] == [e.id for e in stored[after:]]
        assert [f.id for f in frames[:-1]] == list(range(after + 1, len(stored) + 1))
        assert frames[-1].event == "done"
        assert frames[-1].data == {"invocationId": stored[-1].invocation_id}
    async with client.stream(
        "GET", apps.events_url("weather"), headers={"Last-Event-ID": "3"}
    ) as response:
        frames = await read_frames(response)
    assert [f.id for f in frames[:-1]] == [4]


async def test_resume_after_a_cancelled_run_ends_with_cancelled(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "gated")
    async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
        reader = SseReader(response)
        call = await reader.next()
        await client.post(apps.cancel_url("gated", call.data["invocationId"]))
        assert (await reader.rest())[-1].event == "cancelled"
    frames = await follow_to_end(client, apps.events_url("gated"), after=3)
    assert [f.event for f in frames] == ["cancelled"]


async def test_resume_follows_a_run_in_flight_to_its_terminal_frame(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    apps = await Apps().start(start_server)
    gate = apps.open_gate_later()
    await apps.session(client, "gated")
    async with client.stream("POST", apps.url + "/run_sse", json=body("gated")) as response:
        reader = SseReader(response)
        await reader.next()
        async with client.stream("GET", apps.events_url("gated"), params={"after": 1}) as follower:
            followed = SseReader(follower)
            assert (await anext(followed)).id == 2
            gate.set()
            rest = [frame async for frame in followed]
        primary = await reader.rest()
    assert [f.id for f in rest] == [3, 4, None]
    assert rest == primary
    check_frames(rest, await apps.stored("gated"), "done")


async def test_resume_input_errors(start_server: Start, client: httpx.AsyncClient) -> None:
    apps = await Apps().start(start_server)
    await apps.session(client, "weather")
    bad = await client.get(apps.events_url("weather"), params={"after": "-1"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("after:")
    header = await client.get(apps.events_url("weather"), headers={"Last-Event-ID": "x"})
    assert header.json()["detail"].startswith("Last-Event-ID:")
    assert (await client.get(apps.events_url("weather", "nope"))).status_code == 404


class Chatty(BaseAgent):
    """Emits one event, waits for its gate, then emits ``count`` events without pause."""

    gate: Any = None
    entered: Any = None
    count: int = 0

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(author=self.name))
        self.entered.set()
        await self.gate.wait()
        for _ in range(self.count):
            await ctx.emit(Event(author=self.name))


async def test_a_follower_behind_the_log_catches_up_from_the_store(
    start_server: Start, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_live, "FOLLOW_LOG", 2)
    gate, entered, finished = trio.Event(), trio.Event(), trio.Event()
    agent = Chatty(name="chatty", gate=gate, entered=entered, count=9)
    app = create_app({"chatty": agent}, session_service=InMemorySessionService())
    url = await start_server(app)
    await client.post(url + "/apps/chatty/users/u1/sessions", json={"sessionId": "s1"})
    core = app.state.core

    async def run() -> None:
        await client.post(url + "/run", json=body("chatty"))
        finished.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await entered.wait()
        out, frames = trio.open_memory_channel[_live.Frame](0)
        nursery.start_soon(follow, core, ("chatty", "u1", "s1"), 0, out)
        first = await frames.receive()  # the follower now waits while the run goes on
        gate.set()
        await finished.wait()  # the run's 11 frames went through a log of 2
        rest = [frame async for frame in frames]
    session = await core.session_service.get_session(
        app_name="chatty", user_id="u1", session_id="s1"
    )
    assert session is not None
    assert len(session.events) == 11
    assert [first.seq, *(f.seq for f in rest[:-1])] == list(range(1, 12))
    assert [first.data, *(f.data for f in rest[:-1])] == [e.to_json() for e in session.events]
    assert rest[-1].kind == "done"
