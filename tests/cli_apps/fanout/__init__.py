"""Two branches in parallel (``left`` streams text into state, ``right`` saves an artifact)."""

from __future__ import annotations

from typing import Any

from trio_agents import Content, LlmAgent, ParallelAgent, Part, SequentialAgent, ToolContext
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.testing import ScriptedModel


async def save_note(text: str, tool_context: ToolContext) -> dict[str, Any]:
    """Save ``text`` as the artifact ``note.txt``."""
    version = await tool_context.save_artifact("note.txt", Part.from_text(text))
    tool_context.state["note_version"] = version
    return {"saved": "note.txt", "version": version}


def _right(request: LlmRequest) -> Any:
    if any(part.function_response for part in request.contents[-1].parts):
        return ["Note ", "saved.", "Note saved."]
    call = Part.from_function_call("save_note", {"text": "hello from the right"})
    return LlmResponse(content=Content(role="model", parts=[call]))


left = LlmAgent(
    name="left",
    model=ScriptedModel(lambda request: ["Left ", "side ", "here.", "Left side here."]),
    instruction="Say something.",
    output_key="left_said",
)
right = LlmAgent(
    name="right",
    model=ScriptedModel(_right),
    instruction="Save a note.",
    tools=[save_note],
)
summary = LlmAgent(
    name="summary",
    model=ScriptedModel(lambda request: "Both branches are done."),
    instruction="Sum up.",
    output_key="summary",
)
root_agent = SequentialAgent(
    name="fanout",
    description="a parallel fan-out and a summary",
    sub_agents=[ParallelAgent(name="gather", sub_agents=[left, right]), summary],
)
