"""TracingPlugin: the span tree follows the task tree; no context errors on early exit."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tests.plugins.helpers import Recorder, Run, fc, reply
from trio_agents import (
    ConfigurationError,
    Content,
    LlmAgent,
    ParallelAgent,
    Part,
    SequentialAgent,
    UsageMetadata,
)
from trio_agents.models import LlmResponse
from trio_agents.plugins import TracingPlugin
from trio_agents.testing import ScriptedModel


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def tree(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[Any]:
    """``(name, [children...])`` from the roots down, children sorted by name."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)

    def build(span: ReadableSpan) -> Any:
        children = sorted(by_parent.get(span.context.span_id, []), key=lambda s: s.name)
        return (span.name, [build(c) for c in children]) if children else span.name

    return [build(s) for s in sorted(by_parent.get(None, []), key=lambda s: s.name)]


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def named(spans: Any, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def two_calls() -> LlmResponse:
    parts = [Part.from_function_call("work", {"n": 1}), Part.from_function_call("work", {"n": 2})]
    return LlmResponse(content=Content(role="model", parts=parts))


async def work(n: int = 0) -> dict[str, int]:
    await trio.sleep(0.1 * n)
    return {"n": n}


async def test_span_tree_under_a_parallel_agent_with_concurrent_tool_calls(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: Any
) -> None:
    a = LlmAgent(name="A", model=ScriptedModel([two_calls(), "A done"]), tools=[work])
    b = LlmAgent(name="B", model=ScriptedModel([fc("work"), "B done"]), tools=[work])
    plugin = TracingPlugin(tracer_provider=provider)
    events = await Run(ParallelAgent(name="par", sub_agents=[a, b]), plugin).send()
    spans = exporter.get_finished_spans()
    model = ["generate_content scripted", "generate_content scripted"]
    assert tree(spans) == [
        (
            "invoke_workflow par",
            [
                (
                    "invoke_agent par",
                    [
                        ("invoke_agent A", ["execute_tool work", "execute_tool work", *model]),
                        ("invoke_agent B", ["execute_tool work", *model]),
                    ],
                )
            ],
        )
    ]
    # The two calls of A's turn ran concurrently: their spans overlap.
    first, second = sorted(
        (s for s in named(spans, "execute_tool work") if attrs_of(s)["gen_ai.agent.name"] == "A"),
        key=lambda s: s.start_time or 0,
    )
    assert first.end_time is not None and second.start_time is not None
    assert second.start_time < first.end_time
    a_calls = [str(c.id) for e in events if e.author == "A" for c in e.get_function_calls()]
    assert sorted(attrs_of(s)["gen_ai.tool.call.id"] for s in (first, second)) == sorted(a_calls)
    assert all(s.status.is_ok for s in spans)


async def test_attributes_follow_the_genai_conventions(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    usage = UsageMetadata(prompt_token_count=11, candidates_token_count=4)
    answer = LlmResponse(
        content=Content.from_text("done", role="model"), usage_metadata=usage, finish_reason="STOP"
    )
    agent = LlmAgent(
        name="a", description="helper", model=ScriptedModel([fc("work"), answer]), tools=[work]
    )
    run = Run(agent, TracingPlugin(tracer_provider=provider))
    events = await run.send()
    spans = exporter.get_finished_spans()
    (root,) = named(spans, "invoke_workflow a")
    assert attrs_of(root)["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs_of(root)["gen_ai.conversation.id"] == run.session_id
    assert attrs_of(root)["trio_agents.invocation_id"] == events[0].invocation_id
    (agent_span,) = named(spans, "invoke_agent a")
    assert attrs_of(agent_span)["gen_ai.agent.name"] == "a"
    assert attrs_of(agent_span)["gen_ai.agent.description"] == "helper"
    (tool,) = named(spans, "execute_tool work")
    assert attrs_of(tool)["gen_ai.operation.name"] == "execute_tool"
    assert attrs_of(tool)["gen_ai.tool.name"] == "work"
    assert attrs_of(tool)["gen_ai.tool.call.id"] == events[0].get_function_calls()[0].id
    first, last = sorted(named(spans, "generate_content scripted"), key=lambda s: s.start_time or 0)
    assert first.kind is trace.SpanKind.CLIENT
    assert attrs_of(last)["gen_ai.request.model"] == "scripted"
    assert attrs_of(last)["gen_ai.usage.input_tokens"] == 11
    assert attrs_of(last)["gen_ai.usage.output_tokens"] == 4
    assert attrs_of(last)["gen_ai.response.finish_reasons"] == ("STOP",)
    for span in spans:  # content capture is off by default
        assert not any("messages" in k or "arguments" in k or "result" in k for k in attrs_of(span))


async def test_content_is_captured_only_when_asked(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = LlmAgent(name="a", model=ScriptedModel([fc("work", {"n": 0}), "secret"]), tools=[work])
    await Run(agent, TracingPlugin(tracer_provider=provider, capture_content=True)).send("q?")
    spans = exporter.get_finished_spans()
    (tool,) = named(spans, "execute_tool work")
    assert attrs_of(tool)["gen_ai.tool.call.arguments"] == '{"n": 0}'
    assert attrs_of(tool)["gen_ai.tool.call.result"] == '{"n": 0}'
    last = max(named(spans, "generate_content scripted"), key=lambda s: s.start_time or 0)
    assert "secret" in attrs_of(last)["gen_ai.output.messages"]
    assert "q?" in attrs_of(last)["gen_ai.input.messages"]


async def test_the_tool_span_is_current_while_the_tool_runs(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("user code")

    async def lookup() -> dict[str, bool]:
        with tracer.start_as_current_span("user span"):
            await trio.lowlevel.checkpoint()
        return {"ok": True}

    agent = LlmAgent(name="a", model=ScriptedModel([fc("lookup"), "done"]), tools=[lookup])
    await Run(agent, TracingPlugin(tracer_provider=provider)).send()
    spans = exporter.get_finished_spans()
    (user,) = named(spans, "user span")
    (tool,) = named(spans, "execute_tool lookup")
    assert user.parent is not None
    assert user.parent.span_id == tool.context.span_id
    # Outside the tool nothing of ours is current any more.
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_an_agent_tool_child_run_nests_under_its_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from trio_agents.tools import AgentTool

    child = LlmAgent(name="child", model=ScriptedModel(["child answer"]))
    parent = LlmAgent(
        name="parent",
        model=ScriptedModel([fc("child", {"request": "go"}), "done"]),
        tools=[AgentTool(child)],
    )
    await Run(parent, TracingPlugin(tracer_provider=provider)).send()
    model = "generate_content scripted"
    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_workflow parent",
            [
                (
                    "invoke_agent parent",
                    [
                        (
                            "execute_tool child",
                            [("invoke_workflow child", [("invoke_agent child", [model])])],
                        ),
                        model,
                        model,
                    ],
                )
            ],
        )
    ]


async def test_a_sequence_nests_its_agents(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="one", model=ScriptedModel(["1"])),
            LlmAgent(name="two", model=ScriptedModel(["2"])),
        ],
    )
    await Run(seq, TracingPlugin(tracer_provider=provider)).send()
    model = "generate_content scripted"
    assert tree(exporter.get_finished_spans()) == [
        (
            "invoke_workflow seq",
            [("invoke_agent seq", [("invoke_agent one", [model]), ("invoke_agent two", [model])])],
        )
    ]


# -- errors, early exit, cancellation --------------------------------------------------------------


async def test_errors_mark_the_spans_they_escape(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    agent = LlmAgent(name="a", model=ScriptedModel([fc("boom")]), tools=[boom])
    with pytest.raises(RuntimeError):
        await Run(agent, TracingPlugin(tracer_provider=provider)).send()
    spans = exporter.get_finished_spans()
    for name in ("execute_tool boom", "invoke_agent a", "invoke_workflow a"):
        (span,) = named(spans, name)
        assert span.status.status_code is trace.StatusCode.ERROR
        assert attrs_of(span)["error.type"] == "RuntimeError"
    (tool,) = named(spans, "execute_tool boom")
    assert [e.name for e in tool.events] == ["exception"]
    (model,) = named(spans, "generate_content scripted")
    assert model.status.is_ok


async def test_a_recovered_model_error_keeps_the_error_on_the_model_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = LlmAgent(name="a", model=ScriptedModel([ConnectionError("down")]))
    fallback = Recorder("fallback", on_model_error=reply("fallback"))
    await Run(agent, TracingPlugin(tracer_provider=provider), fallback).send()
    spans = exporter.get_finished_spans()
    (model,) = named(spans, "generate_content scripted")
    assert attrs_of(model)["error.type"] == "ConnectionError"
    (root,) = named(spans, "invoke_workflow a")
    assert root.status.is_ok


@pytest.mark.parametrize("how", ["leave", "cancel", "deadline"])
async def test_early_exit_ends_every_span_without_context_errors(
    how: str,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: Any,
) -> None:
    async def forever() -> None:
        await trio.sleep_forever()

    a = LlmAgent(name="A", model=ScriptedModel(["A done"]))
    b = LlmAgent(name="B", model=ScriptedModel([fc("forever")]), tools=[forever])
    run = await Run(
        ParallelAgent(name="par", sub_agents=[a, b]), TracingPlugin(tracer_provider=provider)
    ).start()
    caplog.set_level(logging.DEBUG)
    with trio.move_on_after(10):
        async with run.runner.run(user_id="u", session_id=run.session_id, new_message="hi") as ev:
            seen: set[str | None] = set()
            async for event in ev:
                seen.add(event.text if event.text else event.author)
                if how != "deadline" and seen >= {"A done", "B"}:
                    await trio.testing.wait_all_tasks_blocked()  # B's tool is running now
                    if how == "leave":
                        break
                    ev.cancel("stop")
    assert not [r for r in caplog.records if "detach" in r.getMessage().lower()]
    spans = exporter.get_finished_spans()
    assert len(named(spans, "invoke_workflow par")) == 1
    (tool,) = named(spans, "execute_tool forever")
    assert tool.status.status_code is trace.StatusCode.ERROR
    assert tool.status.description == "cancelled"
    (b_span,) = named(spans, "invoke_agent B")
    assert b_span.status.description == "cancelled"
    (a_span,) = named(spans, "invoke_agent A")
    assert a_span.status.is_ok
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_without_opentelemetry_the_plugin_explains_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr("importlib.import_module", missing)
    with pytest.raises(ConfigurationError, match="otel"):
        TracingPlugin()
