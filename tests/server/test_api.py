"""The HTTP API's plain routes against a real server: sessions, artifacts, errors, auth, CORS.

Scenario ids (S-API-n, R-API) refer to ADK-SEMANTICS.md §3.17 and §4.2.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.server.conftest import Start
from tests.server.helpers import weather_agent
from trio_agents.artifacts import InMemoryArtifactService
from trio_agents.memory import InMemoryMemoryService
from trio_agents.server import create_app
from trio_agents.sessions import InMemorySessionService, SqliteSessionService

S = "/apps/myapp/users/u1/sessions"


def make_app(**options: Any) -> Any:
    options.setdefault("session_service", InMemorySessionService())
    return create_app({"myapp": weather_agent()}, **options)


@pytest.fixture
async def url(start_server: Start) -> str:
    return await start_server(make_app())


async def test_health_and_list_apps_s_api_1(url: str, client: httpx.AsyncClient) -> None:
    assert (await client.get(url + "/health")).json() == {"status": "ok"}
    assert (await client.get(url + "/list-apps")).json() == ["myapp"]
    detailed = (await client.get(url + "/list-apps?detailed=true")).json()
    assert detailed == {
        "apps": [
            {"name": "myapp", "rootAgentName": "weather", "description": "", "language": "python"}
        ]
    }
    version = (await client.get(url + "/version")).json()
    assert version["language"] == "python"


async def test_create_session_with_id_and_state_then_duplicate_s_api_2(
    url: str, client: httpx.AsyncClient
) -> None:
    body = {"sessionId": "s1", "state": {"k": 1, "user:p": 2}}
    created = await client.post(url + S, json=body)
    assert created.status_code == 200
    session = created.json()
    assert list(session) == ["id", "appName", "userId", "state", "events", "lastUpdateTime"]
    assert session["id"] == "s1"
    assert session["state"] == {"k": 1, "user:p": 2}
    assert session["events"] == []
    again = await client.post(url + S, json={"sessionId": "s1"})
    assert again.status_code == 409
    assert again.json() == {"detail": "Session already exists: s1"}


async def test_snake_case_body_is_accepted(url: str, client: httpx.AsyncClient) -> None:
    created = await client.post(url + S, json={"session_id": "snake", "state": {"a": 1}})
    assert created.json()["id"] == "snake"


async def test_deleted_session_then_new_one_keeps_user_state_s_api_8(
    url: str, client: httpx.AsyncClient
) -> None:
    await client.post(url + S, json={"sessionId": "s1", "state": {"k": 1, "user:p": 2}})
    deleted = await client.delete(f"{url}{S}/s1")
    assert deleted.status_code == 200
    assert deleted.json() is None
    assert (await client.get(f"{url}{S}/s1")).status_code == 404
    fresh = (await client.post(url + S)).json()
    assert fresh["id"] != "s1"
    assert fresh["state"] == {"user:p": 2}


async def test_get_and_list_sessions(url: str, client: httpx.AsyncClient) -> None:
    await client.post(url + S, json={"sessionId": "a", "state": {"k": 1}})
    await client.post(url + S, json={"sessionId": "b"})
    listed = (await client.get(url + S)).json()
    assert [s["id"] for s in listed] == ["a", "b"]
    assert all(s["events"] == [] for s in listed)
    missing = await client.get(f"{url}{S}/nope")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Session not found"}


async def test_patch_state_is_stored_as_a_p_event_s_api_5(
    url: str, client: httpx.AsyncClient
) -> None:
    await client.post(url + S, json={"sessionId": "s1", "state": {"k": 1}})
    patched = await client.patch(f"{url}{S}/s1", json={"stateDelta": {"z": 9}})
    assert patched.status_code == 200
    assert patched.json()["state"] == {"k": 1, "z": 9}
    (event,) = (await client.get(f"{url}{S}/s1")).json()["events"]
    assert event["invocationId"].startswith("p-")
    assert event["author"] == "user"
    assert event["actions"]["stateDelta"] == {"z": 9}
    missing = await client.patch(f"{url}{S}/nope", json={"stateDelta": {"z": 9}})
    assert missing.status_code == 404


async def test_create_session_with_restored_events(url: str, client: httpx.AsyncClient) -> None:
    history = [
        {
            "author": "user",
            "invocationId": "e-1",
            "content": {"role": "user", "parts": [{"text": "hi"}]},
        },
        {
            "author": "weather",
            "invocationId": "e-1",
            "content": {"role": "model", "parts": [{"text": "yo"}]},
        },
    ]
    created = await client.post(url + S, json={"sessionId": "r", "events": history})
    assert [e["content"]["parts"][0]["text"] for e in created.json()["events"]] == ["hi", "yo"]
    with_actions = [{**history[0], "actions": {"stateDelta": {"a": 1}}}]
    refused = await client.post(url + S, json={"sessionId": "r2", "events": with_actions})
    assert refused.status_code == 400
    assert "events[0]" in refused.json()["detail"]
    assert (await client.get(f"{url}{S}/r2")).status_code == 404


async def test_deprecated_create_with_id_takes_the_state_as_body(
    url: str, client: httpx.AsyncClient
) -> None:
    created = await client.post(f"{url}{S}/old", json={"k": 2})
    assert created.json()["id"] == "old"
    assert created.json()["state"] == {"k": 2}


async def test_unknown_app_is_404(url: str, client: httpx.AsyncClient) -> None:
    response = await client.post(url + "/apps/nope/users/u1/sessions")
    assert response.status_code == 404
    assert response.json() == {"detail": "App not found: nope"}
    run = await client.post(
        url + "/run",
        json={"appName": "nope", "userId": "u", "sessionId": "s", "newMessage": {"parts": []}},
    )
    assert run.status_code == 404


async def test_unknown_route_and_method_answer_json(url: str, client: httpx.AsyncClient) -> None:
    missing = await client.get(url + "/no/such/route")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Not Found"}
    wrong = await client.put(url + "/run")
    assert wrong.status_code == 405


# -- artifacts ---------------------------------------------------------------------------------


async def test_artifact_round_trip_s_api_7(url: str, client: httpx.AsyncClient) -> None:
    await client.post(url + S, json={"sessionId": "s1"})
    arts = f"{url}{S}/s1/artifacts"
    saved = await client.post(arts, json={"filename": "a.txt", "artifact": {"text": "hello"}})
    assert saved.status_code == 200
    version = saved.json()
    assert version["version"] == 0
    assert version["canonicalUri"].endswith("/sessions/s1/artifacts/a.txt/versions/0")
    assert version["mimeType"] == "text/plain"
    assert (await client.get(arts)).json() == ["a.txt"]
    assert (await client.get(arts + "/a.txt")).json() == {"text": "hello"}
    assert (await client.get(arts + "/a.txt?version=0")).json() == {"text": "hello"}
    assert (await client.get(arts + "/a.txt/versions")).json() == [0]
    assert (await client.get(arts + "/a.txt/versions/latest")).json() == {"text": "hello"}
    assert (await client.get(arts + "/a.txt/versions/0")).json() == {"text": "hello"}
    deleted = await client.delete(arts + "/a.txt")
    assert deleted.status_code == 200
    assert (await client.get(arts)).json() == []


async def test_artifact_custom_metadata_is_kept_with_its_version(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    """``customMetadata`` is stored with the version (and answered), as google-adk's server."""
    artifacts = InMemoryArtifactService()
    url = await start_server(make_app(artifact_service=artifacts))
    await client.post(url + S, json={"sessionId": "s1"})
    body = {"filename": "a.txt", "artifact": {"text": "x"}, "customMetadata": {"tag": [1, "t"]}}
    saved = await client.post(f"{url}{S}/s1/artifacts", json=body)
    assert saved.status_code == 200
    assert saved.json()["customMetadata"] == {"tag": [1, "t"]}
    kept = await artifacts.get_artifact_version(
        app_name="myapp", user_id="u1", session_id="s1", filename="a.txt", version=0
    )
    assert kept is not None and dict(kept.custom_metadata) == {"tag": [1, "t"]}


async def test_artifact_versions_and_missing_ones(url: str, client: httpx.AsyncClient) -> None:
    await client.post(url + S, json={"sessionId": "s1"})
    arts = f"{url}{S}/s1/artifacts"
    blob = {"inlineData": {"mimeType": "image/png", "data": "AAEC"}}
    await client.post(arts, json={"filename": "p.png", "artifact": {"text": "v0"}})
    saved = await client.post(arts, json={"filename": "p.png", "artifact": blob})
    assert saved.json()["version"] == 1
    assert saved.json()["mimeType"] == "image/png"
    assert (await client.get(arts + "/p.png")).json() == blob
    assert (await client.get(arts + "/p.png/versions/0")).json() == {"text": "v0"}
    for path, status in [
        ("/p.png/versions/7", 404),
        ("/none.txt", 404),
        ("/p.png?version=9", 404),
        ("/p.png/versions/abc", 422),
        ("/p.png?version=x", 422),
    ]:
        response = await client.get(arts + path)
        assert response.status_code == status, path
    bad = await client.get(arts + "/p.png/versions/abc")
    assert bad.json()["detail"].startswith("version_id:")


async def test_artifact_bad_filename_is_400(url: str, client: httpx.AsyncClient) -> None:
    await client.post(url + S, json={"sessionId": "s1"})
    arts = f"{url}{S}/s1/artifacts"
    response = await client.post(arts, json={"filename": "..", "artifact": {"text": "x"}})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("filename:")


# -- memory --------------------------------------------------------------------------------------


async def test_patch_memory_adds_the_session(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    memory = InMemoryMemoryService()
    url = await start_server(make_app(memory_service=memory))
    await client.post(url + S, json={"sessionId": "s1"})
    run = {
        "appName": "myapp",
        "userId": "u1",
        "sessionId": "s1",
        "newMessage": {"parts": [{"text": "Paris weather"}]},
    }
    assert (await client.post(url + "/run", json=run)).status_code == 200
    added = await client.patch(url + "/apps/myapp/users/u1/memory", json={"sessionId": "s1"})
    assert added.status_code == 200
    found = await memory.search_memory(app_name="myapp", user_id="u1", query="sunny")
    assert found.memories
    missing = await client.patch(url + "/apps/myapp/users/u1/memory", json={"sessionId": "x"})
    assert missing.status_code == 404


async def test_patch_memory_without_a_memory_service_is_400(
    url: str, client: httpx.AsyncClient
) -> None:
    response = await client.patch(url + "/apps/myapp/users/u1/memory", json={"sessionId": "s"})
    assert response.status_code == 400


# -- malformed input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 422, "body: expected a JSON object"),
        (b'{"userId": "u1", "sessionId": "s1", "newMessage": {"parts": []}}', 422, "appName"),
        (b'{"appName": "myapp", "sessionId": "s1", "newMessage": {"parts": []}}', 422, "userId"),
        (b'{"appName": "myapp", "userId": 7, "sessionId": "s1"}', 422, "userId"),
        (b'{"appName": "myapp", "userId": "u1", "sessionId": "s1"}', 422, "newMessage"),
        (
            b'{"appName": "myapp", "userId": "u1", "sessionId": "s1",'
            b' "newMessage": {"parts": [{"text": 3}]}}',
            422,
            "newMessage.parts[0].text",
        ),
        (
            b'{"appName": "myapp", "userId": "u1", "sessionId": "s1",'
            b' "newMessage": {"parts": []}, "stateDelta": [1]}',
            422,
            "stateDelta",
        ),
        (
            b'{"appName": "myapp", "userId": "u1", "sessionId": "s1",'
            b' "newMessage": {"parts": []}, "streaming": "yes"}',
            422,
            "streaming",
        ),
        (
            b'{"appName": "myapp", "userId": "u1", "sessionId": "s1",'
            b' "newMessage": {"parts": []}, "onDisconnect": "later"}',
            422,
            "onDisconnect",
        ),
        (
            b'{"appName": "myapp", "userId": "u1", "sessionId": "s1", "newMessage": {"parts":'
            b' [{"functionCall": {"name": "f", "args": {}}}]}}',
            422,
            "newMessage",
        ),
    ],
)
@pytest.mark.parametrize("route", ["/run", "/run_sse"])
async def test_malformed_run_bodies_name_the_field(
    url: str, client: httpx.AsyncClient, route: str, body: bytes, status: int, field: str
) -> None:
    await client.post(url + S, json={"sessionId": "s1"})
    response = await client.post(url + route, content=body)
    assert response.status_code == status
    assert field in response.json()["detail"]
    assert (await client.get(f"{url}{S}/s1")).json()["events"] == []


@pytest.mark.parametrize(
    ("path", "method", "body", "field"),
    [
        (S, "POST", {"sessionId": 5}, "sessionId"),
        (S, "POST", {"state": [1]}, "state"),
        (S, "POST", {"events": [{"author": 3}]}, "events[0].author"),
        (S + "/s1", "PATCH", {"state_delta": 3}, "stateDelta"),
        (S + "/s1", "PATCH", {}, "stateDelta: field required"),
        (S + "/s1/artifacts", "POST", {"artifact": {"text": "x"}}, "filename"),
        (S + "/s1/artifacts", "POST", {"filename": "a", "artifact": 1}, "artifact"),
    ],
)
async def test_malformed_bodies_of_other_routes_name_the_field(
    url: str, client: httpx.AsyncClient, path: str, method: str, body: Any, field: str
) -> None:
    await client.post(url + S, json={"sessionId": "s1"})
    response = await client.request(method, url + path, json=body)
    assert response.status_code == 422
    assert field in response.json()["detail"]


# -- size limits ---------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["/run", "/run_sse", S, S + "/s1/artifacts"])
async def test_bodies_over_the_limit_are_413(
    start_server: Start, client: httpx.AsyncClient, route: str
) -> None:
    url = await start_server(make_app(max_body_bytes=1000))
    await client.post(url + S, json={"sessionId": "s1"})
    big = {"padding": "x" * 2000}
    response = await client.post(url + route, json=big)
    assert response.status_code == 413
    assert "1000 bytes" in response.json()["detail"]


async def test_chunked_body_over_the_limit_is_413(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(make_app(max_body_bytes=1000))

    async def chunks() -> Any:
        for _ in range(4):
            yield b"x" * 400

    response = await client.post(url + "/run", content=chunks())
    assert "content-length" not in response.request.headers
    assert response.status_code == 413


async def test_body_at_the_limit_is_accepted(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(make_app(max_body_bytes=1000))
    body = b'{"sessionId": "s1", "state": {"pad": "' + b"x" * 900 + b'"}}'
    body += b" " * (1000 - len(body))
    assert len(body) == 1000
    response = await client.post(url + S, content=body)
    assert response.status_code == 200


# -- auth ----------------------------------------------------------------------------------------


async def test_bearer_token_is_required_when_configured(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(make_app(auth_token="s3cret"))
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
        response = await client.get(url + "/list-apps", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json() == {"detail": "missing or wrong bearer token"}
    refused = await client.post(url + S, json={"sessionId": "s1"})
    assert refused.status_code == 401
    good = {"Authorization": "Bearer s3cret"}
    assert (await client.get(url + "/list-apps", headers=good)).json() == ["myapp"]
    assert (await client.get(f"{url}{S}/s1", headers=good)).status_code == 404  # nothing stored
    assert (await client.get(url + "/health")).status_code == 200


# -- CORS ----------------------------------------------------------------------------------------


async def test_cors_preflight_and_simple_requests(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(make_app(cors_origins=["http://ui.example"], auth_token="t"))
    preflight = await client.options(
        url + "/run_sse",
        headers={
            "Origin": "http://ui.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://ui.example"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    simple = await client.get(
        url + "/list-apps", headers={"Origin": "http://ui.example", "Authorization": "Bearer t"}
    )
    assert simple.headers["access-control-allow-origin"] == "http://ui.example"
    other = await client.options(
        url + "/run_sse",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert other.status_code == 400
    assert "access-control-allow-origin" not in other.headers


PRIVATE_NETWORK = {"Access-Control-Request-Private-Network": "true"}


@pytest.mark.parametrize(
    ("origin", "extra", "detail"),
    [
        ("http://evil.example", {}, "Disallowed CORS origin"),
        ("http://ui.example", PRIVATE_NETWORK, "Disallowed CORS private-network"),
        ("null", PRIVATE_NETWORK, "Disallowed CORS origin, private-network"),
    ],
)
async def test_a_refused_cors_preflight_is_json_naming_what_is_disallowed(
    start_server: Start,
    client: httpx.AsyncClient,
    origin: str,
    extra: dict[str, str],
    detail: str,
) -> None:
    """Every other refusal is ``{"detail": ...}``; this one was plain text."""
    url = await start_server(make_app(cors_origins=["http://ui.example"]))
    cors = {"Origin": origin, "Access-Control-Request-Method": "POST", **extra}
    refused = await client.options(url + "/run_sse", headers=cors)
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/json"
    assert refused.json() == {"detail": detail}
    allowed = refused.headers.get("access-control-allow-origin")
    assert allowed == (None if "origin" in detail else origin)


async def test_no_cors_headers_without_cors_origins(url: str, client: httpx.AsyncClient) -> None:
    response = await client.get(url + "/list-apps", headers={"Origin": "http://ui.example"})
    assert "access-control-allow-origin" not in response.headers


# -- app loading ---------------------------------------------------------------------------------


async def test_a_loader_is_called_once(start_server: Start, client: httpx.AsyncClient) -> None:
    calls: list[int] = []

    def load() -> dict[str, Any]:
        calls.append(1)
        return {"lazy": weather_agent()}

    url = await start_server(create_app(load, session_service=InMemorySessionService()))
    assert (await client.get(url + "/list-apps")).json() == ["lazy"]
    assert (await client.get(url + "/list-apps")).json() == ["lazy"]
    assert calls == [1]


async def test_sessions_persist_in_sqlite_across_apps(
    start_server: Start, client: httpx.AsyncClient, tmp_path: Any
) -> None:
    path = str(tmp_path / "sessions.db")
    async with SqliteSessionService(path) as one, SqliteSessionService(path) as two:
        first = await start_server(make_app(session_service=one))
        await client.post(first + S, json={"sessionId": "s1", "state": {"k": 1}})
        second = await start_server(make_app(session_service=two))
        assert (await client.get(f"{second}{S}/s1")).json()["state"] == {"k": 1}
