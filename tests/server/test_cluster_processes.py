"""Three ``trio-agents api-server`` processes on one PostgreSQL, driven as an operator's load
balancer would: turns, followers and cancels land on any process, processes die or freeze.

The apps (:mod:`tests.cluster_apps`): ``ticker`` commits a tick event at a steady pace (the
user's text says how many and how far apart), ``desk`` pauses on a long-running ticket. Every
process is a real subprocess on 127.0.0.1; waits are polls with short timeouts.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.test_processes import Frame, frames
from tests.serving import Served, postgres_uri, served

APPS = "tests/cluster_apps"
TIMEOUT = httpx.Timeout(30)
TICKER = "/apps/ticker/users/u/sessions"


@pytest.fixture(scope="module")
def servers() -> Iterator[list[Served]]:
    uri = postgres_uri()  # one schema for all three
    with contextlib.ExitStack() as stack:
        running = [
            stack.enter_context(served("api-server", APPS, "--session-service", uri))
            for _ in range(3)
        ]
        yield running
        for server in running:
            assert server.stop() == 0, server.output


@pytest.fixture
def clients(servers: list[Served]) -> Iterator[list[httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(httpx.Client(base_url=server.url, timeout=TIMEOUT))
            for server in servers
        ]


def tick_body(session_id: str, ticks: int, gap: float) -> dict[str, Any]:
    return {
        "appName": "ticker",
        "userId": "u",
        "sessionId": session_id,
        "newMessage": {"role": "user", "parts": [{"text": f"ticks={ticks} gap={gap}"}]},
        "streaming": True,
    }


class Follower:
    """``GET …/events?after=N`` read whole in a thread (started once the response began)."""

    def __init__(self, client: httpx.Client, path: str, after: int = 0) -> None:
        self.frames: list[Frame] = []
        self._began = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(client, path, after))
        self._thread.start()
        assert self._began.wait(30), "the follow request got no answer"

    def _read(self, client: httpx.Client, path: str, after: int) -> None:
        try:
            with client.stream("GET", path, params={"after": after}) as response:
                assert response.status_code == 200
                self._began.set()
                self.frames.extend(frames(response))
        finally:
            self._began.set()

    def result(self, timeout: float = 30) -> list[Frame]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the follower never ended: {self.frames}"
        return self.frames


def committed(stream: list[Frame]) -> list[Frame]:
    return [f for f in stream if f[0] == "message" and not f[2].get("partial")]


def test_a_follower_ends_with_the_run_it_follows_when_the_next_turn_starts_at_once(
    clients: list[httpx.Client],
) -> None:
    """Run 1 on A, followed from C; turn 2 goes to B the moment run 1 ended. The follower sends
    run 1's events and run 1's terminal frame, nothing of turn 2."""
    one, two, three = clients
    session_id = one.post(TICKER, json={}).json()["id"]
    with one.stream("POST", "/run_sse", json=tick_body(session_id, 3, 0.05)) as run:
        stream = frames(run)
        primary = [next(stream)]
        follower = Follower(three, f"{TICKER}/{session_id}/events")
        primary += list(stream)
    second = two.post("/run_sse", json=tick_body(session_id, 4, 0.02))
    assert second.status_code == 200, second.text
    followed = follower.result()
    stored = one.get(f"{TICKER}/{session_id}").json()["events"]

    ending = primary[-1]
    assert ending[0] == "done"
    invocation_id = ending[2]["invocationId"]
    assert followed[-1] == ending
    run_one = [event["id"] for event in stored if event["invocationId"] == invocation_id]
    assert [f[2]["id"] for f in followed[:-1]] == run_one
    assert [f[1] for f in followed[:-1]] == [str(n) for n in range(1, len(run_one) + 1)]
