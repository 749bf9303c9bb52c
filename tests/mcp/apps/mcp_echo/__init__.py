"""An app for the MCP serving tests: answers ``echo: <message>``, or waits when told to."""

from __future__ import annotations

import trio

from trio_agents import LlmAgent
from trio_agents.models import LlmRequest
from trio_agents.testing import ScriptedModel


async def _answer(request: LlmRequest) -> str:
    text = request.contents[-1].parts[0].text or ""
    if text == "wait":
        await trio.sleep_forever()
    turns = sum(1 for content in request.contents if content.role == "user")
    return f"echo: {text} (turn {turns})"


root_agent = LlmAgent(
    name="echo_app", model=ScriptedModel(_answer), description="Echoes the message back."
)
