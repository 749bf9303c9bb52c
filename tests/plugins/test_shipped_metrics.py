"""MetricsPlugin: counts, exact latencies under a mock clock, cancellation, Prometheus text."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, strategies as st

from tests.plugins.helpers import Recorder, Run, fc, reply
from trio_agents import (
    ConfigurationError,
    Content,
    InMemoryRunner,
    LlmAgent,
    ParallelAgent,
    Part,
    RunConfig,
    StreamingMode,
    UsageMetadata,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.plugins import (
    AgentKey,
    ErrorKey,
    Histogram,
    MetricsPlugin,
    MetricsSnapshot,
    ModelKey,
    ResponseCachePlugin,
    TokenKey,
    ToolPolicyPlugin,
    deny,
    render_prometheus,
)
from trio_agents.testing import ScriptedModel

IDLE = {"invocations": 0, "agents": 0, "models": 0, "tools": 0}


def timed_model(*steps: tuple[float, Any]) -> ScriptedModel:
    """A model that sleeps ``seconds`` and then answers ``entry``, one step per call."""
    script = list(steps)

    async def handler(request: LlmRequest) -> Any:
        seconds, entry = script.pop(0)
        await trio.sleep(seconds)
        if isinstance(entry, BaseException):
            raise entry
        return entry

    return ScriptedModel(handler)


async def sleepy(seconds: float = 0) -> dict[str, float]:
    await trio.sleep(seconds)
    return {"slept": seconds}


async def boom() -> None:
    await trio.sleep(1)
    raise RuntimeError("boom")


async def forever() -> None:
    await trio.sleep_forever()


def usage(prompt: int, completion: int) -> UsageMetadata:
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=completion,
        total_token_count=prompt + completion,
    )


async def test_counts_latencies_and_tokens_of_a_one_tool_run_are_exact(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answer = LlmResponse(
        content=Content.from_text("done", role="model"), usage_metadata=usage(7, 3)
    )
    call = LlmResponse(
        content=Content(role="model", parts=[Part.from_function_call("sleepy", {"seconds": 2})]),
        usage_metadata=usage(5, 1),
    )
    model = timed_model((1.0, call), (0.5, answer))
    metrics = MetricsPlugin(buckets=(0.5, 1.0, 5.0))
    await Run(LlmAgent(name="a", model=model, tools=[sleepy]), metrics).send()
    snap = metrics.snapshot()
    assert snap.invocations == {"ok": 1}
    assert snap.invocation_seconds == Histogram(
        bounds=(0.5, 1.0, 5.0), counts=(0, 0, 1, 0), count=1, sum=3.5
    )
    assert snap.agent_runs == {("a", "ok"): 1}
    assert snap.agent_seconds["a"].sum == 3.5
    assert snap.model_calls == {("a", "scripted", "ok"): 2}
    assert snap.model_seconds["a", "scripted"] == Histogram(
        bounds=(0.5, 1.0, 5.0), counts=(1, 1, 0, 0), count=2, sum=1.5
    )
    assert snap.tool_calls == {("a", "sleepy", "ok"): 1}
    assert snap.tool_seconds["a", "sleepy"].sum == 2.0
    assert snap.tokens == {
        ("a", "scripted", "prompt"): 12,
        ("a", "scripted", "completion"): 4,
        ("a", "scripted", "total"): 16,
    }
    assert snap.errors == {}
    assert snap.in_flight == IDLE


async def test_an_unrecovered_tool_error_is_counted_everywhere_it_escapes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = MetricsPlugin()
    agent = LlmAgent(name="a", model=ScriptedModel([fc("boom"), "never"]), tools=[boom])
    with pytest.raises(RuntimeError):
        await Run(agent, metrics).send()
    snap = metrics.snapshot()
    assert snap.tool_calls == {("a", "boom", "error"): 1}
    assert snap.tool_seconds["a", "boom"].sum == 1.0
    assert snap.errors == {
        ErrorKey("tool", "boom", "RuntimeError"): 1,
        ErrorKey("agent", "a", "RuntimeError"): 1,
        ErrorKey("run", "a", "RuntimeError"): 1,
    }
    assert snap.agent_runs == {("a", "error"): 1}
    assert snap.invocations == {"error": 1}
    assert snap.in_flight == IDLE


async def test_a_recovered_tool_error_counts_as_an_error_call_in_a_good_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = MetricsPlugin()
    recovery = Recorder("recovery", on_tool_error={"recovered": True})
    agent = LlmAgent(name="a", model=ScriptedModel([fc("boom"), "ok"]), tools=[boom])
    await Run(agent, metrics, recovery).send()
    snap = metrics.snapshot()
    assert snap.tool_calls == {("a", "boom", "error"): 1}
    assert snap.errors == {ErrorKey("tool", "boom", "RuntimeError"): 1}
    assert snap.invocations == {"ok": 1}
    assert snap.in_flight == IDLE


async def test_model_errors_recovered_or_not(autojump_clock: trio.testing.MockClock) -> None:
    metrics = MetricsPlugin()
    model = timed_model((2.0, ConnectionError("down")))
    with pytest.raises(ConnectionError):
        await Run(LlmAgent(name="a", model=model), metrics).send()
    recovered = timed_model((1.0, ConnectionError("down")))
    fallback = Recorder("fallback", on_model_error=reply("fallback"))
    await Run(LlmAgent(name="b", model=recovered), metrics, fallback).send()
    snap = metrics.snapshot()
    assert snap.model_calls == {("a", "scripted", "error"): 1, ("b", "scripted", "error"): 1}
    assert snap.model_seconds["a", "scripted"].sum == 2.0
    assert snap.model_seconds["b", "scripted"].sum == 1.0
    assert snap.errors[ErrorKey("model", "scripted", "ConnectionError")] == 2
    assert snap.invocations == {"error": 1, "ok": 1}
    assert snap.in_flight == IDLE


# -- cancellation: cancelled calls are counted, nothing leaks -------------------------------------


async def test_a_model_call_cancelled_by_the_caller_counts_as_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = MetricsPlugin()
    model = timed_model((100.0, "never"))
    run = await Run(LlmAgent(name="a", model=model), metrics).start()
    async with run.runner.run(user_id="u", session_id=run.session_id, new_message="hi") as events:
        await trio.sleep(3)
        events.cancel("operator")
        async for _ in events:
            pass
    snap = metrics.snapshot()
    assert snap.model_calls == {("a", "scripted", "cancelled"): 1}
    assert snap.model_seconds["a", "scripted"].sum == 3.0
    assert snap.agent_runs == {("a", "cancelled"): 1}
    assert snap.invocations == {"cancelled": 1}
    assert snap.errors == {}
    assert snap.in_flight == IDLE


async def test_a_tool_call_cut_by_an_outer_deadline_counts_as_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = MetricsPlugin()
    agent = LlmAgent(name="a", model=ScriptedModel([fc("forever")]), tools=[forever])
    with trio.move_on_after(5):
        await Run(agent, metrics).send()
    snap = metrics.snapshot()
    assert snap.tool_calls == {("a", "forever", "cancelled"): 1}
    assert snap.tool_seconds["a", "forever"].sum == 5.0
    assert snap.model_calls == {("a", "scripted", "ok"): 1}
    assert snap.invocations == {"cancelled": 1}
    assert snap.in_flight == IDLE


async def test_siblings_cancelled_by_a_failing_tool_count_as_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = MetricsPlugin()
    turn = LlmResponse(
        content=Content(
            role="model",
            parts=[Part.from_function_call("boom", {}), Part.from_function_call("forever", {})],
        )
    )
    agent = LlmAgent(name="a", model=ScriptedModel([turn]), tools=[boom, forever])
    with pytest.raises(RuntimeError):
        await Run(agent, metrics).send()
    snap = metrics.snapshot()
    assert snap.tool_calls == {("a", "boom", "error"): 1, ("a", "forever", "cancelled"): 1}
    assert snap.tool_seconds["a", "forever"].sum == 1.0
    assert snap.invocations == {"error": 1}
    assert snap.in_flight == IDLE


async def test_consumer_leaving_a_parallel_run_counts_open_work_as_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = MetricsPlugin()
    a = LlmAgent(name="A", model=timed_model((1.0, "A done")))
    b = LlmAgent(name="B", model=ScriptedModel([fc("forever")]), tools=[forever])
    run = await Run(ParallelAgent(name="par", sub_agents=[a, b]), metrics).start()
    async with run.runner.run(user_id="u", session_id=run.session_id, new_message="hi") as events:
        async for event in events:
            if event.text == "A done":
                break
    snap = metrics.snapshot()
    assert snap.model_calls[ModelKey("A", "scripted", "ok")] == 1
    assert snap.tool_calls == {("B", "forever", "cancelled"): 1}
    assert snap.agent_runs[AgentKey("A", "ok")] == 1
    assert snap.agent_runs[AgentKey("B", "cancelled")] == 1
    assert snap.agent_runs[AgentKey("par", "cancelled")] == 1
    assert snap.invocations == {"cancelled": 1}
    assert snap.in_flight == IDLE


@given(
    _seed=st.random_module(),
    width=st.integers(min_value=1, max_value=3),
    stop_after=st.integers(min_value=0, max_value=8),
    how=st.sampled_from(["complete", "leave", "cancel"]),
)
async def test_counts_match_the_work_done_under_any_interleaving_and_stop(
    _seed: Any, width: int, stop_after: int, how: str
) -> None:
    async def work() -> dict[str, int]:
        await trio.lowlevel.checkpoint()
        return {"ok": 1}

    async def answer(request: LlmRequest) -> LlmResponse:
        await trio.lowlevel.checkpoint()
        if request.contents[-1].parts[0].function_response is None:
            return fc("work")
        return reply("done")

    models = [ScriptedModel(answer) for _ in range(width)]
    par = ParallelAgent(
        name="par",
        sub_agents=[
            LlmAgent(name=f"b{i}", model=model, tools=[work]) for i, model in enumerate(models)
        ],
    )
    metrics = MetricsPlugin()
    counter = Recorder("counter")
    runner = InMemoryRunner(par, plugins=[metrics, counter])
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        seen = 0
        async for _ in events:
            seen += 1
            if how != "complete" and seen > stop_after:
                if how == "leave":
                    break
                events.cancel("stop")
    snap = metrics.snapshot()
    assert snap.in_flight == IDLE
    assert sum(snap.invocations.values()) == 1
    # Every model call that started is counted once, whatever its status.
    assert sum(snap.model_calls.values()) == len(counter.seen("before_model"))
    assert sum(snap.tool_calls.values()) == len(counter.seen("before_tool"))
    assert sum(snap.agent_runs.values()) == len(counter.seen("before_agent"))
    ok_models = sum(n for key, n in snap.model_calls.items() if key.status == "ok")
    assert ok_models == len(counter.seen("after_model"))
    if how == "complete":
        assert snap.invocations == {"ok": 1}
        assert ok_models == 2 * width


# -- interplay with the other shipped plugins -----------------------------------------------------


@pytest.mark.parametrize("metrics_first", [True, False])
async def test_denied_tool_calls_are_counted_as_denied(metrics_first: bool) -> None:
    metrics = MetricsPlugin()
    policy = ToolPolicyPlugin([deny("sleepy")])
    plugins = [metrics, policy] if metrics_first else [policy, metrics]
    agent = LlmAgent(name="a", model=ScriptedModel([fc("sleepy"), "ok"]), tools=[sleepy])
    await Run(agent, *plugins).send()
    snap = metrics.snapshot()
    assert snap.tool_calls == {("a", "sleepy", "denied"): 1}
    assert snap.in_flight == IDLE


async def test_cache_hits_registered_before_metrics_are_not_model_calls() -> None:
    metrics = MetricsPlugin()
    cache = ResponseCachePlugin()
    model = ScriptedModel(["once"])
    runner = InMemoryRunner(LlmAgent(name="a", model=model), plugins=[cache, metrics])
    for _ in range(3):
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        async with runner.run(user_id="u", session_id=session.id, new_message="same") as ev:
            assert [e.text async for e in ev] == ["once"]
    snap = metrics.snapshot()
    assert snap.model_calls == {("a", "scripted", "ok"): 1}
    assert snap.invocations == {"ok": 3}
    assert snap.in_flight == IDLE


async def test_streamed_chunks_count_one_call_and_the_final_usage_only() -> None:
    chunks = [
        LlmResponse(content=Content.from_text("Hel", role="model"), usage_metadata=usage(4, 1)),
        LlmResponse(content=Content.from_text("Hello", role="model"), usage_metadata=usage(4, 2)),
    ]
    metrics = MetricsPlugin()
    await Run(LlmAgent(name="a", model=ScriptedModel([chunks])), metrics).send(
        run_config=RunConfig(streaming_mode=StreamingMode.SSE)
    )
    snap = metrics.snapshot()
    assert snap.model_calls == {("a", "scripted", "ok"): 1}
    assert snap.tokens[TokenKey("a", "scripted", "completion")] == 2


async def test_agent_tool_children_are_invocations_of_their_own() -> None:
    from trio_agents.tools import AgentTool

    metrics = MetricsPlugin()
    child = LlmAgent(name="child", model=ScriptedModel(["child answer"]))
    parent = LlmAgent(
        name="parent",
        model=ScriptedModel([fc("child", {"request": "go"}), "done"]),
        tools=[AgentTool(child)],
    )
    await Run(parent, metrics).send()
    snap = metrics.snapshot()
    assert snap.invocations == {"ok": 2}
    assert snap.agent_runs == {("parent", "ok"): 1, ("child", "ok"): 1}
    assert snap.tool_calls == {("parent", "child", "ok"): 1}
    assert snap.in_flight == IDLE


def test_buckets_must_be_increasing_and_finite() -> None:
    for bad in [(), (1.0, 1.0), (2.0, 1.0), (1.0, float("inf"))]:
        with pytest.raises(ConfigurationError, match="buckets"):
            MetricsPlugin(buckets=bad)


# -- Prometheus text -------------------------------------------------------------------------------


def test_render_prometheus_text_format() -> None:
    hist = Histogram(bounds=(0.5, 2.0), counts=(1, 0, 2), count=3, sum=7.25)
    snap = MetricsSnapshot(
        invocations={"ok": 2, "error": 1},
        invocation_seconds=hist,
        agent_runs={AgentKey("a", "ok"): 2},
        agent_seconds={"a": hist},
        model_calls={ModelKey("a", 'm"1\\x\ny', "ok"): 3},
        model_seconds={},
        tool_calls={},
        tool_seconds={("a", "t"): hist},
        errors={ErrorKey("tool", "t", "RuntimeError"): 1},
        tokens={},
        in_flight={"models": 0, "agents": 1},
    )
    text = render_prometheus(snap, namespace="ns")
    lines = text.splitlines()
    assert text.endswith("\n")
    assert "# TYPE ns_invocations_total counter" in lines
    assert 'ns_invocations_total{status="error"} 1' in lines
    assert 'ns_invocations_total{status="ok"} 2' in lines
    assert lines.index('ns_invocations_total{status="error"} 1') < lines.index(
        'ns_invocations_total{status="ok"} 2'
    )
    assert "# TYPE ns_invocation_duration_seconds histogram" in lines
    assert [line for line in lines if line.startswith("ns_invocation_duration_seconds")] == [
        'ns_invocation_duration_seconds_bucket{le="0.5"} 1',
        'ns_invocation_duration_seconds_bucket{le="2.0"} 1',
        'ns_invocation_duration_seconds_bucket{le="+Inf"} 3',
        "ns_invocation_duration_seconds_sum 7.25",
        "ns_invocation_duration_seconds_count 3",
    ]
    assert 'ns_agent_run_duration_seconds_bucket{agent="a",le="+Inf"} 3' in lines
    assert 'ns_tool_call_duration_seconds_count{agent="a",tool="t"} 3' in lines
    assert 'ns_model_calls_total{agent="a",model="m\\"1\\\\x\\ny",status="ok"} 3' in lines
    assert 'ns_errors_total{where="tool",name="t",error_type="RuntimeError"} 1' in lines
    assert "# TYPE ns_in_flight gauge" in lines
    assert 'ns_in_flight{kind="agents"} 1' in lines
    # Every sample line is "name{labels} value" with a number value.
    for line in lines:
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            float(value)
            assert name.startswith("ns_")


async def test_plugin_renders_its_own_snapshot() -> None:
    metrics = MetricsPlugin()
    await Run(LlmAgent(name="a", model=ScriptedModel(["hi"])), metrics).send()
    text = metrics.render_prometheus()
    assert 'trio_agents_invocations_total{status="ok"} 1' in text
    assert 'trio_agents_model_calls_total{agent="a",model="scripted",status="ok"} 1' in text
