"""What a client sends cannot break the server or its store: each defect of the server trial.

Lone surrogates, deep nesting, odd ``after`` values, ids too long for a file name or holding a
``/``, duplicate event ids, artifacts on missing sessions: each a 4xx naming the problem, nothing
half written, and the store still reads back. Stores poisoned by older versions still answer.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import trio

from tests.pg_cluster import ensure_cluster
from tests.server.conftest import Start
from tests.server.helpers import user_text, weather_agent
from trio_agents import SerializationError
from trio_agents.artifacts import FileArtifactService, InMemoryArtifactService
from trio_agents.memory import InMemoryMemoryService
from trio_agents.server import create_app
from trio_agents.server._http import MAX_NAME_CHARS
from trio_agents.server._sessions import MAX_RESTORED_EVENTS
from trio_agents.sessions import InMemorySessionService, SessionService, SqliteSessionService
from trio_agents.sessions._postgres import PostgresSessionService

S = "/apps/myapp/users/u1/sessions"


def make_app(service: SessionService | None = None, **options: Any) -> Any:
    return create_app(
        {"myapp": weather_agent()},
        session_service=service or InMemorySessionService(),
        **options,
    )


async def send(
    client: httpx.AsyncClient, method: str, url: str, body: Any = None, *, raw: bytes | None = None
) -> httpx.Response:
    """Send ``body`` as ASCII JSON: lone surrogates travel as ``\\u`` escapes, as attackers send."""
    content = raw if raw is not None else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return await client.request(method, url, content=content, headers=headers)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def service(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield InMemorySessionService()
        return
    if request.param == "sqlite":
        async with SqliteSessionService(tmp_path / "s.db") as sqlite:
            yield sqlite
        return
    dsn = await trio.to_thread.run_sync(ensure_cluster)
    async with PostgresSessionService(dsn) as postgres:
        yield postgres


async def assert_app_reads_back(client: httpx.AsyncClient, url: str) -> None:
    """Every read of the app still answers: a fresh session, the list, the session itself."""
    created = await client.post(url + "/apps/myapp/users/other/sessions", json={})
    assert created.status_code == 200, created.text
    listed = await client.get(url + "/apps/myapp/users/other/sessions")
    assert listed.status_code == 200
    found = await client.get(f"{url}/apps/myapp/users/other/sessions/{created.json()['id']}")
    assert found.status_code == 200


# -- lone surrogates (D1) --------------------------------------------------------------------------


def _run(**fields: Any) -> dict[str, Any]:
    body = {"appName": "myapp", "userId": "u1", "sessionId": "s1", "newMessage": user_text("hi")}
    return {**body, **fields}


SURROGATE_CASES = [
    ("POST", S, {"state": {"app:x": "\udc80"}}, "body['state']['app:x']"),
    ("POST", S, {"sessionId": "\ud800"}, "body['sessionId']"),
    ("POST", S, {"state": {"\ud800": 1}}, "body['state']['\\ud800']"),
    ("POST", S + "/s1", {"k": "\udc80"}, "body['k']"),
    ("PATCH", S + "/s1", {"stateDelta": {"k": "\udc80"}}, "body['stateDelta']['k']"),
    ("POST", "/run", _run(appName="\ud800"), "body['appName']"),
    ("POST", "/run", _run(userId="\ud800"), "body['userId']"),
    ("POST", "/run_sse", _run(sessionId="\ud800"), "body['sessionId']"),
    ("POST", "/run", _run(newMessage=user_text("\ud800")), "body['newMessage']['parts'][0]"),
    ("POST", "/run_sse", _run(stateDelta={"k": "\udfff"}), "body['stateDelta']['k']"),
    (
        "POST",
        S + "/s1/artifacts",
        {"filename": "\ud800", "artifact": {"text": "x"}},
        "body['filename']",
    ),
    (
        "POST",
        S + "/s1/artifacts",
        {"filename": "a.txt", "artifact": {"text": "\ud800"}},
        "body['artifact']['text']",
    ),
    ("PATCH", "/apps/myapp/users/u1/memory", {"sessionId": "\ud800"}, "body['sessionId']"),
    (
        "POST",
        S,
        {"sessionId": "e1", "events": [{"author": "user", "content": user_text("\ud800")}]},
        "body['events'][0]",
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), SURROGATE_CASES)
async def test_lone_surrogates_are_400_naming_the_field_and_store_nothing(
    start_server: Start,
    client: httpx.AsyncClient,
    service: SessionService,
    method: str,
    path: str,
    body: Any,
    field: str,
) -> None:
    app = make_app(service, memory_service=InMemoryMemoryService())
    url = await start_server(app)
    await client.post(url + S, json={"sessionId": "s1", "state": {"k": 1}})
    response = await send(client, method, url + path, body)
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith(field), detail
    assert "lone surrogate" in detail
    session = (await client.get(url + S + "/s1")).json()
    assert session["state"] == {"k": 1}
    assert session["events"] == []
    assert [s["id"] for s in (await client.get(url + S)).json()] == ["s1"]
    await assert_app_reads_back(client, url)


async def test_a_poisoned_legacy_sqlite_store_still_answers(
    start_server: Start, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """Rows older versions let in (a lone surrogate in app state, a state 966 levels deep) read
    back exactly instead of failing every request of the app."""
    path = tmp_path / "s.db"
    async with SqliteSessionService(path) as service:
        await service.create_session(app_name="myapp", user_id="u1", session_id="s1")
    deep = '{"d":' + nested(966) + "}"
    with sqlite3.connect(path) as db:  # what an older version stored (ASCII-escaped JSON)
        db.execute("INSERT INTO app_state VALUES ('myapp', ?)", (json.dumps({"x": "\udc80"}),))
        db.execute("UPDATE sessions SET state = ? WHERE id = 's1'", (deep,))
    async with SqliteSessionService(path) as service:
        url = await start_server(make_app(service))
        session = await client.get(url + S + "/s1")
        assert session.status_code == 200
        assert b'"state":' + deep[:-1].encode() + b',"app:x":"\\udc80"}' in session.content
        listed = await client.get(url + S)
        assert listed.status_code == 200
        assert b'"app:x":"\\udc80"' in listed.content
        await assert_app_reads_back(client, url)


# -- deep nesting (D2) -----------------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BODY_ROUTES = [
    ("POST", S),
    ("POST", S + "/s1"),
    ("PATCH", S + "/s1"),
    ("POST", S + "/s1/artifacts"),
    ("PATCH", "/apps/myapp/users/u1/memory"),
    ("POST", "/run"),
    ("POST", "/run_sse"),
]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
@pytest.mark.parametrize("depth", [101, 969, 100_000])
async def test_deep_bodies_are_400_on_every_body_route(
    start_server: Start, client: httpx.AsyncClient, method: str, path: str, depth: int
) -> None:
    url = await start_server(make_app(memory_service=InMemoryMemoryService()))
    await client.post(url + S, json={"sessionId": "s1"})
    response = await send(client, method, url + path, raw=nested(depth).encode())
    assert response.status_code == 400
    assert "deep" in response.json()["detail"]


async def test_a_deep_state_is_refused_and_never_stored(
    start_server: Start, client: httpx.AsyncClient, service: SessionService
) -> None:
    url = await start_server(make_app(service))
    for depth in (966, 200):
        raw = f'{{"sessionId":"d","state":{{"k":{nested(depth)}}}}}'.encode()
        response = await send(client, "POST", url + S, raw=raw)
        assert response.status_code == 400
        assert "deep" in response.json()["detail"]
        assert (await client.get(url + S + "/d")).status_code == 404
    assert response.json()["detail"].startswith("body['state']['k']")
    ok = await send(client, "POST", url + S, raw=f'{{"state":{{"k":{nested(90)}}}}}'.encode())
    assert ok.status_code == 200
    found = await client.get(f"{url}{S}/{ok.json()['id']}")
    assert found.json()["state"] == {"k": json.loads(nested(90))}


# -- after / Last-Event-ID (D3) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "headers", "name"),
    [
        ("?after=%C2%B2", {}, "after"),
        ("?after=" + "9" * 40, {}, "after"),
        ("?after=-1", {}, "after"),
        ("", {"Last-Event-ID": "1" + "0" * 4400}, "Last-Event-ID"),
        ("", {"Last-Event-ID": "x"}, "Last-Event-ID"),
    ],
)
async def test_bad_after_values_are_422(
    start_server: Start, client: httpx.AsyncClient, query: str, headers: Any, name: str
) -> None:
    url = await start_server(make_app())
    await client.post(url + S, json={"sessionId": "s1"})
    response = await client.get(f"{url}{S}/s1/events{query}", headers=headers)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(name)


# -- ids the file system cannot hold (D4), ids with "/" (D11) --------------------------------------


LONG = "x" * 300
EUROS = "€" * 100


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{S}/{LONG}/artifacts"),
        ("GET", f"/apps/myapp/users/{LONG}/sessions/s1/artifacts"),
        ("GET", f"{S}/s1/artifacts/{LONG}"),
        ("GET", f"{S}/s1/artifacts/{EUROS}"),
        ("GET", f"{S}/s1/artifacts/{LONG}/versions"),
        ("GET", f"{S}/s1/artifacts/{LONG}/versions/0"),
        ("DELETE", f"{S}/s1/artifacts/{LONG}"),
        ("DELETE", f"{S}/{EUROS}/artifacts/a.txt"),
    ],
)
async def test_ids_too_long_for_file_artifacts_are_400(
    start_server: Start, client: httpx.AsyncClient, tmp_path: Path, method: str, path: str
) -> None:
    url = await start_server(make_app(artifact_service=FileArtifactService(tmp_path)))
    await client.post(url + S, json={"sessionId": "s1"})
    response = await client.request(method, url + path)
    assert response.status_code == 400
    assert "too long" in response.json()["detail"]


async def test_a_filename_too_long_is_400_and_nothing_is_written(
    start_server: Start, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    url = await start_server(make_app(artifact_service=FileArtifactService(root)))
    await client.post(url + S, json={"sessionId": "s1"})
    for name in (LONG, "é" * 100):
        body = {"filename": name, "artifact": {"text": "x"}}
        response = await client.post(url + S + "/s1/artifacts", json=body)
        assert response.status_code == 400
        assert response.json()["detail"].startswith("filename:")
    assert not [p for p in root.rglob("*") if p.is_file()]


async def test_a_session_id_with_a_slash_is_422(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(make_app())
    response = await client.post(url + S, json={"sessionId": "a/b"})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("sessionId:")
    assert (await client.get(url + S)).json() == []


async def test_a_session_id_no_path_could_name_is_422_and_not_stored(
    start_server: Start, client: httpx.AsyncClient, service: SessionService
) -> None:
    """An id longer than a request head could carry once percent-encoded would be stored, listed,
    and never reachable again (431 on every route naming it)."""
    url = await start_server(make_app(service))
    response = await client.post(url + S, json={"sessionId": "é" * (MAX_NAME_CHARS + 1)})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("sessionId:")
    assert (await client.get(url + S)).json() == []
    longest = "é" * MAX_NAME_CHARS  # the longest allowed: every route still reaches it
    assert (await client.post(url + S, json={"sessionId": longest})).status_code == 200
    assert (await client.get(f"{url}{S}/{quote(longest)}")).json()["id"] == longest
    assert (await client.delete(f"{url}{S}/{quote(longest)}")).status_code == 200


@pytest.mark.parametrize("root", [None, "artifacts"])
async def test_an_artifact_filename_no_path_could_name_is_422_and_not_stored(
    start_server: Start, client: httpx.AsyncClient, tmp_path: Path, root: str | None
) -> None:
    artifacts = FileArtifactService(tmp_path / root) if root else InMemoryArtifactService()
    url = await start_server(make_app(artifact_service=artifacts))
    await client.post(url + S, json={"sessionId": "s1"})
    body = {"filename": "x" * (MAX_NAME_CHARS + 1), "artifact": {"text": "x"}}
    response = await client.post(url + S + "/s1/artifacts", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("filename:")
    assert (await client.get(url + S + "/s1/artifacts")).json() == []


# -- restored histories (D9, D10) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "status", "detail"),
    [
        ([{"id": "x", "author": "user"}, {"id": "x", "author": "user"}], 422, "events[1].id"),
        ([{"author": "user", "customMetadata": {"m": json.loads(nested(99))}}], 400, "body"),
        ([{"author": "user", "content": user_text("\ud800")}], 400, "body['events'][0]"),
    ],
)
async def test_a_refused_history_leaves_no_session(
    start_server: Start,
    client: httpx.AsyncClient,
    service: SessionService,
    events: list[Any],
    status: int,
    detail: str,
) -> None:
    url = await start_server(make_app(service))
    response = await send(client, "POST", url + S, {"sessionId": "e1", "events": events})
    assert response.status_code == status
    assert response.json()["detail"].startswith(detail)
    assert (await client.get(url + S + "/e1")).status_code == 404
    retry = await client.post(url + S, json={"sessionId": "e1", "events": [{"author": "user"}]})
    assert retry.status_code == 200
    assert [e["author"] for e in retry.json()["events"]] == ["user"]


class RefusingAppends(InMemorySessionService):
    """A store that refuses events by one author after the session exists (a late failure)."""

    async def append_event(self, session: Any, event: Any) -> Any:
        if event.author == "refused":
            raise SerializationError("event['author'] is refused by this store", path="event")
        return await super().append_event(session, event)


async def test_a_store_refusing_a_restored_event_leaves_no_session(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(make_app(RefusingAppends()))
    events = [{"author": "user"}, {"author": "refused"}]
    response = await client.post(url + S, json={"sessionId": "e1", "events": events})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("event['author']")
    assert (await client.get(url + S + "/e1")).status_code == 404
    retry = await client.post(url + S, json={"sessionId": "e1", "events": events[:1]})
    assert retry.status_code == 200


# -- artifacts belong to a session (D13) -----------------------------------------------------------


async def test_artifacts_need_their_session_and_go_with_it(
    start_server: Start, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    url = await start_server(make_app(artifact_service=FileArtifactService(root)))
    nobody = "/apps/myapp/users/nobody/sessions/never-created/artifacts"
    refused = await client.post(url + nobody, json={"filename": "a.txt", "artifact": {"text": "x"}})
    assert refused.status_code == 404
    assert refused.json()["detail"] == "Session not found"
    assert not root.exists() or not [p for p in root.rglob("*") if p.is_file()]

    await client.post(url + S, json={"sessionId": "s1"})
    arts = url + S + "/s1/artifacts"
    for name in ("a.txt", "user:profile.txt"):
        saved = await client.post(arts, json={"filename": name, "artifact": {"text": name}})
        assert saved.status_code == 200
    assert (await client.delete(url + S + "/s1")).status_code == 200
    await client.post(url + S, json={"sessionId": "s1"})
    assert (await client.get(arts)).json() == ["user:profile.txt"]


# -- NUL characters in ids (no store keeps one; PostgreSQL refuses them outright) -----------------


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "detail"),
    [
        ("GET", S + "/a%00b", None, 400, "path:"),
        ("DELETE", S + "/a%00b", None, 400, "path:"),
        ("GET", "/apps/myapp/users/u%00/sessions", None, 400, "path:"),
        ("GET", S + "/s1/artifacts/a%00.txt", None, 400, "path:"),
        ("POST", S, {"sessionId": "a\x00b"}, 400, "session_id"),
        ("POST", "/run", _run(sessionId="a\x00b"), 422, "sessionId:"),
        ("POST", "/run_sse", _run(userId="\x00"), 422, "userId:"),
        ("PATCH", "/apps/myapp/users/u1/memory", {"sessionId": "\x00"}, 422, "sessionId:"),
    ],
)
async def test_nul_characters_in_ids_are_refused(
    start_server: Start,
    client: httpx.AsyncClient,
    service: SessionService,
    method: str,
    path: str,
    body: Any,
    status: int,
    detail: str,
) -> None:
    url = await start_server(make_app(service, memory_service=InMemoryMemoryService()))
    await client.post(url + S, json={"sessionId": "s1"})
    response = await client.request(method, url + path, json=body)
    assert response.status_code == status
    assert response.json()["detail"].startswith(detail)
    await assert_app_reads_back(client, url)


async def test_a_history_of_more_events_than_a_session_may_be_created_with_is_422(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    """Checked, stored and answered on the server's one thread, 200,000 events of a 4 MB body
    stalled every other request for seconds."""
    url = await start_server(make_app())
    events = [{"author": "user"}] * (MAX_RESTORED_EVENTS + 1)
    response = await client.post(url + S, json={"sessionId": "e1", "events": events})
    assert response.status_code == 422
    assert response.json()["detail"] == (
        f"events: {MAX_RESTORED_EVENTS + 1} events, more than the {MAX_RESTORED_EVENTS} "
        "a session may be created with"
    )
    assert (await client.get(url + S)).json() == []
    created = await client.post(url + S, json={"sessionId": "e1", "events": events[1:]})
    assert len(created.json()["events"]) == MAX_RESTORED_EVENTS


class GatedSaves(InMemoryArtifactService):
    """Saves wait for ``gate`` (``saving`` is set once one waits): a deletion gets in between."""

    def __init__(self) -> None:
        super().__init__()
        self.saving = trio.Event()
        self.gate = trio.Event()

    async def save_artifact(self, **ids: Any) -> int:
        self.saving.set()
        await self.gate.wait()
        return await super().save_artifact(**ids)


@pytest.mark.parametrize(("filename", "kept"), [("a.txt", []), ("user:a.txt", ["user:a.txt"])])
async def test_a_session_deleted_while_an_artifact_is_saved_leaves_it_to_no_session(
    start_server: Start, client: httpx.AsyncClient, filename: str, kept: list[str]
) -> None:
    """The save had checked the session before the deletion and wrote after it: a new session
    of the same id inherited the file (one in about ten such races over HTTP)."""
    artifacts = GatedSaves()
    url = await start_server(make_app(artifact_service=artifacts))
    await client.post(url + S, json={"sessionId": "s1"})
    saved: list[httpx.Response] = []

    async def save() -> None:
        body = {"filename": filename, "artifact": {"text": "x"}}
        saved.append(await client.post(url + S + "/s1/artifacts", json=body))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(save)
        await artifacts.saving.wait()
        assert (await client.delete(url + S + "/s1")).status_code == 200
        artifacts.gate.set()
    assert saved[0].status_code == (200 if kept else 404)
    await client.post(url + S, json={"sessionId": "s1"})
    assert (await client.get(url + S + "/s1/artifacts")).json() == kept
