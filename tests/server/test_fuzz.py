"""Hypothesis sends generated bodies, ids and headers to every route of a real server.

The server is ``trio-agents api-server`` in its own process on 127.0.0.1, with SQLite (then
PostgreSQL) sessions, file artifacts and a memory service. Whatever arrives: no 5xx, every 4xx
carries a ``detail``, and afterwards every session of the fuzzed users still reads back. The
example count is bounded (``TRIO_AGENTS_FUZZ_EXAMPLES``, 100 by default, per store).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.serving import APPS, Served, postgres_uri, served

EXAMPLES = int(os.environ.get("TRIO_AGENTS_FUZZ_EXAMPLES", "100"))
APP = "fanout"  # finishes its runs on its own (the other app runs until cancelled)
USERS = ("u1", "u2")

SESSION = "/apps/{app}/users/{user}/sessions/{session}"
ARTIFACT = SESSION + "/artifacts/{name}"
ROUTES = [
    ("GET", "/health"),
    ("GET", "/version"),
    ("GET", "/list-apps"),
    ("GET", "/apps/{app}/users/{user}/sessions"),
    ("POST", "/apps/{app}/users/{user}/sessions"),
    ("GET", SESSION),
    ("POST", SESSION),
    ("DELETE", SESSION),
    ("PATCH", SESSION),
    ("GET", SESSION + "/events"),
    ("POST", SESSION + "/invocations/{invocation}/cancel"),
    ("GET", SESSION + "/artifacts"),
    ("POST", SESSION + "/artifacts"),
    ("GET", ARTIFACT + "/versions"),
    ("GET", ARTIFACT + "/versions/{version}"),
    ("GET", ARTIFACT),
    ("DELETE", ARTIFACT),
    ("PATCH", "/apps/{app}/users/{user}/memory"),
    ("POST", "/run"),
    ("POST", "/run_sse"),
]

# -- what a hostile client sends ------------------------------------------------------------------

any_text = st.text(st.characters(exclude_categories=()), max_size=12)
odd_ids = st.sampled_from(
    ["..", ".", "a/b", "x" * 300, "€" * 100, "\ud800", "\x00", "user:..", " s1 ", "", "%"]
)
ids = st.one_of(st.sampled_from(["s1", "s2", "u1", "u2", APP]), odd_ids, any_text)


def segment(text: str) -> str:
    """A path segment carrying any text (lone surrogates as the bytes UTF-8 would give them)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="") or "%20"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=10,
)


def deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


messages = st.one_of(
    st.builds(lambda t: {"role": "user", "parts": [{"text": t}]}, any_text),
    st.fixed_dictionaries({"parts": st.lists(st.dictionaries(any_text, json_values, max_size=2))}),
    json_values,
)
events = st.lists(
    st.fixed_dictionaries(
        {"author": st.sampled_from(["user", "agent"]) | any_text},
        optional={"id": st.sampled_from(["x", "y"]) | any_text, "content": messages},
    ),
    max_size=3,
)
fields = st.fixed_dictionaries(
    {},
    optional={
        "appName": st.just(APP) | ids,
        "userId": st.sampled_from(USERS) | ids,
        "sessionId": st.sampled_from(["s1", "s2"]) | ids,
        "newMessage": messages,
        "state": st.dictionaries(any_text, json_values, max_size=3) | json_values,
        "stateDelta": st.dictionaries(any_text, json_values, max_size=3) | json_values,
        "events": events | json_values,
        "filename": st.sampled_from(["a.txt", "user:b.txt"]) | ids,
        "artifact": st.just({"text": "x"}) | messages,
        "onDisconnect": st.sampled_from(["cancel", "detach"]) | any_text,
        "streaming": st.booleans() | json_values,
    },
)
bodies = st.one_of(
    st.none(),
    fields.map(lambda body: json.dumps(body).encode()),  # ASCII: surrogates as \u escapes
    json_values.map(lambda value: json.dumps(value).encode()),
    st.integers(90, 1100).map(lambda depth: json.dumps({"state": {"k": deep(depth)}}).encode()),
    st.binary(max_size=40),
)
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(
    lambda text: text.strip() or "x"  # what HTTP lets a header carry
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "Last-Event-ID": header_text | st.just("1" + "0" * 4400),
        "Content-Type": st.sampled_from(["application/json", "text/plain"]) | header_text,
    },
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes | None, dict[str, str]]:
    method, template = draw(st.sampled_from(ROUTES))
    path = template.format(
        app=segment(draw(st.just(APP) | ids)),
        user=segment(draw(st.sampled_from(USERS) | ids)),
        session=segment(draw(st.sampled_from(["s1", "s2"]) | ids)),
        name=segment(draw(st.sampled_from(["a.txt", "user:b.txt"]) | ids)),
        version=segment(draw(st.sampled_from(["0", "latest", "99"]) | ids)),
        invocation=segment(draw(ids)),
    )
    queries = ["", "?after=1", "?version=0", "?detailed=true"]
    query = draw(st.sampled_from(queries) | ids)
    if query not in queries:  # a generated id, quoted (raw, "?\x1f" is no URL a client sends)
        query = "?after=" + segment(query)
    body = draw(bodies) if method in ("POST", "PATCH") else None
    return method, path + query, body, draw(headers)


# -- the server ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    sessions = f"sqlite:///{root / 'sessions.db'}" if request.param == "sqlite" else postgres_uri()
    options = [
        "--session-service",
        sessions,
        "--artifact-service",
        f"file://{root / 'artifacts'}",
        "--memory-service",
        "memory://",
        "--body-read-timeout",
        "5",
    ]
    with served("api-server", APPS, *options) as running:
        with httpx.Client(base_url=running.url, timeout=30) as http:
            for user in USERS:
                http.post(f"/apps/{APP}/users/{user}/sessions", json={"sessionId": "s1"})
        yield running
        assert running.stop() == 0


def check_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if 400 <= response.status_code < 500:
        detail = response.json()["detail"]
        assert isinstance(detail, str) and detail


def check_store_reads_back(http: httpx.Client) -> None:
    for user in USERS:
        listed = http.get(f"/apps/{APP}/users/{user}/sessions")
        assert listed.status_code == 200, listed.text[:300]
        for session in listed.json():
            found = http.get(f"/apps/{APP}/users/{user}/sessions/{segment(session['id'])}")
            assert found.status_code in (200, 404), found.text[:300]  # 404: a "/" in an old id


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(request=requests())
def test_no_request_breaks_the_server_or_the_store(
    server: Served, request: tuple[str, str, bytes | None, dict[str, str]]
) -> None:
    method, path, body, sent_headers = request
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.request(method, path, content=body, headers=sent_headers)
        check_answer(response)
    # A new connection: a refused request's unread body may end its connection (the server
    # closes it after answering; reusing it races with that close).
    with httpx.Client(base_url=server.url, timeout=30) as http:
        check_store_reads_back(http)


def test_the_fuzzed_server_still_runs_agents(server: Served) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.post(f"/apps/{APP}/users/after/sessions", json={"sessionId": "s"})
        run = {
            "appName": APP,
            "userId": "after",
            "sessionId": "s",
            "newMessage": {"role": "user", "parts": [{"text": "go"}]},
        }
        response = http.post("/run", json=run)
        assert response.status_code == 200
        stored = http.get(f"/apps/{APP}/users/after/sessions/s").json()
        assert [e["id"] for e in stored["events"][1:]] == [e["id"] for e in response.json()]
