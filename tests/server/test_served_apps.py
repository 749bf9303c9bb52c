"""``create_app`` serves ``App`` values: under their key's name, with their plugins first."""

from __future__ import annotations

import httpx

from tests.server.conftest import Start
from tests.server.helpers import user_text
from trio_agents import App, Event, InvocationContext, LlmAgent
from trio_agents.plugins import BasePlugin
from trio_agents.server import create_app
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel


class Mark(BasePlugin):
    """Writes its name into ``seen`` for every event it is shown."""

    def __init__(self, name: str, seen: list[str]) -> None:
        super().__init__(name)
        self.seen = seen

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        self.seen.append(self.name)
        return None


async def test_an_app_runs_with_its_plugins_then_the_server_s(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    seen: list[str] = []
    agent = LlmAgent(name="assistant", model=ScriptedModel(["hello"]))
    app = App(name="shop", root_agent=agent, plugins=[Mark("app", seen)])
    service = InMemorySessionService()
    served = create_app({"store": app}, session_service=service, plugins=[Mark("server", seen)])
    url = await start_server(served)
    assert (await client.get(url + "/list-apps")).json() == ["store"]
    await client.post(url + "/apps/store/users/u1/sessions", json={"sessionId": "s1"})
    run = {"appName": "store", "userId": "u1", "sessionId": "s1", "newMessage": user_text("hi")}
    response = await client.post(url + "/run", json=run)
    assert response.status_code == 200, response.text
    assert [e["content"]["parts"][0]["text"] for e in response.json()] == ["hello"]
    assert seen == ["app", "server"]
    stored = await service.get_session(app_name="store", user_id="u1", session_id="s1")
    assert stored is not None and [e.text for e in stored.events] == ["hi", "hello"]
