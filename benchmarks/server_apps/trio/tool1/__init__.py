"""An LlmAgent on a scripted model: one call of ``lookup``, then an answer (3 events)."""

from __future__ import annotations

from typing import Any

from trio_agents import Content, LlmAgent, Part
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.testing import ScriptedModel


def lookup(key: str) -> dict[str, Any]:
    """Look ``key`` up."""
    return {"key": key, "value": len(key)}


def _script(request: LlmRequest) -> Any:
    if any(part.function_response for part in request.contents[-1].parts):
        return "The value is 5."
    call = Part.from_function_call("lookup", {"key": "hello"})
    return LlmResponse(content=Content(role="model", parts=[call]))


root_agent = LlmAgent(
    name="tool1",
    description="one tool call, then an answer",
    model=ScriptedModel(_script),
    instruction="Look the key up.",
    tools=[lookup],
)
