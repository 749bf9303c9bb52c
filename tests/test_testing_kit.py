"""The shipped testing kit: recording plugin, collect/normalize, invariants, record/replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tests.agents.llm_helpers import fc
from tests.apps import Probe, agent_trees
from trio_agents import InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from trio_agents.models import LlmRequest
from trio_agents.testing import (
    RecordingModel,
    RecordingPlugin,
    ReplayMissError,
    ReplayModel,
    ScriptedModel,
    assert_invariants,
    check_invariants,
    collect,
    normalize,
    sequential_ids,
)


def weather(city: str) -> str:
    """Weather.

    Args:
        city: Where.
    """
    return f"sunny in {city}"


async def _run(agent: Any, message: str = "hi", **kwargs: Any):
    recorder = RecordingPlugin()
    runner = InMemoryRunner(agent, plugins=[recorder])
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    result = await collect(
        runner, user_id="u", session_id=session.id, new_message=message, **kwargs
    )
    return result, recorder


async def test_recording_plugin_sees_every_hook_in_order() -> None:
    agent = LlmAgent(
        name="a", model=ScriptedModel([fc("weather", {"city": "Oslo"}), "ok"]), tools=[weather]
    )
    result, recorder = await _run(agent)
    assert recorder.hooks()[:4] == ["on_user_message", "before_run", "before_agent", "before_model"]
    assert recorder.hooks()[-2:] == ["after_agent", "after_run"]
    assert recorder.hooks().count("before_tool") == 1
    (tool_call,) = [c for c in recorder.calls if c.hook == "before_tool"]
    assert tool_call.args["tool_args"] == {"city": "Oslo"}
    assert_invariants(result.events, result.session)


async def test_normalize_makes_runs_comparable_and_keeps_references() -> None:
    def make() -> LlmAgent:
        return LlmAgent(
            name="a", model=ScriptedModel([fc("weather", {"city": "Oslo"}), "ok"]), tools=[weather]
        )

    first, _ = await _run(make())
    second, _ = await _run(make())
    assert first.events[0].id != second.events[0].id
    assert normalize(first.events) == normalize(second.events)
    call = normalize(first.events)[0]["content"]["parts"][0]["functionCall"]
    answer = normalize(first.events)[1]["content"]["parts"][0]["functionResponse"]
    assert call["id"] == answer["id"] == "<call-1>"


async def test_check_invariants_catches_a_broken_history() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel(["ok"]))
    result, _ = await _run(agent)
    assert check_invariants(result.events, result.session) == []
    result.session.state["sneaky"] = 1  # a state change no stored delta explains
    (problem,) = check_invariants(result.events, result.session)
    assert problem.startswith("state: the stored state is not the fold")
    assert "['sneaky']" in problem
    with pytest.raises(AssertionError, match="fold"):
        assert_invariants(result.events, result.session)


@settings(max_examples=25)
@given(data=st.data(), _seed=st.random_module())
async def test_check_invariants_holds_for_random_workflows(data: st.DataObject, _seed: Any) -> None:
    root = data.draw(agent_trees(Probe()))
    with sequential_ids():
        try:
            result, _ = await _run(root)
        except Exception:
            return  # injected failures: the handshake suite covers their aftermath
    assert_invariants(result.events, result.session)


@pytest.mark.parametrize("mode", [StreamingMode.NONE, StreamingMode.SSE])
async def test_recorded_traffic_replays_offline(tmp_path: Path, mode: StreamingMode) -> None:
    path = tmp_path / "traffic.json"
    live = ScriptedModel([[fc("weather", {"city": "Oslo"})], ["It is ", "sunny."]])
    recorder = RecordingModel(live, path)
    config = RunConfig(streaming_mode=mode)
    recorded, _ = await _run(LlmAgent(name="a", model=recorder, tools=[weather]), run_config=config)
    replayed, _ = await _run(
        LlmAgent(name="a", model=ReplayModel(path), tools=[weather]), run_config=config
    )
    assert normalize(replayed.events) == normalize(recorded.events)
    assert len(live.requests) == 2  # the replay never called the live model


async def test_a_request_that_was_not_recorded_is_named(tmp_path: Path) -> None:
    replay = ReplayModel(tmp_path / "empty.json")
    with pytest.raises(ReplayMissError, match="no recorded answer") as info:
        await replay.generate(LlmRequest(model="m"))
    assert len(info.value.key) == 64
