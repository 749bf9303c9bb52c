"""Deadlines as cancel scopes: ``BaseAgent.timeout``, ``FunctionTool(timeout=)`` and
``RunConfig.model_idle_timeout``, all on a virtual clock (``autojump_clock``)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from tests.agents.llm_helpers import Chat, call, calls, fc, kinds, responses
from trio_agents import (
    AgentTimeoutError,
    BaseAgent,
    ConfigurationError,
    Content,
    Event,
    InvocationContext,
    LlmAgent,
    ModelTimeoutError,
    ParallelAgent,
    RunConfig,
    SequentialAgent,
    StreamingMode,
    TrioAgentsError,
)
from trio_agents.models import LlmRequest, LlmResponse, Model
from trio_agents.testing import ScriptedModel
from trio_agents.tools import AgentTool, FunctionTool, LongRunningFunctionTool


class Sleeper(BaseAgent):
    """Emits ``before``, then sleeps ``seconds``; records how it ended."""

    seconds: float
    ended: list[str]

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(custom_metadata={"step": "before"}))
        try:
            await trio.sleep(self.seconds)
        except trio.Cancelled:
            self.ended.append(f"{self.name} cancelled")
            raise
        self.ended.append(f"{self.name} finished")
        await ctx.emit(Event(custom_metadata={"step": "after"}))


def assert_paired(stored: list[Event]) -> None:
    calls_made = {c.id for e in stored for c in e.get_function_calls()}
    answered = {r.id for e in stored for r in e.get_function_responses()}
    assert calls_made <= answered


# -- agents ---------------------------------------------------------------------------------------


async def test_an_agent_past_its_timeout_fails_with_a_delivered_error_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[str] = []
    session = await Chat.start(Sleeper(name="slow", seconds=math.inf, ended=ended, timeout=2.5))
    start = trio.current_time()
    with pytest.raises(AgentTimeoutError) as info:
        await session.send()
    assert trio.current_time() - start == pytest.approx(2.5)
    assert (info.value.agent, info.value.seconds) == ("slow", 2.5)
    assert str(info.value) == "agent 'slow' timed out after 2.5 s"
    assert isinstance(info.value, TrioAgentsError)
    assert isinstance(info.value, TimeoutError)
    assert ended == ["slow cancelled"]
    stored = await session.stored()
    assert stored == session.delivered
    error = stored[-1]
    assert (error.author, error.error_code) == ("slow", "AgentTimeoutError")
    assert error.error_message == "agent 'slow' timed out after 2.5 s"


async def test_an_agent_within_its_timeout_is_not_affected(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[str] = []
    session = await Chat.start(Sleeper(name="quick", seconds=1, ended=ended, timeout=2))
    delivered = await session.send()
    assert [e.custom_metadata for e in delivered] == [{"step": "before"}, {"step": "after"}]
    assert ended == ["quick finished"]


async def test_an_llm_agent_timing_out_in_a_tool_closes_the_open_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def wait_forever() -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    model = ScriptedModel([fc("wait_forever"), "never"])
    agent = LlmAgent(name="a", model=model, tools=[wait_forever], timeout=10)
    session = await Chat.start(agent)
    with pytest.raises(AgentTimeoutError, match="'a' timed out after 10 s"):
        await session.send()
    stored = await session.stored()
    assert kinds(stored) == ["FC:wait_forever", "FR:wait_forever", "E:AgentTimeoutError"]
    assert responses(stored[1])[0][1] == {
        "error": "cancelled",
        "reason": "run failed: AgentTimeoutError",
    }
    assert stored == session.delivered
    assert_paired(stored)


async def test_a_branch_past_its_timeout_fails_the_parallel_agent_and_siblings_are_drained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[str] = []
    fan = ParallelAgent(
        name="fan",
        sub_agents=[
            Sleeper(name="slow", seconds=math.inf, ended=ended, timeout=3),
            Sleeper(name="sibling", seconds=math.inf, ended=ended),
        ],
    )
    session = await Chat.start(fan)
    with pytest.raises(AgentTimeoutError) as info:
        await session.send()
    assert info.value.agent == "slow"
    assert sorted(ended) == ["sibling cancelled", "slow cancelled"]
    stored = await session.stored()
    error = stored[-1]
    assert (error.author, error.branch) == ("slow", "fan.slow")
    assert stored == session.delivered


async def test_a_workflow_agent_timeout_bounds_its_whole_pipeline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[str] = []
    pipeline = SequentialAgent(
        name="pipeline",
        sub_agents=[
            Sleeper(name="one", seconds=2, ended=ended),
            Sleeper(name="two", seconds=2, ended=ended),
        ],
        timeout=3,
    )
    session = await Chat.start(pipeline)
    with pytest.raises(AgentTimeoutError, match="'pipeline' timed out after 3 s"):
        await session.send()
    assert ended == ["one finished", "two cancelled"]
    assert (await session.stored())[-1].author == "pipeline"


# -- tools ----------------------------------------------------------------------------------------


async def slow_lookup(q: str) -> str:
    await trio.sleep(60)
    return f"found {q}"


@pytest.mark.parametrize(
    "make_tool",
    [
        lambda: FunctionTool(slow_lookup, timeout=5),
        lambda: LongRunningFunctionTool(slow_lookup, timeout=5),
    ],
    ids=["function", "long_running"],
)
async def test_a_tool_past_its_timeout_answers_the_model_and_the_run_goes_on(
    autojump_clock: trio.testing.MockClock, make_tool: Any
) -> None:
    model = ScriptedModel([fc("slow_lookup", {"q": "x"}), "The lookup timed out."])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[make_tool()]))
    start = trio.current_time()
    delivered = await session.send()
    assert trio.current_time() - start == pytest.approx(5)
    assert kinds(delivered) == ["FC:slow_lookup", "FR:slow_lookup", "T:The lookup timed out."]
    expected = {"error": "timeout", "tool": "slow_lookup", "seconds": 5.0}
    assert responses(delivered[1]) == [("slow_lookup", expected)]
    sent = model.requests[1].contents[-1].parts[0].function_response
    assert sent is not None
    assert dict(sent.response) == expected


async def test_a_tool_within_its_timeout_returns_its_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([fc("slow_lookup", {"q": "x"}), "done"])
    tool = FunctionTool(slow_lookup, timeout=120)
    delivered = await (await Chat.start(LlmAgent(name="a", model=model, tools=[tool]))).send()
    assert responses(delivered[1]) == [("slow_lookup", {"result": "found x"})]


async def test_an_agent_tool_past_its_timeout_cancels_the_child_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[str] = []
    child = Sleeper(name="child", seconds=math.inf, ended=ended)
    model = ScriptedModel([fc("child", {"request": "go"}), "gave up"])
    parent = LlmAgent(name="parent", model=model, tools=[AgentTool(child, timeout=4)])
    delivered = await (await Chat.start(parent)).send()
    assert ended == ["child cancelled"]
    assert responses(delivered[1]) == [
        ("child", {"error": "timeout", "tool": "child", "seconds": 4.0})
    ]
    assert delivered[-1].text == "gave up"


async def test_concurrent_tools_time_out_independently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def quick() -> str:
        await trio.sleep(1)
        return "quick"

    model = ScriptedModel([calls(call("quick"), call("slow_lookup", {"q": "y"})), "ok"])
    tools = [FunctionTool(quick, timeout=2), FunctionTool(slow_lookup, timeout=2)]
    delivered = await (await Chat.start(LlmAgent(name="a", model=model, tools=tools))).send()
    assert responses(delivered[1]) == [
        ("quick", {"result": "quick"}),
        ("slow_lookup", {"error": "timeout", "tool": "slow_lookup", "seconds": 2.0}),
    ]


# -- models ---------------------------------------------------------------------------------------


class StallingModel(Model):
    """Streams ``chunks`` partial chunks, one second apart, then goes silent."""

    provider = "stalling"

    def __init__(self, chunks: int) -> None:
        self.model = "stall-1"
        self.chunks = chunks

    async def generate(self, request: LlmRequest) -> LlmResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[LlmResponse]]:
        send, receive = trio.open_memory_channel[LlmResponse](0)
        async with trio.open_nursery() as nursery:

            async def produce() -> None:
                async with send:
                    for i in range(self.chunks):
                        await trio.sleep(1)
                        text = Content.from_text(f"chunk {i}", role="model")
                        await send.send(LlmResponse(content=text, partial=True))
                    await trio.sleep_forever()

            nursery.start_soon(produce)
            try:
                yield receive
            finally:
                nursery.cancel_scope.cancel()


@pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])
async def test_a_stalled_model_raises_a_typed_error_naming_provider_and_model(
    autojump_clock: trio.testing.MockClock, streaming: StreamingMode
) -> None:
    session = await Chat.start(LlmAgent(name="a", model=StallingModel(chunks=3)))
    config = RunConfig(streaming_mode=streaming, model_idle_timeout=2.5)
    start = trio.current_time()
    with pytest.raises(ModelTimeoutError) as info:
        await session.send(run_config=config)
    elapsed = trio.current_time() - start
    assert (info.value.provider, info.value.model, info.value.seconds) == (
        "stalling",
        "stall-1",
        2.5,
    )
    assert "stalling model 'stall-1': no response for 2.5 s" in str(info.value)
    if streaming is StreamingMode.SSE:
        # Three chunks one second apart keep it alive; it fails 2.5 s after the last one.
        assert elapsed == pytest.approx(5.5)
        assert [e.text for e in session.delivered if e.partial] == [
            "chunk 0",
            "chunk 1",
            "chunk 2",
        ]
    else:
        assert elapsed == pytest.approx(2.5)
    assert (await session.stored())[-1].error_code == "ModelTimeoutError"


async def test_a_slow_consumer_does_not_count_as_an_idle_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    partial = LlmResponse(content=Content.from_text("a", role="model"), partial=True)
    model = ScriptedModel([[partial, "ab"]])
    session = await Chat.start(LlmAgent(name="a", model=model))
    config = RunConfig(streaming_mode=StreamingMode.SSE, model_idle_timeout=1)
    texts = []
    async with session.runner.run(
        user_id="u", session_id=session.session_id, new_message="hi", run_config=config
    ) as events:
        async for event in events:
            await trio.sleep(10)  # far longer than the idle limit
            texts.append(event.text)
    assert texts == ["a", "ab"]


# -- bad input ------------------------------------------------------------------------------------


BAD = [0, -1, -0.5, math.nan, math.inf, "5", True, [1]]


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_agent_timeout_is_a_configuration_error_naming_it(value: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"agent 'a': timeout must be") as info:
        LlmAgent(name="a", model=ScriptedModel([]), timeout=value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_tool_timeout_is_a_configuration_error_naming_it(value: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"tool 'slow_lookup': timeout must be") as info:
        FunctionTool(slow_lookup, timeout=value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_model_idle_timeout_is_a_configuration_error_naming_it(value: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"RunConfig.model_idle_timeout must be") as info:
        RunConfig(model_idle_timeout=value)
    assert repr(value) in str(info.value)
