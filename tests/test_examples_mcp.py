"""The MCP example app runs against the real filesystem MCP server (a scripted model)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import trio

from trio_agents import Content, InMemoryRunner, Part
from trio_agents.models import LlmResponse
from trio_agents.testing import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / ".ci/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"


@pytest.mark.skipif(
    not SERVER.exists() and not os.environ.get("CI"),
    reason="run `cd .ci/node && npm ci` (CI always does)",
)
async def test_notes_example_reads_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTES_MCP_SERVER", str(SERVER))
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "mcp"))
    sys.modules.pop("notes", None)
    notes = importlib.import_module("notes")
    note = str(notes.NOTES_DIR / "trio.md")
    read = Part.from_function_call("notes_read_text_file", {"path": note})
    model = ScriptedModel(
        [LlmResponse(content=Content(role="model", parts=[read])), "Nurseries wait."]
    )
    notes.root_agent.model = model
    async with InMemoryRunner(notes.root_agent, app_name="notes") as runner:
        session = await runner.session_service.create_session(app_name="notes", user_id="u")
        with trio.fail_after(90):
            async with runner.run(
                user_id="u", session_id=session.id, new_message="what do my notes say?"
            ) as events:
                seen = [event async for event in events]
    declared = sorted(d.name for d in model.requests[0].tools)
    assert declared == ["notes_list_directory", "notes_read_text_file", "notes_search_files"]
    (response,) = [
        p.function_response.response for e in seen if e.content for p in e.content.parts
        if p.function_response
    ]  # fmt: skip
    assert "Every task lives in a nursery" in response["content"][0]["text"]
    assert seen[-1].text == "Nurseries wait."
    sys.modules.pop("notes", None)
