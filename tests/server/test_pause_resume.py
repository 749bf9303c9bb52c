"""Paused runs over HTTP: ``invocationId`` and function-response messages on ``/run`` and
``/run_sse``, against a real server on loopback (in memory and on a SQLite file).

The app (:mod:`tests.desk_app`) pauses on a refund's confirmation request or a long-running
ticket. A paused run ends with a ``done`` frame that says ``paused`` and lists what it waits
for; the answer resumes the same invocation, by its id as ADK's server takes it, or without one
as ADK's dev UI sends it. A request that cannot resume is a 422 naming the invocation or the call
and stores nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.desk_app import REFUND_ARGS, TICKET_ARGS, desk_app
from tests.server.conftest import Start
from tests.server.helpers import (
    Frame,
    Gated,
    SseReader,
    json_calls as calls,
    json_texts as texts,
    read_frames,
    session_service,
    user_text,
)
from trio_agents import App, Content, LlmAgent, Part, ResumabilityConfig
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.server import create_app
from trio_agents.sessions import InMemorySessionService, SessionService
from trio_agents.testing import ScriptedModel

CONFIRMATION = "adk_request_confirmation"
SESSION = "/apps/{app}/users/u1/sessions/s1"


class Desk:
    """A server with the resumable ``desk`` and its non-resumable twin ``plain``."""

    def __init__(self, client: httpx.AsyncClient, service: SessionService) -> None:
        self.client = client
        agents = {"desk": desk_app(), "plain": desk_app(resumable=False)}
        self.app = create_app(agents, session_service=service)
        self.url = ""

    async def start(self, start_server: Start) -> Desk:
        self.url = await start_server(self.app)
        for app in ("desk", "plain"):
            created = await self.client.post(
                f"{self.url}/apps/{app}/users/u1/sessions", json={"sessionId": "s1"}
            )
            assert created.status_code == 200, created.text
        return self

    async def sse(self, **body: Any) -> list[Frame]:
        request = {"appName": "desk", "userId": "u1", "sessionId": "s1", **body}
        async with self.client.stream("POST", self.url + "/run_sse", json=request) as response:
            assert response.status_code == 200, await response.aread()
            return await read_frames(response)

    async def post(self, route: str = "/run", **body: Any) -> httpx.Response:
        request = {"appName": "desk", "userId": "u1", "sessionId": "s1", **body}
        return await self.client.post(self.url + route, json=request)

    async def stored(self, app: str = "desk") -> dict[str, Any]:
        response = await self.client.get(self.url + SESSION.format(app=app))
        assert response.status_code == 200, response.text
        return dict(response.json())


@pytest.fixture(params=["memory", "sqlite"])
async def desk(
    request: pytest.FixtureRequest, tmp_path: Path, start_server: Start, client: httpx.AsyncClient
) -> AsyncIterator[Desk]:
    async with session_service(request.param, tmp_path) as service:
        yield await Desk(client, service).start(start_server)


def answer(call: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    part = {"functionResponse": {"id": call["id"], "name": call["name"], "response": response}}
    return {"role": "user", "parts": [part]}


async def pause_on_refund(desk: Desk) -> tuple[dict[str, Any], str]:
    """Ask for a refund; return the confirmation request the run paused on and its invocation."""
    frames = await desk.sse(newMessage=user_text("A refund, please"), streaming=True)
    terminal = frames[-1]
    assert terminal.event == "done"
    [request] = calls([f.data for f in frames[:-1]], CONFIRMATION)
    assert request["args"]["originalFunctionCall"]["args"] == REFUND_ARGS
    assert terminal.data == {
        "invocationId": terminal.data["invocationId"],
        "paused": True,
        "waitingFor": [request],
    }
    return request, str(terminal.data["invocationId"])


# -- resuming ------------------------------------------------------------------------------------


async def test_a_paused_run_resumes_by_invocation_id_and_runs_the_tool_once(desk: Desk) -> None:
    request, invocation_id = await pause_on_refund(desk)
    reply = answer(request, {"confirmed": True, "payload": {"approver": "Ann"}})
    frames = await desk.sse(invocationId=invocation_id, newMessage=reply)
    assert frames[-1].event == "done"
    assert frames[-1].data == {"invocationId": invocation_id}  # not paused any more
    assert texts([f.data for f in frames]) == ['refund answered {"order": "A-17", "refunded": 5}']

    stored = await desk.stored()
    events = stored["events"]
    assert stored["state"] == {"refunded": {**REFUND_ARGS, "payload": {"approver": "Ann"}}}
    assert {e["invocationId"] for e in events} == {invocation_id}
    assert [e for e in events if e["author"] == "user"] == [events[0], events[4]]
    assert events[4]["content"] == reply  # the answer, stored once as the user's
    assert texts(events) == ["A refund, please", *texts([f.data for f in frames])]


async def test_a_follower_of_a_paused_session_hears_that_it_paused(desk: Desk) -> None:
    request, invocation_id = await pause_on_refund(desk)
    url = desk.url + SESSION.format(app="desk") + "/events"
    async with desk.client.stream("GET", url) as response:
        frames = await read_frames(response)
    assert [f.event for f in frames] == [None] * (len(frames) - 1) + ["done"]
    assert frames[-1].data == {
        "invocationId": invocation_id,
        "paused": True,
        "waitingFor": [request],
    }


async def test_a_long_running_call_is_answered_over_plain_run(desk: Desk) -> None:
    first = await desk.post(newMessage=user_text("Open a ticket"))
    assert (first.status_code, first.headers["Run-Outcome"]) == (200, "done")
    [call] = calls(first.json(), "open_ticket")
    assert call["args"] == TICKET_ARGS
    paused_event = next(e for e in first.json() if e.get("longRunningToolIds"))
    invocation_id = paused_event["invocationId"]

    second = await desk.post(
        invocation_id=invocation_id, new_message=answer(call, {"status": "fixed"})
    )  # ADK's snake_case names are accepted too
    assert second.status_code == 200, second.text
    assert texts(second.json()) == ['open_ticket answered {"status": "fixed"}']
    events = (await desk.stored())["events"]
    assert {e["invocationId"] for e in events} == {invocation_id}


async def test_the_answer_adk_s_dev_ui_sends_resumes_the_invocation(desk: Desk) -> None:
    request, invocation_id = await pause_on_refund(desk)
    paused = (await desk.stored())["events"]
    event_id = next(e["id"] for e in paused if request["id"] in e.get("longRunningToolIds", []))
    # Exactly the body of its long-running response form: the payload box holds the original
    # call's arguments, functionCallEventId names the event; no invocationId.
    reply = answer(request, {"confirmed": True, "payload": REFUND_ARGS})
    frames = await desk.sse(
        newMessage=reply, streaming=True, stateDelta=None, functionCallEventId=event_id
    )
    assert frames[-1].event == "done"
    stored = await desk.stored()
    assert stored["state"] == {"refunded": {**REFUND_ARGS, "payload": REFUND_ARGS}}
    assert {e["invocationId"] for e in stored["events"]} == {invocation_id}


async def test_a_denied_confirmation_never_runs_the_tool(desk: Desk) -> None:
    request, invocation_id = await pause_on_refund(desk)
    response = await desk.post(
        invocationId=invocation_id, newMessage=answer(request, {"confirmed": False})
    )
    assert response.status_code == 200, response.text
    [said] = texts(response.json())
    assert said.startswith('refund answered {"error": "The user rejected the call to `refund()`')
    assert (await desk.stored())["state"] == {}


async def test_an_app_that_is_not_resumable_ignores_invocation_id_with_an_answer(
    desk: Desk,
) -> None:
    first = await desk.post(appName="plain", newMessage=user_text("Open a ticket"))
    [call] = calls(first.json(), "open_ticket")
    invocation_id = first.json()[0]["invocationId"]
    reply = answer(call, {"status": "fixed"})
    second = await desk.post(appName="plain", invocationId="e-whatever", newMessage=reply)
    assert second.status_code == 200, second.text  # as ADK's server: the answer finds the call
    assert texts(second.json()) == ['open_ticket answered {"status": "fixed"}']
    events = (await desk.stored("plain"))["events"]
    assert events[-1]["invocationId"] == invocation_id


# -- refusals ------------------------------------------------------------------------------------


async def refused(desk: Desk, detail: str, app: str = "desk", **body: Any) -> dict[str, Any]:
    """Post ``body`` to both routes: each is a 422 with ``detail``; the session is unchanged."""
    before = await desk.stored(app)
    answers = []
    for route in ("/run", "/run_sse"):
        response = await desk.post(route, appName=app, **body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"] == detail
        answers.append(response.json())
    assert answers[0] == answers[1]
    assert await desk.stored(app) == before
    return dict(answers[0])


async def test_resuming_an_invocation_the_session_does_not_hold_is_422(desk: Desk) -> None:
    data = await refused(
        desk, "invocationId: invocation 'e-nope' is not in this session", invocationId="e-nope"
    )
    assert data["invocationId"] == "e-nope"


async def test_resuming_a_finished_invocation_is_422(desk: Desk) -> None:
    request, invocation_id = await pause_on_refund(desk)
    await desk.sse(invocationId=invocation_id, newMessage=answer(request, {"confirmed": True}))
    detail = (
        f"invocationId: invocation {invocation_id!r} already finished: there is nothing to resume"
    )
    await refused(desk, detail, invocationId=invocation_id)


async def test_an_answer_to_no_open_call_is_422_naming_the_call(desk: Desk) -> None:
    request, invocation_id = await pause_on_refund(desk)
    original = request["args"]["originalFunctionCall"]  # answered already: it is not open
    stray = answer(original, {"refunded": 5})
    detail = (
        f"newMessage: function response {original['id']!r} answers no open call of invocation "
        f"{invocation_id!r}"
    )
    data = await refused(desk, detail, invocationId=invocation_id, newMessage=stray)
    assert (data["invocationId"], data["callId"]) == (invocation_id, original["id"])

    unknown = answer({"id": "adk-nope", "name": "refund"}, {"ok": True})
    before = await desk.stored()
    for route in ("/run", "/run_sse"):
        response = await desk.post(route, invocationId=invocation_id, newMessage=unknown)
        assert response.status_code == 422, response.text
        assert "'adk-nope'" in response.json()["detail"]
    assert await desk.stored() == before


async def test_a_new_text_for_a_paused_invocation_is_422(desk: Desk) -> None:
    _, invocation_id = await pause_on_refund(desk)
    detail = (
        f"invocationId: invocation {invocation_id!r} resumes without a message, with its own "
        "message again, or with function responses answering its open calls; got another message"
    )
    await refused(desk, detail, invocationId=invocation_id, newMessage=user_text("Hello?"))


async def test_a_confirmation_answer_without_a_boolean_is_422_naming_the_call(
    desk: Desk,
) -> None:
    request, invocation_id = await pause_on_refund(desk)
    reply = answer(request, {"confirmed": "yes"})
    response = await desk.post(invocationId=invocation_id, newMessage=reply)
    assert response.status_code == 422, response.text
    assert request["id"] in response.json()["detail"]
    assert "confirmed" in response.json()["detail"]


async def test_resuming_an_app_that_is_not_resumable_without_a_message_is_422(
    desk: Desk,
) -> None:
    await desk.post(appName="plain", newMessage=user_text("Open a ticket"))
    invocation_id = (await desk.stored("plain"))["events"][0]["invocationId"]
    detail = (
        f"invocationId: cannot resume invocation {invocation_id!r}: the app is not resumable "
        "(give it resumability_config=ResumabilityConfig(is_resumable=True))"
    )
    await refused(desk, detail, app="plain", invocationId=invocation_id)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, "newMessage: field required"),
        ({"invocationId": 7}, "invocationId: expected a string, got a number"),
        ({"invocationId": "e-\x00"}, "invocationId: must not contain NUL characters"),
        (
            {"invocationId": "e-1", "newMesage": {}},
            "newMesage: unknown field; did you mean 'newMessage'?",
        ),
    ],
)
async def test_a_malformed_resume_body_is_422(
    desk: Desk, body: dict[str, Any], detail: str
) -> None:
    await refused(desk, detail, **body)


class Flaky:
    """A tool that fails its first call: ``lookup`` raises once, then answers."""

    def __init__(self) -> None:
        self.calls = 0

    def lookup(self, order: str) -> dict[str, Any]:
        """Look an order up."""
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the order database is down")
        return {"order": order, "status": "shipped"}


def _lookup_reply(request: LlmRequest) -> LlmResponse:
    if any(part.function_response for part in request.contents[-1].parts):
        return LlmResponse(content=Content(role="model", parts=[Part(text="It has shipped.")]))
    call = Part.from_function_call("lookup", {"order": "A-17"})
    return LlmResponse(content=Content(role="model", parts=[call]))


async def test_an_invocation_that_failed_resumes_without_a_message(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    flaky = Flaky()
    agent = LlmAgent(name="orders", model=ScriptedModel(_lookup_reply), tools=[flaky.lookup])
    config = ResumabilityConfig(is_resumable=True)
    app = create_app(
        {"orders": App(name="orders", root_agent=agent, resumability_config=config)},
        session_service=InMemorySessionService(),
    )
    url = await start_server(app)
    await client.post(f"{url}/apps/orders/users/u1/sessions", json={"sessionId": "s1"})
    run = {"appName": "orders", "userId": "u1", "sessionId": "s1"}
    failed = await client.post(url + "/run", json={**run, "newMessage": user_text("Where?")})
    assert failed.status_code == 500
    invocation_id = failed.json()["invocationId"]
    assert failed.json()["resumable"] is True  # the error frame's data says it can resume

    resumed = await client.post(url + "/run", json={**run, "invocationId": invocation_id})
    assert resumed.status_code == 200, resumed.text
    assert texts(resumed.json()) == ["It has shipped."]
    stored = (await client.get(f"{url}/apps/orders/users/u1/sessions/s1")).json()["events"]
    assert texts(stored) == ["Where?", "It has shipped."]  # the question is not stored twice
    assert {e["invocationId"] for e in stored} == {invocation_id}
    assert flaky.calls == 2


async def test_a_cancelled_invocation_says_it_can_resume_and_does(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    gate, entered = trio.Event(), trio.Event()
    gated = Gated(name="gated", gate=gate, entered=entered)
    config = ResumabilityConfig(is_resumable=True)
    app = create_app(
        {"gated": App(name="gated", root_agent=gated, resumability_config=config)},
        session_service=InMemorySessionService(),
    )
    url = await start_server(app)
    sessions = f"{url}/apps/gated/users/u1/sessions"
    await client.post(sessions, json={"sessionId": "s1"})
    run = {"appName": "gated", "userId": "u1", "sessionId": "s1", "streaming": True}
    async with client.stream(
        "POST", url + "/run_sse", json={**run, "newMessage": user_text("go")}
    ) as response:
        frames = SseReader(response)
        invocation_id = (await frames.next()).data["invocationId"]
        await entered.wait()
        cancel = await client.post(f"{sessions}/s1/invocations/{invocation_id}/cancel")
        assert cancel.status_code == 202
        terminal = (await frames.rest())[-1]
    assert (terminal.event, terminal.data) == (
        "cancelled",
        {"invocationId": invocation_id, "resumable": True},
    )

    gate.set()
    async with client.stream(
        "POST", url + "/run_sse", json={**run, "invocationId": invocation_id}
    ) as response:
        resumed = await read_frames(response)
    assert resumed[-1].event == "done"
    assert texts([f.data for f in resumed]) == ["done"]
    stored = (await client.get(f"{sessions}/s1")).json()["events"]
    assert texts([e for e in stored if e["author"] == "user"]) == ["go"]
    assert {e["invocationId"] for e in stored} == {invocation_id}
