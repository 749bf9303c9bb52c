"""collect, normalize, RecordingPlugin and ScriptedAgent: the kit's run-and-observe helpers."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.testing.delivery import NEEDS_FULL_DELIVERY
from trio_agents import (
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    LlmAgent,
    LoopAgent,
    Part,
    SequentialAgent,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.testing import (
    Application,
    InjectedError,
    RecordingPlugin,
    ScriptedAgent,
    ScriptedModel,
    Step,
    Stop,
    Trace,
    check_invariants,
    collect,
    normalize,
    run_application,
)


def weather(city: str) -> str:
    """Weather.

    Args:
        city: Where.
    """
    return f"sunny in {city}"


def calls(*parts: Part) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=list(parts)))


def weather_agent(*more: Any) -> LlmAgent:
    script = [calls(Part.from_function_call("weather", {"city": "Oslo"})), "It is sunny.", *more]
    return LlmAgent(name="a", model=ScriptedModel(script), tools=[weather])


# -- normalize -------------------------------------------------------------------------------------

NO_ACTIONS: dict[str, Any] = {"artifactDelta": {}, "requestedAuthConfigs": {}, "stateDelta": {}}
GOLDEN = [
    {
        "actions": NO_ACTIONS,
        "author": "user",
        "content": {"parts": [{"text": "weather?"}], "role": "user"},
        "id": "<id-1>",
        "invocationId": "<invocation-1>",
    },
    {
        "actions": NO_ACTIONS,
        "author": "a",
        "content": {
            "parts": [
                {"functionCall": {"args": {"city": "Oslo"}, "id": "<call-1>", "name": "weather"}}
            ],
            "role": "model",
        },
        "id": "<id-2>",
        "invocationId": "<invocation-1>",
    },
    {
        "actions": NO_ACTIONS,
        "author": "a",
        "content": {
            "parts": [
                {
                    "functionResponse": {
                        "id": "<call-1>",
                        "name": "weather",
                        "response": {"result": "sunny in Oslo"},
                    }
                }
            ],
            "role": "user",
        },
        "id": "<id-3>",
        "invocationId": "<invocation-1>",
    },
    {
        "actions": NO_ACTIONS,
        "author": "a",
        "content": {"parts": [{"text": "It is sunny."}], "role": "model"},
        "finishReason": "STOP",
        "id": "<id-4>",
        "invocationId": "<invocation-1>",
    },
]


async def test_normalize_matches_a_golden_history() -> None:
    result = await collect(InMemoryRunner(weather_agent()), user_id="u", new_message="weather?")
    assert normalize(result.session.events) == GOLDEN
    # the consumer never receives the user event; numbering starts at the first event given
    assert normalize(result.events) == normalize(result.session.events[1:])
    assert normalize(result.events)[0]["id"] == "<id-1>"


async def test_two_runs_normalize_alike_although_ids_and_times_differ() -> None:
    first = await collect(InMemoryRunner(weather_agent()), user_id="u", new_message="weather?")
    second = await collect(InMemoryRunner(weather_agent()), user_id="u", new_message="weather?")
    assert [e.id for e in first.events] != [e.id for e in second.events]
    assert normalize(first.events) == normalize(second.events)


def test_normalize_keeps_references_between_events() -> None:
    """Same id → same placeholder; different ids → different ones; numbered by first use."""
    call = Part.from_function_call("f", {}, id="zzz")
    events = [
        Event(id="b", invocation_id="i2", content=Content(role="model", parts=[call])),
        Event(
            id="a",
            invocation_id="i1",
            long_running_tool_ids={"zzz"},
            actions=EventActions(requested_auth_configs={"zzz": {"scheme": "oauth2"}}),
        ),
        Event(
            id="c",
            invocation_id="i2",
            content=Content(role="user", parts=[Part.from_function_response("f", {}, id="zzz")]),
        ),
    ]
    out = normalize(events)
    assert [e["id"] for e in out] == ["<id-1>", "<id-2>", "<id-3>"]
    assert [e["invocationId"] for e in out] == [
        "<invocation-1>",
        "<invocation-2>",
        "<invocation-1>",
    ]
    assert out[0]["content"]["parts"][0]["functionCall"]["id"] == "<call-1>"
    assert out[1]["longRunningToolIds"] == ["<call-1>"]
    assert out[1]["actions"]["requestedAuthConfigs"] == {"<call-1>": {"scheme": "oauth2"}}
    assert out[2]["content"]["parts"][0]["functionResponse"]["id"] == "<call-1>"
    assert all("timestamp" not in e for e in out)


def test_normalize_sees_real_differences() -> None:
    one = Event(author="a", content=Content.from_text("yes", role="model"))
    other = Event(author="a", content=Content.from_text("no", role="model"))
    assert normalize([one]) != normalize([other])


# -- collect ---------------------------------------------------------------------------------------


async def test_collect_creates_a_session_and_returns_what_was_delivered() -> None:
    runner = InMemoryRunner(weather_agent())
    result = await collect(runner, user_id="u", new_message="weather?")
    assert result.error is None
    assert [e.text for e in result.events] == [None, None, "It is sunny."]
    assert list(result.session.events)[1:] == result.events
    listed = await runner.session_service.list_sessions(app_name=runner.app_name, user_id="u")
    assert [s.id for s in listed] == [result.session.id]


async def test_collect_continues_a_given_session() -> None:
    runner = InMemoryRunner(
        weather_agent(calls(Part.from_function_call("weather", {"city": "Rome"})), "Also sunny.")
    )
    first = await collect(runner, user_id="u", new_message="weather?")
    second = await collect(
        runner, user_id="u", session_id=first.session.id, new_message="and Rome?"
    )
    assert len(second.session.events) == 8
    assert second.events[-1].text == "Also sunny."
    assert check_invariants(second.events, second.session) == []


async def test_collect_raises_the_runs_error_by_default() -> None:
    runner = InMemoryRunner(ScriptedAgent(name="bad", script=["emit", "raise"]))
    with pytest.raises(InjectedError, match="bad failed at step 1 of run 1"):
        await collect(runner, user_id="u", new_message="go")


@NEEDS_FULL_DELIVERY
async def test_collect_returns_the_error_and_the_failed_runs_history() -> None:
    runner = InMemoryRunner(ScriptedAgent(name="bad", script=["emit", "raise"]))
    result = await collect(runner, user_id="u", new_message="go", raise_errors=False)
    assert isinstance(result.error, InjectedError)
    assert result.error.agent == "bad"
    assert [e.actions.state_delta for e in result.events] == [{"bad.0": 1}]
    error_event = result.session.events[-1]
    assert (error_event.author, error_event.error_code) == ("bad", "InjectedError")
    assert error_event.error_message == "bad failed at step 1 of run 1"
    assert result.session.state == {"bad.0": 1}
    assert check_invariants(result.events, result.session) == []


async def test_collect_passes_the_state_delta_and_run_config() -> None:
    seen: list[Any] = []

    def handler(request: LlmRequest) -> str:
        seen.append(request)
        return "ok"

    runner = InMemoryRunner(LlmAgent(name="a", model=ScriptedModel(handler), instruction="{x}"))
    result = await collect(runner, user_id="u", new_message="hi", state_delta={"x": "given"})
    assert result.session.state == {"x": "given"}
    assert "given" in (seen[0].system_instruction or "")


# -- RecordingPlugin ------------------------------------------------------------------------------


async def test_recording_plugin_sees_every_hook_in_order() -> None:
    recorder = RecordingPlugin()
    runner = InMemoryRunner(weather_agent(), plugins=[recorder])
    result = await collect(runner, user_id="u", new_message="weather?")
    assert recorder.hooks() == [
        "on_user_message",
        "before_run",
        "before_agent",
        "before_model",
        "after_model",
        "on_event",
        "before_tool",
        "after_tool",
        "on_event",
        "before_model",
        "after_model",
        "on_event",
        "after_agent",
        "after_run",
    ]
    (tool_call,) = recorder.calls_of("before_tool")
    assert tool_call["tool_args"] == {"city": "Oslo"}
    events = [args["event"] for args in recorder.calls_of("on_event")]
    assert [e.id for e in events] == [e.id for e in result.events]
    invocation = result.events[0].invocation_id
    assert {c.invocation_id for c in recorder.calls} == {invocation}


async def test_recording_plugin_keeps_arguments_as_they_were_at_the_call() -> None:
    class Editor(RecordingPlugin):
        async def before_model_callback(self, **kwargs: Any) -> None:
            kwargs["llm_request"].append_instructions("added later")

    recorder = RecordingPlugin()
    runner = InMemoryRunner(weather_agent(), plugins=[recorder, Editor("editor")])
    await collect(runner, user_id="u", new_message="weather?")
    recorded = recorder.calls_of("before_model")[0]["llm_request"]
    assert "added later" not in (recorded.system_instruction or "")


async def test_recording_plugin_sees_failures_and_close() -> None:
    recorder = RecordingPlugin()
    runner = InMemoryRunner(ScriptedAgent(name="bad", script=["raise"]), plugins=[recorder])
    result = await collect(runner, user_id="u", new_message="go", raise_errors=False)
    assert result.error is not None
    assert "on_agent_error" in recorder.hooks()
    assert recorder.hooks()[-1] == "on_run_error"
    assert "after_run" not in recorder.hooks()
    await runner.close()
    assert recorder.hooks()[-1] == "close"
    assert recorder.calls[-1].invocation_id is None
    recorder.clear()
    assert recorder.calls == []


def test_recording_plugin_refuses_unknown_hooks() -> None:
    with pytest.raises(ValueError, match="unknown hook 'before_everything'"):
        RecordingPlugin().calls_of("before_everything")


# -- ScriptedAgent ---------------------------------------------------------------------------------


def tags(events: list[Event]) -> list[tuple[Any, ...]]:
    out = []
    for event in events:
        tag = (event.custom_metadata or {})["fuzz"]
        assert isinstance(tag, dict)
        out.append((tag["agent"], tag["run"], tag["step"], tag["kind"], bool(event.partial)))
    return out


async def test_scripted_agent_follows_every_kind_of_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script: list[Step | str] = [
        "emit",
        Step("emit", scope="app:"),
        Step("emit", scope="user:"),
        Step("emit", scope="temp:"),
        "partial",
        Step("call", seconds=2),
        Step("sleep", seconds=5),
        "escalate",
    ]
    agent = ScriptedAgent(name="s", script=script)
    started = trio.current_time()
    result = await collect(InMemoryRunner(agent), user_id="u", new_message="go")
    assert trio.current_time() - started == pytest.approx(7)
    assert tags(result.events) == [
        ("s", 1, 0, "emit", False),
        ("s", 1, 1, "emit", False),
        ("s", 1, 2, "emit", False),
        ("s", 1, 3, "emit", False),
        ("s", 1, 4, "partial", True),
        ("s", 1, 5, "call", False),
        ("s", 1, 5, "response", False),
        ("s", 1, 7, "escalate", False),
    ]
    deltas = [dict(e.actions.state_delta) for e in result.events]
    assert deltas[:5] == [
        {"s.0": 1},
        {"app:s.1": 1},
        {"user:s.2": 1},
        {},  # temp: keys are stripped from what is committed
        {"partial.s.4": 1},
    ]
    assert result.session.state == {"s.0": 1, "app:s.1": 1, "user:s.2": 1, "s.7": 1}
    call, answer = result.events[5:7]
    assert call.get_function_calls()[0].id == answer.get_function_responses()[0].id == "s-1-5"
    assert result.events[-1].actions.escalate is True
    assert check_invariants(result.events, result.session) == []


async def test_scripted_agent_numbers_its_runs() -> None:
    agent = ScriptedAgent(name="s", script=["emit"])
    loop = LoopAgent(name="loop", sub_agents=[agent], max_iterations=3)
    runner = InMemoryRunner(loop)
    result = await collect(runner, user_id="u", new_message="go")
    assert tags(result.events) == [("s", run, 0, "emit", False) for run in (1, 2, 3)]
    assert result.session.state == {"s.0": 3}
    # run numbers count within one invocation: the next invocation starts at 1 again
    again = await collect(runner, user_id="u", session_id=result.session.id, new_message="again")
    assert tags(again.events) == tags(result.events)


async def test_an_escalating_scripted_agent_ends_its_loop() -> None:
    agent = ScriptedAgent(name="s", script=["emit", "escalate", "emit"])
    loop = LoopAgent(name="loop", sub_agents=[agent], max_iterations=3)
    result = await collect(InMemoryRunner(loop), user_id="u", new_message="go")
    assert [t[1:4] for t in tags(result.events)] == [
        (1, 0, "emit"),
        (1, 1, "escalate"),
        (1, 2, "emit"),
    ]


async def test_a_traced_scripted_agent_checks_the_handshake_from_inside() -> None:
    trace = Trace()
    root = SequentialAgent(
        name="root",
        sub_agents=[
            ScriptedAgent(name="a", script=["emit", "partial", "call"], trace=trace),
            ScriptedAgent(name="b", script=[Step("emit", scope="temp:")], trace=trace),
        ],
    )
    app = Application(root, trace)
    run = await run_application(app, Stop())
    assert run.error is None
    assert trace.violations == []
    assert trace.runs == {"a": 1, "b": 1}
    assert trace.emitted == {"a": 4, "b": 1}
    assert trace.running == 0
    assert app.violations(run) == []


async def test_the_trace_reports_an_emit_the_consumer_never_saw() -> None:
    """Without the consumer reporting what it received, rule 1 reads as broken."""
    trace = Trace()
    runner = InMemoryRunner(ScriptedAgent(name="a", script=["emit"], trace=trace))
    await collect(runner, user_id="u", new_message="go")
    (violation,) = trace.violations
    assert violation.startswith("rule 1: a event ")
    assert violation.endswith("resumed before the consumer received it")


def test_steps_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown step kind 'jump'"):
        Step("jump")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown state scope 'global:'"):
        Step("emit", scope="global:")
    with pytest.raises(ValueError, match="cannot last -1 seconds"):
        Step("sleep", seconds=-1)
    assert repr(Step("call", seconds=2.5, scope="app:")) == "call[2.5s][app:]"
    assert (
        repr(ScriptedAgent(name="s", script=["emit", "raise"])) == "ScriptedAgent(s: emit, raise)"
    )
