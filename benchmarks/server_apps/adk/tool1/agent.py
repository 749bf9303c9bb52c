"""An LlmAgent on a scripted model: one call of ``lookup``, then an answer (3 events)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


def lookup(key: str) -> dict[str, Any]:
    """Look ``key`` up."""
    return {"key": key, "value": len(key)}


class ScriptedLlm(BaseLlm):
    """Calls ``lookup`` once, then answers; no network."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        answered = any(p.function_response for p in (last.parts or [])) if last else False
        if answered:
            part = types.Part(text="The value is 5.")
        else:
            call = types.FunctionCall(name="lookup", args={"key": "hello"})
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


root_agent = LlmAgent(
    name="tool1",
    description="one tool call, then an answer",
    model=ScriptedLlm(model="scripted"),
    instruction="Look the key up.",
    tools=[lookup],
)
