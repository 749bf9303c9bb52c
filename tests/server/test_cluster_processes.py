"""Three ``trio-agents api-server`` processes on one PostgreSQL, driven as an operator's load
balancer would: turns, followers and cancels land on any process, processes die or freeze.

The apps (:mod:`tests.cluster_apps`): ``ticker`` commits a tick event at a steady pace (the
user's text says how many and how far apart), ``desk`` pauses on a long-running ticket. Every
process is a real subprocess on 127.0.0.1; waits are polls with short timeouts.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.test_processes import Frame, frames
from tests.serving import Served, served, served_together

APPS = "tests/cluster_apps"
TIMEOUT = httpx.Timeout(30)
TICKER = "/apps/ticker/users/u/sessions"


@pytest.fixture(scope="module")
def servers() -> Iterator[list[Served]]:
    with served_together(APPS) as running:
        yield running


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

    def engaged(self, primary: Primary, timeout: float = 30) -> None:
        """Wait until the follower received an event the run committed after it came (it
        follows the run in flight, not one after it)."""
        wanted = len(committed(primary.frames)) + 2  # the user's message is not streamed
        deadline = time.monotonic() + timeout
        while len(self.frames) < wanted:
            assert time.monotonic() < deadline, "the follower received nothing new"
            time.sleep(0.02)


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


class Primary:
    """A ``/run_sse`` read whole in a thread: its client stays connected whatever its server
    does (killed, frozen)."""

    def __init__(self, client: httpx.Client, body: dict[str, Any]) -> None:
        self.frames: list[Frame] = []
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(client, body), daemon=True)
        self._thread.start()
        assert self._first.wait(30), "the run never committed an event"

    def _read(self, client: httpx.Client, body: dict[str, Any]) -> None:
        try:
            with client.stream("POST", "/run_sse", json=body) as response:
                for frame in frames(response):
                    self.frames.append(frame)
                    if committed(self.frames):
                        self._first.set()
        except httpx.HTTPError:
            pass  # its server died
        finally:
            self._first.set()

    def result(self, timeout: float = 30) -> list[Frame]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the run never ended: {self.frames[-3:]}"
        return self.frames


@pytest.fixture
def doomed(servers: list[Served]) -> Iterator[tuple[Served, httpx.Client]]:
    """A fourth process on the same database, for a test to kill or freeze."""
    uri = servers[0].process.args[-3]  # type: ignore[index]
    with served("api-server", APPS, "--session-service", uri) as server:
        with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
            yield server, client
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGCONT)
            server.stop()
        else:  # killed: read what it wrote, which closes its pipe
            server.process.communicate(timeout=10)


def followed_run(
    creator: httpx.Client, runner: httpx.Client, watcher: httpx.Client
) -> tuple[str, Primary, Follower]:
    """A new session with a long run through ``runner`` and a follower through ``watcher``
    that follows it in flight."""
    session_id = creator.post(TICKER, json={}).json()["id"]
    primary = Primary(runner, tick_body(session_id, 300, 0.05))
    follower = Follower(watcher, f"{TICKER}/{session_id}/events")
    follower.engaged(primary)
    return session_id, primary, follower


def next_turn(
    client: httpx.Client, session_id: str, within: float, ticks: int = 2, gap: float = 0
) -> list[Frame]:
    """A turn sent until it is accepted (409 while the lock is held), within ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        response = client.post("/run_sse", json=tick_body(session_id, ticks, gap))
        if response.status_code == 200:
            return list(frames(response))
        assert response.status_code == 409, response.text
        assert response.headers["retry-after"] == "1"
        assert time.monotonic() < deadline, "the session stayed locked"
        time.sleep(0.05)


def test_a_run_whose_process_is_killed_frees_its_session_and_its_followers(
    doomed: tuple[Served, httpx.Client], clients: list[httpx.Client]
) -> None:
    """SIGKILL mid-run: the next turn is accepted at once on another process, the follower there
    ends with ``done`` for the dead run (not the next turn's end), and the store holds what the
    run's client received, then the next turn."""
    server, client = doomed
    one, two, _ = clients
    session_id, primary, follower = followed_run(one, client, two)
    invocation_id = committed(primary.frames)[0][2]["invocationId"]
    server.process.send_signal(signal.SIGKILL)
    second = next_turn(one, session_id, within=10)
    followed = follower.result()
    received = committed(primary.result())
    stored = one.get(f"{TICKER}/{session_id}").json()["events"]

    assert second[-1][0] == "done"
    assert followed[-1] == ("done", None, {"invocationId": invocation_id})
    dead_run = [e["id"] for e in stored if e["invocationId"] == invocation_id]
    assert [f[2]["id"] for f in followed[:-1]] == dead_run
    assert [f[2]["id"] for f in received] == dead_run[1 : 1 + len(received)]
    assert stored[: len(dead_run)] == [e for e in stored if e["invocationId"] == invocation_id]


def test_a_frozen_process_keeps_its_session_and_obeys_a_cancel_once_it_resumes(
    doomed: tuple[Served, httpx.Client], clients: list[httpx.Client]
) -> None:
    """SIGSTOP mid-run: the session stays locked (409 elsewhere), a cancel sent elsewhere is
    accepted; on SIGCONT the run ends ``cancelled``, for its client and a follower elsewhere."""
    server, client = doomed
    one, two, three = clients
    session_id, primary, follower = followed_run(one, client, two)
    invocation_id = committed(primary.frames)[0][2]["invocationId"]
    server.process.send_signal(signal.SIGSTOP)
    try:
        refused = three.post("/run_sse", json=tick_body(session_id, 1, 0))
        assert refused.status_code == 409 and refused.headers["retry-after"] == "1"
        cancel = f"{TICKER}/{session_id}/invocations/{invocation_id}/cancel"
        assert three.post(cancel).status_code == 202
    finally:
        server.process.send_signal(signal.SIGCONT)
    ending = primary.result()[-1]
    followed = follower.result()
    second = next_turn(one, session_id, within=10)

    assert ending[0] == "cancelled" and ending[2]["invocationId"] == invocation_id
    assert followed[-1] == ending
    assert second[-1][0] == "done"
