"""The resumability fields of EventActions are checked like every other payload before storing."""

from __future__ import annotations

import pytest

from trio_agents import Event, EventActions, SerializationError, ToolConfirmation
from trio_agents.sessions import InMemorySessionService


@pytest.mark.parametrize(
    ("actions", "path"),
    [
        (EventActions(agent_state={"x": "\udc80"}), "['agentState']['x']"),
        (
            EventActions(requested_tool_confirmations={"c1": ToolConfirmation(hint="\udc80")}),
            "['requestedToolConfirmations']['c1']['hint']",
        ),
        (
            EventActions(
                requested_tool_confirmations={"c1": ToolConfirmation(payload={"p": "\ud800"})}
            ),
            "['requestedToolConfirmations']['c1']['payload']['p']",
        ),
    ],
)
async def test_unstorable_resumability_fields_are_refused_naming_the_path(
    actions: EventActions, path: str
) -> None:
    service = InMemorySessionService()
    session = await service.create_session(app_name="a", user_id="u")
    with pytest.raises(SerializationError) as info:
        await service.append_event(session, Event(author="a", actions=actions))
    assert info.value.path == "event['actions']" + path
    stored = await service.get_session(app_name="a", user_id="u", session_id=session.id)
    assert stored is not None
    assert stored.events == [] and stored.revision == 0
