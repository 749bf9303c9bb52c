"""RecordingModel / ReplayModel / request_key: record model traffic once, replay it offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trio_agents import (
    ConfigurationError,
    Content,
    InMemoryRunner,
    LlmAgent,
    Part,
    RunConfig,
    StreamingMode,
)
from trio_agents.models import FunctionDeclaration, LlmRequest, LlmResponse
from trio_agents.testing import (
    RecordingModel,
    ReplayMissError,
    ReplayModel,
    ScriptedModel,
    collect,
    normalize,
    request_key,
)


def request(text: str = "hi", *, model: str = "m", **fields: Any) -> LlmRequest:
    return LlmRequest(model=model, contents=[Content.from_text(text)], **fields)


async def streamed(model: Any, req: LlmRequest) -> list[LlmResponse]:
    async with model.stream(req) as chunks:
        return [chunk async for chunk in chunks]


# -- request_key -----------------------------------------------------------------------------------


def test_the_key_is_stable_and_sees_what_the_model_is_asked() -> None:
    key = request_key(request())
    assert len(key) == 64
    assert request_key(request()) == key
    assert request_key(request("other")) != key
    assert request_key(request(model="n")) != key
    assert request_key(request(system_instruction="be brief")) != key
    assert request_key(request(generation_config={"temperature": 0})) != key
    assert request_key(request(tools=[FunctionDeclaration(name="f")])) != key
    assert request_key(request(labels={"run": "1"})) == key  # labels are not part of the ask


def test_the_key_ignores_call_ids_but_not_which_call_is_answered() -> None:
    def history(first: str, second: str, answered: str) -> LlmRequest:
        calls = Content(
            role="model",
            parts=[
                Part.from_function_call("f", {}, id=first),
                Part.from_function_call("f", {}, id=second),
            ],
        )
        answer = Content(role="user", parts=[Part.from_function_response("f", {}, id=answered)])
        return LlmRequest(model="m", contents=[Content.from_text("go"), calls, answer])

    assert request_key(history("x1", "x2", "x1")) == request_key(history("y7", "y9", "y7"))
    assert request_key(history("x1", "x2", "x1")) != request_key(history("x1", "x2", "x2"))


# -- record, then replay ---------------------------------------------------------------------------


async def test_generate_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    inner = ScriptedModel(["first answer", "second answer"])
    recorder = RecordingModel(inner, path)
    assert recorder.model == "scripted"
    recorded = [await recorder.generate(request("one")), await recorder.generate(request("two"))]

    replay = ReplayModel(path)
    assert replay.model == "m"  # the model name the requests asked for
    assert await replay.generate(request("two")) == recorded[1]
    assert await replay.generate(request("one")) == recorded[0]
    assert [r.contents[0].text for r in replay.requests] == ["two", "one"]
    assert len(inner.requests) == 2


async def test_stream_round_trip_keeps_every_chunk(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    recorder = RecordingModel(ScriptedModel([["It ", "is ", "sunny."]]), path)
    recorded = await streamed(recorder, request())
    assert [c.partial for c in recorded] == [True, True, False]

    replayed = await streamed(ReplayModel(path), request())
    assert replayed == recorded
    assert await ReplayModel(path).generate(request()) == recorded[-1]


async def test_a_request_asked_twice_replays_its_answers_in_order(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    recorder = RecordingModel(ScriptedModel(["one", "two"]), path)
    await recorder.generate(request())
    await recorder.generate(request())

    replay = ReplayModel(path)
    texts = [(await replay.generate(request())).content for _ in range(3)]
    assert [c.text if c else None for c in texts] == ["one", "two", "two"]


async def test_recording_again_refreshes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    await RecordingModel(ScriptedModel(["old"]), path).generate(request())
    await RecordingModel(ScriptedModel(["other"]), path).generate(request("kept"))
    await RecordingModel(ScriptedModel(["new"]), path).generate(request())

    replay = ReplayModel(path)
    answer = await replay.generate(request())
    assert answer.content is not None and answer.content.text == "new"
    kept = await replay.generate(request("kept"))
    assert kept.content is not None and kept.content.text == "other"
    document = json.loads(path.read_text())
    assert document["format"] == "trio_agents.recording/1"
    assert len(document["entries"]) == 2


async def test_failed_calls_are_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    recorder = RecordingModel(ScriptedModel([ValueError("model down")]), path)
    with pytest.raises(ValueError, match="model down"):
        await recorder.generate(request())
    with pytest.raises(ReplayMissError):
        await ReplayModel(path).generate(request())


@pytest.mark.parametrize("mode", [StreamingMode.NONE, StreamingMode.SSE])
async def test_a_recorded_agent_run_replays_offline(tmp_path: Path, mode: StreamingMode) -> None:
    def weather(city: str) -> str:
        """Weather.

        Args:
            city: Where.
        """
        return f"sunny in {city}"

    path = tmp_path / "traffic.json"
    call = LlmResponse(
        content=Content(role="model", parts=[Part.from_function_call("weather", {"city": "Oslo"})])
    )
    live = ScriptedModel([call, ["It is ", "It is sunny."]])
    config = RunConfig(streaming_mode=mode)

    async def run(model: Any) -> Any:
        runner = InMemoryRunner(LlmAgent(name="a", model=model, tools=[weather]))
        return await collect(runner, user_id="u", new_message="weather?", run_config=config)

    recorded = await run(RecordingModel(live, path))
    replayed = await run(ReplayModel(path))
    assert normalize(replayed.events) == normalize(recorded.events)
    assert replayed.events[-1].text == "It is sunny."
    assert len(live.requests) == 2  # the replay never called the live model


# -- misses and bad files --------------------------------------------------------------------------


async def test_a_miss_names_the_request(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    await RecordingModel(ScriptedModel(["hello"]), path).generate(request("hi", model="scripted"))
    asked = LlmRequest(
        model="scripted",
        contents=[Content.from_text("What is the weather in Oslo today?")],
        tools=[FunctionDeclaration(name="weather")],
    )
    with pytest.raises(ReplayMissError) as info:
        await ReplayModel(path).generate(asked)
    error = info.value
    assert error.key == request_key(asked)
    assert error.path == str(path)
    assert error.summary == (
        "model 'scripted', 1 contents, last user: 'What is the weather in Oslo today?', "
        "tools: weather"
    )
    message = str(error)
    assert error.key[:16] in message
    assert "What is the weather in Oslo today?" in message
    assert "RecordingModel" in message


async def test_a_miss_on_a_missing_file_says_so(tmp_path: Path) -> None:
    replay = ReplayModel(tmp_path / "none.json")
    assert replay.model == "replay"
    with pytest.raises(ReplayMissError, match=r"none\.json \(no such file\)"):
        await streamed(replay, request())


async def test_a_miss_summarises_calls_and_responses(tmp_path: Path) -> None:
    answer = Content(role="user", parts=[Part.from_function_response("f", {"x": 1}, id="c")])
    with pytest.raises(ReplayMissError, match="last user: response f"):
        await ReplayModel(tmp_path / "none.json").generate(LlmRequest(model="m", contents=[answer]))


async def test_several_models_need_a_name_each(tmp_path: Path) -> None:
    path = tmp_path / "traffic.json"
    await RecordingModel(ScriptedModel(["a"], model="one"), path).generate(request(model="one"))
    await RecordingModel(ScriptedModel(["b"], model="two"), path).generate(request(model="two"))
    with pytest.raises(ConfigurationError, match="several models"):
        ReplayModel(path)
    two = ReplayModel(path, model="two")
    answer = await two.generate(request(model="two"))
    assert answer.content is not None and answer.content.text == "b"


@pytest.mark.parametrize(
    ("text", "problem"),
    [("not json", "is not JSON"), ('{"format": "other"}', "is not a trio_agents.recording/1")],
)
def test_a_foreign_file_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "traffic.json"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=problem):
        ReplayModel(path)
