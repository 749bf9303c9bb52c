"""Property tests of the HTTP API's frames (ARCHITECTURE §3 "HTTP API", §2 rules 2, 3, 7).

Random trees of workflow agents over scripted leaves (``tests/apps.py``) run through a real server
under many Trio schedules, and the client stops in every way it can: it reads to the end, cancels
through the cancel route after k frames, or disconnects after k frames (policy ``cancel`` or
``detach``). Whatever happened, the frames the client saw, the frames a follower sees and the
session store tell one story.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx
import trio
from hypothesis import given, note, strategies as st

from tests.apps import Probe, agent_trees, describe_tree
from tests.server.helpers import HTTPX_LEFT_EARLY, Frame, SseReader, read_frames, user_text
from trio_agents import Event
from trio_agents.server import create_app, serve
from trio_agents.sessions import InMemorySessionService

pytestmark = HTTPX_LEFT_EARLY

OUTCOMES = ("complete", "cancel", "disconnect", "detach")
ENDINGS = {
    "complete": {"done", "error"},
    "cancel": {"done", "error", "cancelled"},  # the run may end before the cancel arrives
    "disconnect": {"done", "error", "cancelled"},
    "detach": {"done", "error"},
}


async def _run_as_client(
    client: httpx.AsyncClient, url: str, outcome: str, k: int, streaming: bool
) -> list[Frame]:
    """Start a run; stop reading as ``outcome`` says after ``k`` frames; return what was read."""
    body = {
        "appName": "app",
        "userId": "u",
        "sessionId": "s",
        "newMessage": user_text("go"),
        "streaming": streaming,
        "onDisconnect": "detach" if outcome == "detach" else "cancel",
    }
    received: list[Frame] = []
    async with client.stream("POST", url + "/run_sse", json=body) as response:
        assert response.status_code == 200
        if outcome in ("disconnect", "detach") and k == 0:
            return received
        async for frame in SseReader(response):
            received.append(frame)
            if len(received) != k or frame.event is not None:
                continue
            if outcome == "cancel":
                invocation = frame.data["invocationId"]
                cancel = f"{url}/apps/app/users/u/sessions/s/invocations/{invocation}/cancel"
                assert (await client.post(cancel)).status_code in (202, 404)
            elif outcome != "complete":
                break
    return received


def _check_event_frames(frames: list[Frame], stored: list[Event]) -> None:
    """Committed frames carry their commit sequence; partial ones the last committed one."""
    last = 0
    stored_ids = {e.id for e in stored}
    for frame in frames:
        assert frame.event is None
        if frame.data.get("partial"):
            assert frame.id == last or last == 0
            assert frame.data["id"] not in stored_ids
        else:
            assert frame.id is not None
            assert frame.id > last
            assert stored[frame.id - 1].id == frame.data["id"]
            last = frame.id


def _committed(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.event is not None or not f.data.get("partial")]


@given(
    data=st.data(),
    _seed=st.random_module(),
    outcome=st.sampled_from(OUTCOMES),
    k=st.integers(min_value=0, max_value=10),
    streaming=st.booleans(),
    resume_at=st.integers(min_value=0, max_value=40),
)
async def test_frames_agree_with_the_store_however_the_client_stops(
    data: st.DataObject, _seed: Any, outcome: str, k: int, streaming: bool, resume_at: int
) -> None:
    root = data.draw(agent_trees(Probe()))
    note(describe_tree(root))
    service = InMemorySessionService()
    app = create_app({"app": root}, session_service=service)
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(functools.partial(serve, app, port=0, graceful_timeout=0.1))
        url = urls[0]
        async with httpx.AsyncClient(timeout=30) as client:
            await client.post(url + "/apps/app/users/u/sessions", json={"sessionId": "s"})
            received = await _run_as_client(client, url, outcome, k, streaming)
            events_url = url + "/apps/app/users/u/sessions/s/events"
            async with client.stream("GET", events_url) as response:
                followed = await read_frames(response)
            async with client.stream("GET", events_url, params={"after": resume_at}) as response:
                resumed = await read_frames(response)
        nursery.cancel_scope.cancel()
    session = await service.get_session(app_name="app", user_id="u", session_id="s")
    assert session is not None
    stored = list(session.events)
    note(f"received={received}\nstored={stored}\nfollowed={followed}")

    # A follower from the start sees exactly the stored history, then one terminal frame; one
    # that catches a detached run still going also sees its partial chunks, in their place.
    *seen, terminal = followed
    _check_event_frames(seen, stored)
    history = _committed(seen)
    assert [f.data["id"] for f in history] == [e.id for e in stored]
    assert [f.id for f in history] == list(range(1, len(stored) + 1))
    assert terminal.event in ENDINGS[outcome]
    assert terminal.data["invocationId"] == stored[0].invocation_id
    assert (terminal.event == "error") == any(e.error_code for e in stored)
    # Resuming after any seq gives the rest of the history and the same terminal frame.
    assert _committed(resumed) == [*history[resume_at:], terminal]

    # What the client read is consistent with the store: one order, seqs, partial chunks apart.
    terminals = [f for f in received if f.event is not None]
    _check_event_frames([f for f in received if f.event is None], stored)
    if outcome in ("complete", "cancel"):
        # It read to the end: every event of the run (aftermath included), then the terminal.
        assert terminals == [terminal]
        assert received[-1] == terminal
        committed = [
            f.data["id"] for f in received if f.event is None and not f.data.get("partial")
        ]
        assert committed == [e.id for e in stored[1:]]
    else:
        assert terminals in ([], [terminal])

    # Rule 7: whatever stopped the run, no call is left without a response.
    calls = {c.id for e in stored for c in e.get_function_calls()}
    answers = {r.id for e in stored for r in e.get_function_responses()}
    assert calls <= answers
    assert app.state.core.live == {}
    assert app.state.core.detached_runs == 0
