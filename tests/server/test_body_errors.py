"""A 422 names what is wrong with a body: the misspelt key as well as the field it was meant for.

Keys the server has no use for stay accepted (ADK's own clients send several); only near misses
of a field's name are refused, so a typo never falls back to a default silently.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given, strategies as st

from tests.server.conftest import Start
from tests.server.helpers import weather_agent
from trio_agents.server import _http, create_app
from trio_agents.server._http import MAX_KEYS_COMPARED, near_miss
from trio_agents.sessions import InMemorySessionService

S = "/apps/myapp/users/u1/sessions"
RUN = {"appName": "myapp", "userId": "u1", "sessionId": "s1"}
MESSAGE = {"role": "user", "parts": [{"text": "hi"}]}


@pytest.fixture
async def url(start_server: Start, client: httpx.AsyncClient) -> str:
    app = create_app({"myapp": weather_agent()}, session_service=InMemorySessionService())
    base = await start_server(app)
    assert (await client.post(base + S, json={"sessionId": "s1"})).status_code == 200
    return base


@pytest.mark.parametrize("route", ["/run", "/run_sse"])
@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (
            {**RUN, "newMesage": MESSAGE},
            "newMessage: field required (the body has 'newMesage': did you mean 'newMessage'?)",
        ),
        (
            {**RUN, "new_mesage": MESSAGE},
            "newMessage: field required (the body has 'new_mesage': did you mean 'newMessage'?)",
        ),
        (
            {"appNme": "myapp", "userId": "u1", "sessionId": "s1", "newMessage": MESSAGE},
            "appName: field required (the body has 'appNme': did you mean 'appName'?)",
        ),
        ({**RUN}, "newMessage: field required"),
        (
            {**RUN, "newMessage": MESSAGE, "onDisconect": "detach"},
            "onDisconect: unknown field; did you mean 'onDisconnect'?",
        ),
        (
            {**RUN, "newMessage": MESSAGE, "stateDelt": {"a": 1}},
            "stateDelt: unknown field; did you mean 'stateDelta'?",
        ),
        (
            {**RUN, "newMessage": MESSAGE, "streamng": True},
            "streamng: unknown field; did you mean 'streaming'?",
        ),
    ],
)
async def test_a_misspelt_run_field_is_named_with_the_close_match(
    url: str, client: httpx.AsyncClient, route: str, body: dict[str, Any], detail: str
) -> None:
    await _refused(client, url + route, body, detail)
    assert (await client.get(f"{url}{S}/s1")).json()["events"] == []


async def _refused(client: httpx.AsyncClient, url: str, body: Any, detail: str) -> None:
    response = await client.post(url, json=body)
    assert (response.status_code, response.json()) == (422, {"detail": detail})


async def test_the_run_body_of_adk_s_dev_ui_with_extra_keys_is_accepted(
    url: str, client: httpx.AsyncClient
) -> None:
    body = {
        **RUN,
        "newMessage": MESSAGE,
        "streaming": False,
        "stateDelta": None,
        "functionCallEventId": None,
        "invocationId": None,
        "bogus": 1,
        "requestedAuthConfig": {},
    }
    response = await client.post(url + "/run", json=body)
    assert response.status_code == 200, response.text
    assert response.json()[-1]["content"]["parts"][0]["text"]


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        (S, {"sesionId": "s2"}, "sesionId: unknown field; did you mean 'sessionId'?"),
        (S, {"stat": {"a": 1}}, "stat: unknown field; did you mean 'state'?"),
        (
            S + "/s1/artifacts",
            {"filename": "a.txt", "artifact": {"text": "x"}, "custom_metdata": {}},
            "custom_metdata: unknown field; did you mean 'customMetadata'?",
        ),
        (
            S + "/s1/artifacts",
            {"filenme": "a.txt", "artifact": {"text": "x"}},
            "filename: field required (the body has 'filenme': did you mean 'filename'?)",
        ),
    ],
)
async def test_misspelt_fields_of_other_bodies_are_named(
    url: str, client: httpx.AsyncClient, path: str, body: dict[str, Any], detail: str
) -> None:
    await _refused(client, url + path, body, detail)


async def test_a_session_body_with_adk_s_extra_keys_is_accepted(
    url: str, client: httpx.AsyncClient
) -> None:
    body = {"state": {"__session_metadata__": {"displayName": "x"}}, "appName": "myapp"}
    response = await client.post(url + S, json=body)
    assert response.status_code == 200, response.text


FIELDS = ["appName", "userId", "sessionId", "newMessage", "stateDelta", "onDisconnect"]


@given(st.sampled_from(FIELDS), st.sampled_from(["", "_"]))
def test_a_field_s_own_name_in_either_case_is_never_a_near_miss(name: str, sep: str) -> None:
    spelled = "".join(f"{sep}{c.lower()}" if c.isupper() and sep else c for c in name)
    assert near_miss(spelled, FIELDS) is None


@given(st.sampled_from(FIELDS), st.data())
def test_dropping_one_letter_of_a_long_name_is_a_near_miss_of_it(
    name: str, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(name) - 1))
    assert near_miss(name[:index] + name[index + 1 :], FIELDS) == name


@pytest.mark.parametrize("missing", [False, True])
async def test_a_body_of_many_unknown_keys_compares_a_bounded_number_of_them(
    url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, missing: bool
) -> None:
    """Each key was compared with the fields' names: a body of a million keys (14 MB, under
    the size limit) held the server's only thread for a minute."""
    compared: list[str] = []

    def counting(key: str, names: Any) -> str | None:
        compared.append(key)
        return near_miss(key, names)

    monkeypatch.setattr(_http, "near_miss", counting)
    keys = {f"sesionld{i}": 0 for i in range(20_000)}  # each looks like a misspelt sessionId
    body = {**RUN, "newMessage": MESSAGE, **keys}
    if missing:
        del body["sessionId"]
    response = await client.post(url + "/run", json=body)
    if missing:
        assert response.status_code == 422
        assert response.json()["detail"].startswith("sessionId: field required")
    else:
        assert response.status_code == 200
    assert 0 < len(compared) <= MAX_KEYS_COMPARED
