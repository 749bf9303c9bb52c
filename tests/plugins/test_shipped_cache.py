"""ResponseCachePlugin: stable request keys, hits skip the model, LRU and TTL, what is stored."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests.plugins.helpers import Recorder, fc, reply
from trio_agents import (
    ConfigurationError,
    Content,
    Event,
    InMemoryRunner,
    LlmAgent,
    Part,
    RunConfig,
    StreamingMode,
)
from trio_agents.models import FunctionDeclaration, LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin, ResponseCachePlugin, request_key
from trio_agents.testing import ScriptedModel


class Turns:
    """One runner; every ``ask`` is a fresh session (so equal messages make equal requests)."""

    def __init__(self, model: ScriptedModel, *plugins: BasePlugin, **agent_kwargs: Any) -> None:
        self.model = model
        self.runner = InMemoryRunner(
            LlmAgent(name="a", model=model, **agent_kwargs), plugins=plugins
        )

    async def ask(self, message: str, run_config: RunConfig | None = None) -> list[Event]:
        session = await self.runner.session_service.create_session(
            app_name=self.runner.app_name, user_id="u"
        )
        async with self.runner.run(
            user_id="u", session_id=session.id, new_message=message, run_config=run_config
        ) as events:
            return [e async for e in events]


def texts(events: list[Event]) -> list[str | None]:
    return [e.text for e in events]


# -- the key ---------------------------------------------------------------------------------------


def request(**changes: Any) -> LlmRequest:
    base = LlmRequest(
        model="m",
        contents=[Content.from_text("hi"), Content.from_text("hello", role="model")],
        system_instruction="be brief",
        tools=[FunctionDeclaration(name="f", description="d", parameters={"type": "object"})],
        generation_config={"temperature": 0.2, "top_p": 0.9},
        response_schema={"type": "object", "properties": {"a": {"type": "string"}}},
        labels={"adk_agent_name": "a"},
    )
    return attrs.evolve(base, **changes)


def test_the_key_is_stable_and_ignores_dict_order_and_labels() -> None:
    key = request_key(request())
    assert key == request_key(request())
    assert len(key) == 64
    reordered = request(generation_config={"top_p": 0.9, "temperature": 0.2})
    assert request_key(reordered) == key
    assert request_key(request(labels={"adk_agent_name": "other"})) == key


@pytest.mark.parametrize(
    "change",
    [
        {"model": "other"},
        {"system_instruction": "be long"},
        {"contents": [Content.from_text("hi")]},
        {"contents": [Content.from_text("hi"), Content.from_text("hello!", role="model")]},
        {"tools": []},
        {"tools": [FunctionDeclaration(name="g", description="d")]},
        {"generation_config": {"temperature": 0.3, "top_p": 0.9}},
        {"response_schema": None},
    ],
    ids=lambda change: next(iter(change)),
)
def test_every_part_of_the_request_is_in_the_key(change: dict[str, Any]) -> None:
    assert request_key(request(**change)) != request_key(request())


def test_binary_parts_are_keyed_by_their_bytes() -> None:
    one = request(contents=[Content(role="user", parts=[Part.from_bytes(b"\x00\x01", "a/b")])])
    two = request(contents=[Content(role="user", parts=[Part.from_bytes(b"\x00\x02", "a/b")])])
    assert request_key(one) != request_key(two)


# -- hits and misses -------------------------------------------------------------------------------


async def test_a_repeated_request_is_answered_from_the_cache_without_the_model() -> None:
    cache = ResponseCachePlugin()
    turns = Turns(ScriptedModel(["first answer"]), cache)
    assert texts(await turns.ask("q")) == ["first answer"]
    assert texts(await turns.ask("q")) == ["first answer"]
    assert len(turns.model.requests) == 1
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.stores, stats.entries) == (1, 1, 1, 1)
    assert stats.pending == 0


async def test_a_different_request_misses() -> None:
    cache = ResponseCachePlugin()
    turns = Turns(ScriptedModel(["one", "two"]), cache)
    assert texts(await turns.ask("q1")) == ["one"]
    assert texts(await turns.ask("q2")) == ["two"]
    assert cache.stats().hits == 0


async def test_a_hit_skips_the_later_plugins_and_after_model_hooks() -> None:
    log: list[str] = []
    later = Recorder("later", log)
    turns = Turns(ScriptedModel(["answer"]), ResponseCachePlugin(), later)
    await turns.ask("q")
    log.clear()
    await turns.ask("q")
    assert "later.before_model" not in log
    assert "later.after_model" not in log


async def test_least_recently_used_entries_are_evicted() -> None:
    cache = ResponseCachePlugin(max_entries=2)
    turns = Turns(ScriptedModel(["A", "B", "C", "B again"]), cache)
    # LRU order after each ask: [a], [a b], [b a] (hit), [a c] (b evicted), [c a] (hit),
    # [a b] (c evicted).
    for message in ("a", "b", "a", "c", "a", "b"):
        await turns.ask(message)
    asked = [r.contents[-1].parts[0].text for r in turns.model.requests]
    assert asked == ["a", "b", "c", "b"]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.evictions, stats.entries) == (2, 4, 2, 2)


async def test_entries_expire_after_the_ttl(autojump_clock: trio.testing.MockClock) -> None:
    cache = ResponseCachePlugin(ttl=60)
    turns = Turns(ScriptedModel(["old", "new"]), cache)
    assert texts(await turns.ask("q")) == ["old"]
    await trio.sleep(59)
    assert texts(await turns.ask("q")) == ["old"]
    await trio.sleep(1)
    assert texts(await turns.ask("q")) == ["new"]
    stats = cache.stats()
    assert (stats.hits, stats.expirations, stats.stores) == (1, 1, 2)


async def test_no_ttl_means_entries_only_leave_by_eviction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cache = ResponseCachePlugin(ttl=None)
    turns = Turns(ScriptedModel(["only"]), cache)
    await turns.ask("q")
    await trio.sleep(10**9)
    assert texts(await turns.ask("q")) == ["only"]


# -- what is stored --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response",
    [
        LlmResponse(content=Content.from_text("x", role="model"), error_code="SAFETY"),
        LlmResponse(content=Content.from_text("x", role="model"), interrupted=True),
        LlmResponse(content=Content.from_text("x", role="model"), finish_reason="MAX_TOKENS"),
        LlmResponse(content=Content.from_text("x", role="model"), turn_complete=False),
    ],
    ids=["error", "interrupted", "truncated", "incomplete"],
)
async def test_incomplete_or_error_responses_are_not_stored(response: LlmResponse) -> None:
    cache = ResponseCachePlugin()
    turns = Turns(ScriptedModel([response, response]), cache)
    await turns.ask("q")
    await turns.ask("q")
    assert len(turns.model.requests) == 2
    assert cache.stats().stores == 0
    assert cache.stats().pending == 0


async def test_only_the_final_streamed_aggregate_is_stored() -> None:
    cache = ResponseCachePlugin()
    sse = RunConfig(streaming_mode=StreamingMode.SSE)
    turns = Turns(ScriptedModel([["Hel", "lo", "Hello"]]), cache)
    first = await turns.ask("q", sse)
    assert [(e.text, bool(e.partial)) for e in first] == [
        ("Hel", True),
        ("lo", True),
        ("Hello", False),
    ]
    second = await turns.ask("q", sse)
    assert [(e.text, bool(e.partial)) for e in second] == [("Hello", False)]
    assert cache.stats().stores == 1


async def test_a_recovered_model_error_is_not_stored() -> None:
    cache = ResponseCachePlugin()
    recovery = Recorder("recovery", on_model_error=reply("fallback"))
    turns = Turns(ScriptedModel([ConnectionError("down"), "real"]), cache, recovery)
    assert texts(await turns.ask("q")) == ["fallback"]
    assert texts(await turns.ask("q")) == ["real"]
    assert cache.stats().stores == 1
    assert cache.stats().pending == 0


async def test_replayed_function_calls_get_fresh_ids() -> None:
    def echo(x: int = 0) -> dict[str, int]:
        return {"x": x}

    call = LlmResponse(
        content=Content(role="model", parts=[Part.from_function_call("echo", {}, id="call-1")])
    )
    cache = ResponseCachePlugin()
    turns = Turns(ScriptedModel([call, "one", "two"]), cache, tools=[echo])
    first = await turns.ask("q")
    second = await turns.ask("q")
    assert first[0].get_function_calls()[0].id == "call-1"
    replayed = second[0].get_function_calls()[0]
    assert replayed.name == "echo"
    assert replayed.id not in (None, "call-1")
    assert [r.id for r in second[1].get_function_responses()] == [replayed.id]
    # The follow-up request differs from the first turn's only by the call id, which the key
    # renumbers: it is a hit too, so the model was asked twice in all.
    assert texts(second)[-1] == "one"
    assert cache.stats().hits == 2
    assert len(turns.model.requests) == 2


def test_call_ids_do_not_change_the_key() -> None:
    def asked(call_id: str) -> LlmRequest:
        return request(
            contents=[
                Content.from_text("hi"),
                Content(role="model", parts=[Part.from_function_call("f", {}, id=call_id)]),
                Content(role="user", parts=[Part.from_function_response("f", {}, id=call_id)]),
            ]
        )

    assert request_key(asked("a1")) == request_key(asked("b7"))
    assert request_key(asked("a1")) != request_key(request())


async def test_a_request_that_is_not_json_is_not_cached() -> None:
    cache = ResponseCachePlugin()
    model = ScriptedModel(["one", "two"])
    turns = Turns(model, cache, generate_content_config={"odd": object()})
    await turns.ask("q")
    await turns.ask("q")
    assert len(model.requests) == 2
    assert cache.stats().uncacheable == 2


async def test_a_cancelled_run_leaves_nothing_pending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(request: LlmRequest) -> str:
        await trio.sleep_forever()
        raise AssertionError

    cache = ResponseCachePlugin()
    turns = Turns(ScriptedModel(slow), cache)
    with trio.move_on_after(1):
        await turns.ask("q")
    assert cache.stats().pending == 0
    assert cache.stats().entries == 0


async def test_clear_and_configuration() -> None:
    cache = ResponseCachePlugin()
    turns = Turns(ScriptedModel(["one", "two"]), cache)
    await turns.ask("q")
    assert len(cache) == 1
    cache.clear()
    assert texts(await turns.ask("q")) == ["two"]
    with pytest.raises(ConfigurationError, match="max_entries"):
        ResponseCachePlugin(max_entries=0)
    with pytest.raises(ConfigurationError, match="ttl"):
        ResponseCachePlugin(ttl=0)


async def test_a_cached_function_call_turn_runs_its_tool() -> None:
    ran: list[int] = []

    def echo(x: int = 0) -> dict[str, int]:
        ran.append(x)
        return {"x": x}

    turns = Turns(
        ScriptedModel([fc("echo", {"x": 1}), "one", "two"]), ResponseCachePlugin(), tools=[echo]
    )
    await turns.ask("q")
    await turns.ask("q")
    assert ran == [1, 1]
