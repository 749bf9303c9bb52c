"""A served run whose lock connection breaks and whose lock another process takes meanwhile:
the server (watching its service's lock connections for its lifespan) ends the run's stream with
an ``error`` frame naming the lost lease, rather than letting it go on without its lease."""

from __future__ import annotations

import contextlib
import uuid

import httpx
import pytest
import trio

from tests.pg_cluster import ensure_cluster
from tests.server.conftest import Start
from tests.server.helpers import Gated, SseReader, user_text
from tests.sessions.test_postgres_lease_lost import DEADLINE, terminate_and_take
from trio_agents.server import create_app
from trio_agents.sessions import PostgresSessionService
from trio_agents.sessions._postgres import _lock_id


@pytest.fixture
async def dsn() -> str:
    name = f"served_{uuid.uuid4().hex[:8]}"
    return f"{await trio.to_thread.run_sync(ensure_cluster)} application_name={name}"


async def test_a_served_run_that_loses_its_lease_ends_with_an_error_frame(
    dsn: str, start_server: Start, client: httpx.AsyncClient
) -> None:
    """The server watches its service's lock connections for its lifespan (the service is
    not entered here): the run's stream ends with an ``error`` frame naming the lost lease."""
    service = PostgresSessionService(dsn)
    try:
        url = await start_server(
            create_app({"gated": Gated(name="gated")}, session_service=service)
        )
        sessions = "/apps/gated/users/u/sessions"
        assert (await client.post(url + sessions, json={"sessionId": "s"})).status_code == 200
        lock = _lock_id(await service._ensure_open(), ("gated", "u", "s"))
        body = {"appName": "gated", "userId": "u", "sessionId": "s", "newMessage": user_text("hi")}
        with trio.fail_after(DEADLINE), contextlib.ExitStack() as thieves:
            async with client.stream("POST", url + "/run_sse", json=body) as running:
                frames = SseReader(running)
                await frames.next()  # the agent's call: it now waits forever
                pid = await service.lease_holder(app_name="gated", user_id="u", session_id="s")
                assert pid is not None
                thieves.enter_context(terminate_and_take(dsn, pid, lock))
                rest = await frames.rest()
        assert rest[-1].event == "error"
        assert "LeaseLostError" in rest[-1].data["error"]
        assert "Session s" in rest[-1].data["error"]
    finally:
        await service.aclose()
