"""ADK compatibility: the requests ADK's own clients send, answered as google-adk 2.13 answers.

The same sequence of requests (camelCase bodies: ``appName``, ``userId``, ``sessionId``,
``newMessage``, ``streaming``, ``stateDelta``) goes to our server; every response is compared
field by field with the one recorded from ADK's ``api_server`` (``adk_fixtures.py``), after
replacing generated values (ids, timestamps) by their shape. R-API, S-API-1..8.

Known, deliberate differences, normalized away here and listed so that any other one fails:

* ADK 2.x writes workflow internals we do not model: ``nodeInfo``,
  ``actions.requestedToolConfirmations`` and an empty ``longRunningToolIds`` (ARCHITECTURE §3
  "Events and content": ignored on input, not written);
* a model's final answer carries ``partial: false`` here where ADK leaves ``partial`` out;
* ``canonicalUri`` uses the scheme ``artifact://`` (the path is ADK's);
* a 422 names the field in a sentence (``"userId: field required"``) rather than in FastAPI's
  ``[{"loc": [...], "msg": ...}]`` list;
* SSE event frames also carry ``id: <seq>`` lines, and a terminal ``event: done`` frame follows
  (clients that only read ``data:`` lines of unnamed events see ADK's stream).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.server.adk_fixtures import ADK_RESPONSES
from tests.server.conftest import Start
from tests.server.helpers import read_frames
from trio_agents import Content, LlmAgent, Part, ToolContext
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.server import create_app
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel

S = "/apps/myapp/users/u1/sessions"
MESSAGE = {"role": "user", "parts": [{"text": "hi"}]}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
GENERATED = re.compile(rf"^(?:(e|p|adk)-)?{UUID}$")
ADK_ONLY = {"nodeInfo", "requestedToolConfirmations"}


def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """The weather of a city."""
    tool_context.state["x"] = 1
    return {"weather": "sunny", "city": city}


def _reply(request: LlmRequest) -> Any:
    """The model ADK's fixtures were recorded with (``FakeLlm`` there)."""
    if any(part.function_response for part in request.contents[-1].parts):
        chunks = ["It is ", "sunny.", "It is sunny."]
        return [
            LlmResponse(content=Content(role="model", parts=[Part.from_text(c)])) for c in chunks
        ]
    call = Part.from_function_call("get_weather", {"city": "Paris"})
    return LlmResponse(content=Content(role="model", parts=[call]))


def shape(value: Any) -> Any:
    """A generated value replaced by what it must look like."""
    if isinstance(value, float):
        return "<time>"
    if isinstance(value, str) and (found := GENERATED.match(value)):
        return f"<{found.group(1) or 'uuid'}>"
    return value


def normalize(value: Any) -> Any:
    if isinstance(value, list):
        return [normalize(item) for item in value]
    if not isinstance(value, dict):
        return shape(value)
    out = {}
    for key, item in value.items():
        if key in ADK_ONLY or (key == "longRunningToolIds" and item == []):
            continue
        if key == "partial" and item is False:
            continue
        if key == "canonicalUri":
            item = item.split("://", 1)[1]
        out[key] = normalize(item)
    return out


@pytest.fixture
async def url(start_server: Start) -> str:
    agent = LlmAgent(
        name="weather", model=ScriptedModel(_reply), instruction="Help.", tools=[get_weather]
    )
    return await start_server(
        create_app({"myapp": agent}, session_service=InMemorySessionService())
    )


def same(name: str, response: httpx.Response) -> None:
    adk = ADK_RESPONSES[name]
    assert response.status_code == adk["status"], name
    assert normalize(response.json()) == normalize(adk["body"]), name


async def test_adk_clients_get_adk_answers(url: str, client: httpx.AsyncClient) -> None:
    same("health", await client.get(url + "/health"))
    same("list_apps", await client.get(url + "/list-apps"))
    same(
        "create",
        await client.post(url + S, json={"sessionId": "s1", "state": {"k": 1, "user:p": 2}}),
    )
    same("create_duplicate", await client.post(url + S, json={"sessionId": "s1"}))
    same("get", await client.get(url + S + "/s1"))
    same("list", await client.get(url + S))
    same("get_missing", await client.get(url + S + "/nope"))
    same("patch", await client.patch(url + S + "/s1", json={"stateDelta": {"z": 9}}))
    run = {"appName": "myapp", "userId": "u1", "sessionId": "s1", "newMessage": MESSAGE}
    same("run", await client.post(url + "/run", json={**run, "stateDelta": {"from_client": 1}}))
    async with client.stream("POST", url + "/run_sse", json={**run, "streaming": True}) as response:
        assert response.status_code == ADK_RESPONSES["run_sse"]["status"]
        frames = await read_frames(response)
    *events, terminal = frames
    assert terminal.event == "done"
    assert normalize([f.data for f in events]) == normalize(ADK_RESPONSES["run_sse"]["data"])
    same("get_after_runs", await client.get(url + S + "/s1"))
    same("run_missing", await client.post(url + "/run", json={**run, "sessionId": "nope"}))
    missing_sse = {**run, "sessionId": "nope", "streaming": True}
    same("run_sse_missing", await client.post(url + "/run_sse", json=missing_sse))
    await _check_validation_error(client, url)
    await _check_artifacts(client, url)
    same("delete", await client.delete(url + S + "/s1"))
    same("get_deleted", await client.get(url + S + "/s1"))
    same("create_without_body", await client.post(url + S))


async def _check_validation_error(client: httpx.AsyncClient, url: str) -> None:
    response = await client.post(
        url + "/run", json={"appName": "myapp", "sessionId": "s1", "newMessage": MESSAGE}
    )
    adk = ADK_RESPONSES["run_without_user"]
    assert response.status_code == adk["status"]
    (problem,) = adk["body"]["detail"]
    assert problem["loc"][-1] in response.json()["detail"]


async def _check_artifacts(client: httpx.AsyncClient, url: str) -> None:
    arts = url + S + "/s1/artifacts"
    same(
        "artifact_save",
        await client.post(arts, json={"filename": "a.txt", "artifact": {"text": "hello"}}),
    )
    same("artifact_list", await client.get(arts))
    same("artifact_load", await client.get(arts + "/a.txt"))
    same("artifact_versions", await client.get(arts + "/a.txt/versions"))
    same("artifact_latest", await client.get(arts + "/a.txt/versions/latest"))
    same("artifact_missing", await client.get(arts + "/none.txt"))
    same("artifact_delete", await client.delete(arts + "/a.txt"))
    same("artifact_list_after_delete", await client.get(arts))


def test_normalize_keeps_what_matters() -> None:
    """The normalization must not hide real differences (so the test above can fail)."""
    event = ADK_RESPONSES["run"]["body"][0]
    changed = {**event, "author": "someone"}
    assert normalize(changed) != normalize(event)
    assert normalize({**event, "content": None}) != normalize(event)
    assert normalize({"id": "e-x"}) != normalize({"id": "e-0f2d1c3a-0000-4000-8000-000000000000"})
