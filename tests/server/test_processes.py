"""Three ``trio-agents api-server`` processes on one PostgreSQL behave as one server.

A run streams from one process; a follower reads it from a second; the cancel goes to the third,
which does not run it. Every process is a real subprocess on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.serving import APPS, Served, served_together

TIMEOUT = httpx.Timeout(30)
SESSIONS = "/apps/slow/users/u/sessions"
Frame = tuple[str, str | None, Any]
"""An SSE frame: (event name, id, data)."""


@pytest.fixture(scope="module")
def servers() -> Iterator[list[Served]]:
    with served_together(APPS) as running:
        yield running


def frames(response: httpx.Response) -> Iterator[Frame]:
    """The SSE frames of a streaming response as they arrive (comments skipped)."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line:
            if not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
            continue
        if "data" in fields:
            yield fields.get("event", "message"), fields.get("id"), json.loads(fields["data"])
        fields = {}


def next_committed(stream: Iterator[Frame]) -> Frame:
    """The next frame that is not a partial chunk."""
    for frame in stream:
        if not frame[2].get("partial"):
            return frame
    raise AssertionError("the stream ended")


def run_body(session_id: str) -> dict[str, Any]:
    return {
        "appName": "slow",
        "userId": "u",
        "sessionId": session_id,
        "newMessage": {"role": "user", "parts": [{"text": "go"}]},
        "streaming": True,
    }


def test_cancel_on_a_third_process_and_a_follower_on_a_second_see_the_run_end(
    servers: list[Served],
) -> None:
    runner, follower, canceller = (
        httpx.Client(base_url=server.url, timeout=TIMEOUT) for server in servers
    )
    with runner, follower, canceller:
        session_id = runner.post(SESSIONS, json={}).json()["id"]
        with runner.stream("POST", "/run_sse", json=run_body(session_id)) as run:
            assert run.status_code == 200
            primary = frames(run)
            first = next_committed(primary)
            invocation_id = first[2]["invocationId"]
            events = f"{SESSIONS}/{session_id}/events"
            with follower.stream("GET", events, params={"after": 0}) as followed:
                assert followed.status_code == 200
                replayed = frames(followed)
                user, working = next(replayed), next(replayed)
                assert (user[1], working[1]) == ("1", "2")
                assert working[2]["id"] == first[2]["id"]

                cancel = f"{SESSIONS}/{session_id}/invocations/{invocation_id}/cancel"
                other = f"{SESSIONS}/{session_id}/invocations/e-other/cancel"
                assert canceller.post(other).status_code == 404
                accepted = canceller.post(cancel)
                assert accepted.status_code == 202, accepted.text
                assert accepted.json() == {"invocationId": invocation_id, "status": "cancelling"}

                rest_primary = list(primary)
                rest_followed = list(replayed)
        stored = canceller.get(f"{SESSIONS}/{session_id}").json()["events"]

    assert rest_primary[-1][:1] == ("cancelled",)
    assert rest_primary[-1][2]["invocationId"] == invocation_id
    assert [f for f in rest_primary if f[0] != "message"] == [rest_primary[-1]]
    # The follower on another process: every stored event once, in order, then the same end.
    followed_events = [user, working, *rest_followed[:-1]]
    assert [f[0] for f in followed_events] == ["message"] * len(followed_events)
    assert [f[2]["id"] for f in followed_events] == [event["id"] for event in stored]
    assert [f[1] for f in followed_events] == [str(i) for i in range(1, len(stored) + 1)]
    assert rest_followed[-1] == rest_primary[-1]


def test_a_cancel_anywhere_without_a_run_in_flight_is_404(servers: list[Served]) -> None:
    with httpx.Client(base_url=servers[0].url, timeout=TIMEOUT) as one:
        session_id = one.post(SESSIONS, json={}).json()["id"]
        with httpx.Client(base_url=servers[1].url, timeout=TIMEOUT) as two:
            response = two.post(f"{SESSIONS}/{session_id}/invocations/e-1/cancel")
    assert response.status_code == 404
    assert "e-1" in response.json()["detail"]


def test_a_late_follower_on_another_process_gets_the_announced_end(
    servers: list[Served],
) -> None:
    """After a run ended on one process, a follower on another one replays the session and ends
    with the terminal frame that process announced (here ``cancelled``, not ``done``)."""
    runner, late = (httpx.Client(base_url=s.url, timeout=TIMEOUT) for s in servers[:2])
    with runner, late:
        session_id = runner.post(SESSIONS, json={}).json()["id"]
        with runner.stream("POST", "/run_sse", json=run_body(session_id)) as run:
            primary = frames(run)
            invocation_id = next_committed(primary)[2]["invocationId"]
            cancel = f"{SESSIONS}/{session_id}/invocations/{invocation_id}/cancel"
            assert late.post(cancel).status_code == 202
            ending = list(primary)[-1]
        assert ending[0] == "cancelled"
        deadline = time.monotonic() + 15  # the announcement travels through the database
        while True:
            response = late.get(f"{SESSIONS}/{session_id}/events")
            last = list(frames(response))[-1]
            if last[0] == "cancelled" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert last == ending


def test_turns_round_robin_over_the_processes_are_never_refused(servers: list[Served]) -> None:
    """Each turn goes to the next process: the previous turn's lock is always free, every
    process stores what its client received, and any process replays the whole session."""
    clients = [httpx.Client(base_url=s.url, timeout=TIMEOUT) for s in servers]
    with contextlib.ExitStack() as stack:
        for client in clients:
            stack.enter_context(client)
        fanout = "/apps/fanout/users/u/sessions"
        session_id = clients[0].post(fanout, json={}).json()["id"]
        received: list[str] = []
        for turn in range(12):
            body = {**run_body(session_id), "appName": "fanout"}
            response = clients[turn % 3].post("/run_sse", json=body)
            assert response.status_code == 200, (turn, response.text)
            got = list(frames(response))
            assert got[-1][0] == "done"
            received += [f[2]["id"] for f in got[:-1] if not f[2].get("partial")]
        for client in clients:
            stored = client.get(f"{fanout}/{session_id}").json()["events"]
            replay = list(frames(client.get(f"{fanout}/{session_id}/events")))
            assert [f[2]["id"] for f in replay[:-1]] == [event["id"] for event in stored]
            assert replay[-1][0] == "done"
    agent_events = [event["id"] for event in stored if event["author"] != "user"]
    assert received == agent_events
