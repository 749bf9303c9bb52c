"""SSE streaming of an LLM agent (R-PART, S-STR-*, ARCHITECTURE §2 rule 3 and §4 "events").

Partial chunks reach the consumer in order but are never committed; the final aggregate is the
only stored model event. trio_agents gives every event, partial chunks included, its own id and
its own actions.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from tests.agents.llm_helpers import SSE, Chat, call, calls, chat, fc, kinds
from trio_agents import Content, LlmAgent, RunConfig, StreamingMode
from trio_agents.models import LlmRequest, LlmResponse, Model
from trio_agents.testing import ScriptedModel


def chunk(text: str) -> LlmResponse:
    return LlmResponse(content=Content.from_text(text, role="model"), partial=True)


async def test_partial_chunks_are_delivered_but_only_the_aggregate_is_stored_s_str_1() -> None:
    model = ScriptedModel([["Hel", "lo", "Hello"]])
    session = await Chat.start(LlmAgent(name="a", model=model, output_key="out"))
    events = await session.send(run_config=SSE)
    assert [(e.text, e.partial) for e in events] == [("Hel", True), ("lo", True), ("Hello", False)]
    assert [e.is_final_response() for e in events] == [False, False, True]
    assert {e.author for e in events} == {"a"}
    assert {e.invocation_id for e in events} == {events[-1].invocation_id}
    stored = await session.session()
    assert [(e.author, e.text) for e in stored.events] == [("user", "hi"), ("a", "Hello")]
    assert stored.events[-1].id == events[-1].id
    assert stored.state == {"out": "Hello"}


async def test_a_partial_event_keeps_the_chunks_finish_reason_and_error() -> None:
    # ADK 2.13 builds each partial event from its whole chunk: a last chunk that says why the
    # stream stopped (finish_reason, an error code and message) says it on its partial event.
    last = LlmResponse(
        content=Content.from_text("lo", role="model"),
        partial=True,
        finish_reason="MAX_TOKENS",
        error_code="MAX_TOKENS",
        error_message="cut short",
    )
    model = ScriptedModel([[chunk("Hel"), last, "Hello"]])
    events = await chat(LlmAgent(name="a", model=model), run_config=SSE)
    assert [(e.partial, e.finish_reason, e.error_code) for e in events] == [
        (True, None, None),
        (True, "MAX_TOKENS", "MAX_TOKENS"),
        (False, "STOP", None),
    ]
    assert events[1].error_message == "cut short"
    assert not events[1].is_final_response()


async def test_every_chunk_has_its_own_id_and_its_own_actions_s_str_2() -> None:
    model = ScriptedModel([["Hel", "lo", "Hello"]])
    session = await Chat.start(LlmAgent(name="a", model=model, output_key="out"))
    events = await session.send(run_config=SSE)
    assert len({e.id for e in events}) == 3
    # The output_key delta rides on the final event only (no aliasing, R-EV-5 weakness 7).
    assert [dict(e.actions.state_delta) for e in events] == [{}, {}, {"out": "Hello"}]
    stored_ids = {e.id for e in (await session.session()).events}
    assert not stored_ids & {events[0].id, events[1].id}


async def test_a_streamed_function_call_runs_once_from_the_final_event_s_str_4() -> None:
    runs: list[str] = []

    def lookup(q: str) -> str:
        runs.append(q)
        return q.upper()

    partial_call = attrs.evolve(fc("lookup", {"q": "x"}), partial=True)
    model = ScriptedModel([[partial_call, fc("lookup", {"q": "x"})], ["Do", "Done"]])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[lookup]))
    events = await session.send(run_config=SSE)
    assert [(k, e.partial) for k, e in zip(kinds(events), events, strict=True)] == [
        ("FC:lookup", True),
        ("FC:lookup", False),
        ("FR:lookup", None),
        ("T:Do", True),
        ("T:Done", False),
    ]
    assert runs == ["x"]
    assert kinds(await session.stored()) == ["FC:lookup", "FR:lookup", "T:Done"]
    # The model never sees partial chunks in its history.
    second = model.requests[1].contents
    assert len(second) == 3
    assert second[1].parts[0].function_call is not None


async def test_after_model_runs_for_every_chunk_and_replacements_keep_partial_r_part_3() -> None:
    seen: list[tuple[str | None, bool | None]] = []

    def shout(*, callback_context: Any, llm_response: LlmResponse) -> LlmResponse:
        text = llm_response.content.text if llm_response.content else None
        seen.append((text, llm_response.partial))
        # The replacement leaves ``partial`` unset: it is inherited from the original.
        return LlmResponse(content=Content.from_text((text or "").upper(), role="model"))

    model = ScriptedModel([["ab", "abc"]])
    session = await Chat.start(LlmAgent(name="a", model=model, after_model_callback=shout))
    events = await session.send(run_config=SSE)
    assert seen == [("ab", True), ("abc", False)]
    assert [(e.text, e.partial) for e in events] == [("AB", True), ("ABC", False)]
    assert kinds(await session.stored()) == ["T:ABC"]


async def test_without_streaming_no_partial_events_are_produced_r_part_4() -> None:
    for run_config in (None, RunConfig(streaming_mode=StreamingMode.NONE)):
        model = ScriptedModel([["Hel", "lo", "Hello"]])
        session = await Chat.start(LlmAgent(name="a", model=model))
        events = await session.send(run_config=run_config)
        assert [(e.text, e.partial) for e in events] == [("Hello", False)]
        assert kinds(await session.stored()) == ["T:Hello"]


async def test_before_model_short_circuit_streams_nothing_r_llm_4() -> None:
    model = ScriptedModel([["never", "never!"]])
    agent = LlmAgent(
        name="a",
        model=model,
        before_model_callback=lambda *, callback_context, llm_request: LlmResponse(
            content=Content.from_text("cached", role="model")
        ),
    )
    events = await chat(agent, run_config=SSE)
    assert [(e.text, e.partial) for e in events] == [("cached", None)]
    assert model.requests == []


async def test_partial_chunks_reach_the_consumer_before_the_model_finishes() -> None:
    """The consumer receives a chunk while the model is still producing the next one."""
    consumer_saw_first = trio.Event()

    class Gated(Model):
        async def generate(self, request: LlmRequest) -> LlmResponse:
            raise AssertionError("generate is not used in SSE mode")

        @contextlib.asynccontextmanager
        async def stream(
            self, request: LlmRequest
        ) -> AsyncIterator[trio.MemoryReceiveChannel[LlmResponse]]:
            send, receive = trio.open_memory_channel[LlmResponse](0)

            async def produce() -> None:
                async with send:
                    await send.send(chunk("first"))
                    await consumer_saw_first.wait()
                    await send.send(LlmResponse(content=Content.from_text("first!", role="model")))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce)
                async with receive:
                    yield receive

    session = await Chat.start(LlmAgent(name="a", model=Gated()))
    received: list[tuple[str | None, bool | None]] = []
    async with session.runner.run(
        user_id="u", session_id=session.session_id, new_message="hi", run_config=SSE
    ) as stream:
        with trio.fail_after(30):  # a deadlock guard, not a timing assertion
            async for event in stream:
                received.append((event.text, event.partial))
                if event.partial:
                    consumer_saw_first.set()
    assert received == [("first", True), ("first!", None)]


async def test_a_stream_without_a_final_chunk_stores_nothing_and_ends_r_part_5() -> None:
    class OnlyPartial(Model):
        calls = 0

        async def generate(self, request: LlmRequest) -> LlmResponse:
            raise AssertionError("generate is not used in SSE mode")

        @contextlib.asynccontextmanager
        async def stream(
            self, request: LlmRequest
        ) -> AsyncIterator[trio.MemoryReceiveChannel[LlmResponse]]:
            self.calls += 1
            send, receive = trio.open_memory_channel[LlmResponse](2)
            with send:
                send.send_nowait(chunk("a"))
                send.send_nowait(chunk("b"))
            with receive:
                yield receive

    model = OnlyPartial()
    session = await Chat.start(LlmAgent(name="a", model=model))
    events = await session.send(run_config=SSE)
    assert [(e.text, e.partial) for e in events] == [("a", True), ("b", True)]
    assert await session.stored() == []
    assert model.calls == 1


async def test_a_model_without_real_streaming_sends_one_final_event_in_sse_mode() -> None:
    class Whole(Model):
        async def generate(self, request: LlmRequest) -> LlmResponse:
            await trio.lowlevel.checkpoint()
            return LlmResponse(content=Content.from_text("whole", role="model"))

    events = await chat(LlmAgent(name="a", model=Whole()), run_config=SSE)
    assert [(e.text, e.partial) for e in events] == [("whole", None)]


async def test_streamed_steps_with_tools_and_text_in_one_turn_r_part_2() -> None:
    def echo(x: int) -> int:
        return x

    model = ScriptedModel(
        [
            [chunk("Let me"), calls(call("echo", {"x": 1}), text="Let me check")],
            ["The", "The answer"],
        ]
    )
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[echo], output_key="out"))
    events = await session.send(run_config=SSE)
    assert [(e.text, e.partial) for e in events if e.text is not None] == [
        ("Let me", True),
        ("Let me check", False),
        ("The", True),
        ("The answer", False),
    ]
    session_state = await session.session()
    assert session_state.state == {"out": "The answer"}
    assert kinds(await session.stored()) == ["FC:echo", "FR:echo", "T:The answer"]
