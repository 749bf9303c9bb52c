"""The routes of a run (create a session, ``/run_sse``, ``/run``) are served without Starlette's
layers: every answer is the one the whole stack gives, which an app with middleware of its own
(here a pass-through one, added after ``create_app``) still goes through."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.server.conftest import Start
from tests.server.helpers import weather_agent
from trio_agents.server import create_app
from trio_agents.sessions import InMemorySessionService

S = "/apps/myapp/users/u1/sessions"


class Broken(InMemorySessionService):
    """A store that fails to create the session ``broken``."""

    async def create_session(self, **kwargs: Any) -> Any:
        if kwargs.get("session_id") == "broken":
            raise RuntimeError("the store broke")
        return await super().create_session(**kwargs)


class PassThrough:
    """Middleware that changes nothing: with it, every request goes through Starlette's stack."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class Marking(PassThrough):
    """Middleware that adds ``x-marked: 1`` to every response."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def marked(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"x-marked", b"1")]}
            await send(message)

        await self.app(scope, receive, marked)


def run_body(session_id: str, **extra: Any) -> dict[str, Any]:
    message = {"role": "user", "parts": [{"text": "hi"}]}
    body = {"appName": "myapp", "userId": "u1", "sessionId": session_id, "newMessage": message}
    return {**body, **extra}


REQUESTS = [
    ("POST", S, {"sessionId": "s1"}),
    ("POST", S, {"sessionId": "s1", "state": []}),  # 422
    ("POST", S, {"sessionId": "a/b"}),  # 422
    ("POST", S, {"sessionId": "broken"}),  # the store fails: a plain 500
    ("POST", "/apps/nope/users/u1/sessions", {}),  # 404
    ("POST", "/apps/myapp/users/u%00/sessions", {}),  # NUL: 400
    ("GET", "/run_sse", None),  # 405
    ("POST", "/run_sse", run_body("missing")),  # 404
    ("POST", "/run_sse", run_body("s1", newMessage=3)),  # 422
    ("POST", "/run_sse", run_body("s1", onDisconnect="later")),  # 422
    ("POST", "/run", run_body("missing")),
    ("POST", "/run", {"appName": "myapp"}),
]


async def answers(url: str, client: httpx.AsyncClient) -> list[tuple[int, list[Any], bytes]]:
    """Each request of ``REQUESTS`` answered: status, headers but ``date``, body (a session's
    time of creation and the length it makes vary blanked out)."""
    seen = []
    for method, path, body in REQUESTS:
        response = await client.request(method, url + path, json=body)
        content = re.sub(rb'"lastUpdateTime":[0-9.e+-]+', b'"lastUpdateTime":0', response.content)
        varying = ("date", "content-length") if content != response.content else ("date",)
        headers = [(k, v) for k, v in response.headers.multi_items() if k not in varying]
        seen.append((response.status_code, headers, content))
    return seen


async def test_direct_routes_answer_as_the_whole_stack(
    start_server: Start, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    direct = create_app({"myapp": weather_agent()}, session_service=Broken())
    stacked = create_app({"myapp": weather_agent()}, session_service=Broken())
    stacked.add_middleware(PassThrough)
    got = await answers(await start_server(direct), client)
    expected = await answers(await start_server(stacked), client)
    assert got == expected
    statuses = [status for status, _, _ in got]
    assert statuses == [200, 422, 422, 500, 404, 400, 405, 404, 422, 422, 404, 422]
    assert got[3][1:] == expected[3][1:]
    assert got[3][2] == b"Internal Server Error"
    failures = [r for r in caplog.records if "the app failed" in r.getMessage()]
    assert len(failures) == 2  # the plain 500, under either app, is logged by the server


async def test_a_run_served_directly_streams_as_through_the_stack(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    bodies = []
    for extra in ((), (PassThrough,)):
        app = create_app({"myapp": weather_agent()}, session_service=InMemorySessionService())
        for middleware in extra:
            app.add_middleware(middleware)
        url = await start_server(app)
        await client.post(url + S, json={"sessionId": "s1"})
        response = await client.post(url + "/run_sse", json=run_body("s1"))
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        bodies.append(response.text.count("data: "))
    assert bodies[0] == bodies[1] > 1


async def test_middleware_added_after_create_app_sees_the_direct_routes(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    app = create_app({"myapp": weather_agent()}, session_service=InMemorySessionService())
    app.add_middleware(Marking)
    url = await start_server(app)
    created = await client.post(url + S, json={})
    assert created.headers["x-marked"] == "1"
    run = await client.post(url + "/run_sse", json=run_body(created.json()["id"]))
    assert run.headers["x-marked"] == "1"


async def test_an_app_in_debug_mode_answers_failures_with_starlettes_traceback(
    start_server: Start, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app({"myapp": weather_agent()}, session_service=Broken())
    app.debug = True
    url = await start_server(app)
    failed = await client.post(url + S, json={"sessionId": "broken"})
    assert failed.status_code == 500
    assert "RuntimeError: the store broke" in failed.text
