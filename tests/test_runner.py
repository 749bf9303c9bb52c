"""The Runner: input validation, the invocation lifecycle, errors, cancellation (R-RUN-*)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import (
    BaseAgent,
    ConfigurationError,
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    InvocationContext,
    Part,
    RunConfig,
    Runner,
    SerializationError,
    SessionBusyError,
    SessionNotFoundError,
)
from trio_agents.plugins import BasePlugin


class Emitter(BaseAgent):
    count: int = 1

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        for i in range(self.count):
            await ctx.emit(Event(actions=EventActions(state_delta={"i": i})))


class Scripted(BaseAgent):
    """Emits ``events`` then, optionally, raises or sleeps forever."""

    events: tuple[Event, ...] = ()
    error: Any = None
    hang: bool = False
    finished: bool = False

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        try:
            for event in self.events:
                await ctx.emit(event)
            if self.error is not None:
                raise self.error
            if self.hang:
                await trio.sleep_forever()
        finally:
            self.finished = True


class Counter(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="counter")
        self.after_runs = 0
        self.run_errors: list[Exception] = []

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        self.after_runs += 1

    async def on_run_error_callback(self, *, invocation_context: Any, error: Exception) -> None:
        self.run_errors.append(error)


def text(value: str, role: str = "model") -> Content:
    return Content.from_text(value, role=role)


async def new_session(runner: Runner, **state: Any) -> str:
    session = await runner.session_service.create_session(
        app_name=runner.app_name, user_id="u", state=state or None
    )
    return session.id


async def stored_events(runner: Runner, session_id: str) -> list[Event]:
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session_id
    )
    assert session is not None
    return list(session.events)


async def collect(runner: Runner, session_id: str, message: Any = "hi", **kw: Any) -> list[Event]:
    async with runner.run(user_id="u", session_id=session_id, new_message=message, **kw) as ev:
        return [e async for e in ev]


# -- input validation -----------------------------------------------------------------------------


async def test_missing_session_raises_session_not_found_s_run_1() -> None:
    runner = InMemoryRunner(Emitter(name="a"))
    with pytest.raises(SessionNotFoundError, match="Session not found: nope") as info:
        await collect(runner, "nope")
    assert isinstance(info.value, LookupError)
    assert isinstance(info.value, ValueError)


async def test_function_call_in_user_message_is_rejected_before_commit_s_run_4() -> None:
    runner = InMemoryRunner(Emitter(name="a"))
    sid = await new_session(runner)
    message = Content(role="user", parts=[Part.from_function_call("f", {})])
    with pytest.raises(ConfigurationError, match="cannot contain function calls"):
        await collect(runner, sid, message)
    assert await stored_events(runner, sid) == []


@pytest.mark.parametrize("message", [None, 42, [Part.from_text("x")]])
async def test_bad_message_types_are_rejected(message: Any) -> None:
    runner = InMemoryRunner(Emitter(name="a"))
    sid = await new_session(runner)
    with pytest.raises(ConfigurationError, match="new_message"):
        await collect(runner, sid, message)
    assert await stored_events(runner, sid) == []


async def test_non_json_state_delta_is_rejected_naming_the_key() -> None:
    runner = InMemoryRunner(Emitter(name="a"))
    sid = await new_session(runner)
    with pytest.raises(SerializationError, match="bad"):
        await collect(runner, sid, state_delta={"bad": {1, 2}})
    assert await stored_events(runner, sid) == []


def test_max_llm_calls_must_be_below_maxsize() -> None:
    with pytest.raises(ConfigurationError, match="max_llm_calls"):
        RunConfig(max_llm_calls=sys.maxsize)
    assert RunConfig(max_llm_calls=0).max_llm_calls == 0


# -- the user event and ids ----------------------------------------------------------------------


async def test_user_event_is_stored_not_delivered_and_carries_the_state_delta_s_run_3() -> None:
    runner = InMemoryRunner(Emitter(name="a"))
    sid = await new_session(runner)
    delivered = await collect(
        runner, sid, text("hello", role="model"), state_delta={"k": "v", "temp:q": 1}
    )
    stored = await stored_events(runner, sid)
    user = stored[0]
    assert user.author == "user"
    assert user.content == Content.from_text("hello", role="user")
    assert dict(user.actions.state_delta) == {"k": "v"}
    assert all(e.author != "user" for e in delivered)
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=sid
    )
    assert session is not None
    assert session.state["k"] == "v"
    assert "temp:q" not in session.state


async def test_every_event_shares_the_invocation_id_s_run_5() -> None:
    runner = InMemoryRunner(Emitter(name="a", count=3))
    sid = await new_session(runner)
    async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
        delivered = [e async for e in events]
        invocation_id = events.invocation_id
    assert invocation_id.startswith("e-")
    stored = await stored_events(runner, sid)
    assert {e.invocation_id for e in stored} == {invocation_id}
    assert {e.author for e in delivered} == {"a"}


async def test_emit_stamps_author_branch_and_function_call_ids() -> None:
    call = Event(content=Content(role="model", parts=[Part.from_function_call("f", {"x": 1})]))
    agent = Scripted(name="a", events=(call,))
    runner = InMemoryRunner(agent)
    sid = await new_session(runner)
    delivered = await collect(runner, sid)
    (event,) = [e for e in delivered if e.get_function_calls()]
    assert event.author == "a"
    (fc,) = event.get_function_calls()
    assert fc.id is not None
    assert fc.id.startswith("adk-")
    assert (await stored_events(runner, sid))[1:] == delivered  # the closing response too


async def test_run_config_custom_metadata_is_merged_event_keys_win() -> None:
    agent = Scripted(name="a", events=(Event(custom_metadata={"mine": 1, "shared": "event"}),))
    runner = InMemoryRunner(agent)
    sid = await new_session(runner)
    config = RunConfig(custom_metadata={"shared": "run", "run": True})
    (event,) = await collect(runner, sid, run_config=config)
    assert event.custom_metadata == {"mine": 1, "shared": "event", "run": True}


# -- the handshake -------------------------------------------------------------------------------


async def test_state_is_committed_before_the_agent_resumes() -> None:
    seen: list[Any] = []

    class Reader(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            for i in range(3):
                committed = await ctx.emit(Event(actions=EventActions(state_delta={"n": i})))
                seen.append((ctx.session.state["n"], ctx.session.events[-1].id == committed.id))

    runner = InMemoryRunner(Reader(name="r"))
    await collect(runner, await new_session(runner))
    assert seen == [(0, True), (1, True), (2, True)]


async def test_generator_agent_resumes_only_after_commit() -> None:
    seen: list[int] = []

    class Gen(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> AsyncIterator[Event]:
            for i in range(3):
                yield Event(actions=EventActions(state_delta={"g": i}))
                seen.append(ctx.session.state["g"])

    runner = InMemoryRunner(Gen(name="g"))
    delivered = await collect(runner, await new_session(runner))
    assert seen == [0, 1, 2]
    assert [e.actions.state_delta["g"] for e in delivered] == [0, 1, 2]


async def test_slow_consumer_holds_the_producer_back() -> None:
    progress = {"sent": 0, "returned": 0}

    class Eager(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            for _ in range(5):
                progress["sent"] += 1
                await ctx.emit(Event())
                progress["returned"] += 1

    runner = InMemoryRunner(Eager(name="e"))
    sid = await new_session(runner)
    async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
        await events.receive()
        await trio.testing.wait_all_tasks_blocked()
        assert progress == {"sent": 2, "returned": 1}
        rest = [e async for e in events]
    assert len(rest) == 4


async def test_partial_events_are_delivered_but_never_stored_s_str_3() -> None:
    agent = Scripted(
        name="a",
        events=(
            Event(partial=True, actions=EventActions(state_delta={"p": 1})),
            Event(actions=EventActions(state_delta={"f": 2})),
        ),
    )
    runner = InMemoryRunner(agent)
    sid = await new_session(runner)
    async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
        first = await events.receive()
        assert first.partial
        assert "p" not in events.session.state
        second = await events.receive()
        assert events.session.state["f"] == 2
    stored = await stored_events(runner, sid)
    assert [e.id for e in stored[1:]] == [second.id]
    assert first.id != second.id


async def test_state_written_through_ctx_state_rides_on_the_next_event() -> None:
    class Writer(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            ctx.state["x"] = 1
            assert ctx.session.state["x"] == 1  # dirty read, R-ST-1
            await ctx.emit(Event(content=text("done")))

    runner = InMemoryRunner(Writer(name="w"))
    (event,) = await collect(runner, await new_session(runner))
    assert dict(event.actions.state_delta) == {"x": 1}


async def test_non_event_emission_is_a_configuration_error() -> None:
    agent = Scripted(name="a", events=("not an event",))  # type: ignore[arg-type]
    runner = InMemoryRunner(agent)
    with pytest.raises(ConfigurationError, match="'a' emitted str"):
        await collect(runner, await new_session(runner))


async def test_unserializable_state_fails_the_run_and_keeps_committed_events() -> None:
    good = Event(actions=EventActions(state_delta={"ok": 1}))
    bad = Event(actions=EventActions(state_delta={"bad": object()}))
    runner = InMemoryRunner(Scripted(name="a", events=(good, bad)))
    sid = await new_session(runner)
    with pytest.raises(SerializationError, match="bad"):
        await collect(runner, sid)
    stored = await stored_events(runner, sid)
    assert stored[1].id == good.id and stored[1].actions.state_delta == {"ok": 1}
    assert stored[-1].error_code == "SerializationError"
    assert all("bad" not in e.actions.state_delta for e in stored)


# -- errors ---------------------------------------------------------------------------------------


async def test_error_keeps_committed_events_and_stores_an_error_event_s_run_6() -> None:
    counter = Counter()
    agent = Scripted(name="a", events=(Event(content=text("one")),), error=RuntimeError("boom"))
    runner = Runner(
        agent=agent,
        app_name="app",
        session_service=InMemoryRunner(agent).session_service,
        plugins=[counter],
    )
    sid = await new_session(runner)
    delivered: list[Event] = []
    with pytest.raises(RuntimeError, match="boom"):
        async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
            async for event in events:
                delivered.append(event)
    assert [e.text for e in delivered] == ["one", None]
    stored = await stored_events(runner, sid)
    assert stored[1:] == delivered  # the error event is delivered, then the exception leaves
    error = stored[-1]
    assert (error.author, error.error_code, error.error_message) == ("a", "RuntimeError", "boom")
    assert error.content is None
    assert error.is_final_response()
    assert counter.after_runs == 0
    assert [str(e) for e in counter.run_errors] == ["boom"]


async def test_error_status_attribute_becomes_the_error_code() -> None:
    class Quota(Exception):
        status = "RESOURCE_EXHAUSTED"

    runner = InMemoryRunner(Scripted(name="a", error=Quota("slow down")))
    sid = await new_session(runner)
    with pytest.raises(Quota):
        await collect(runner, sid)
    assert (await stored_events(runner, sid))[-1].error_code == "RESOURCE_EXHAUSTED"


def test_run_sync_returns_events_and_raises_agent_errors() -> None:
    runner = InMemoryRunner(Emitter(name="a", count=2))
    sid = trio.run(new_session, runner)
    events = runner.run_sync(user_id="u", session_id=sid, new_message="hi")
    assert [e.actions.state_delta["i"] for e in events] == [0, 1]
    failing = InMemoryRunner(Scripted(name="b", error=KeyError("k")))
    sid2 = trio.run(new_session, failing)
    with pytest.raises(KeyError):
        failing.run_sync(user_id="u", session_id=sid2, new_message="hi")


# -- stopping a run -------------------------------------------------------------------------------


async def test_consumer_leaving_early_cancels_the_run_and_after_run_still_happens_s_run_7() -> None:
    counter = Counter()
    agent = Scripted(
        name="a", events=(Event(content=text("1")), Event(content=text("2"))), hang=True
    )
    runner = InMemoryRunner(agent, plugins=[counter])
    sid = await new_session(runner)
    async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
        async for _ in events:
            break
    assert agent.finished
    assert counter.after_runs == 1
    assert [e.text for e in (await stored_events(runner, sid))[1:]] == ["1"]


@pytest.mark.parametrize("agent_first", [True, False])
async def test_an_agent_failure_is_not_lost_when_an_outer_scope_cancels_the_consumer(
    agent_first: bool,
) -> None:
    """The consumer's block is cancelled from outside while the agent fails: the failure still
    leaves the block (a cancel scope catches only cancellations), its error event is stored."""
    counter = Counter()
    agent = Scripted(name="a", events=(Event(content=text("one")),), error=RuntimeError("boom"))
    runner = InMemoryRunner(agent, plugins=[counter])
    sid = await new_session(runner)
    with pytest.raises(RuntimeError, match="boom"), trio.CancelScope() as outer:
        async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
            await events.receive()
            if agent_first:
                await trio.testing.wait_all_tasks_blocked()  # the agent raises first
            outer.cancel()
            await trio.sleep_forever()
    assert counter.after_runs == 0
    assert [str(e) for e in counter.run_errors] == ["boom"]
    stored = await stored_events(runner, sid)
    assert stored[-1].error_code == "RuntimeError"


async def test_cancel_from_another_task_closes_dangling_calls() -> None:
    counter = Counter()
    call = Event(
        content=Content(role="model", parts=[Part.from_function_call("slow", {}, id="c1")])
    )
    agent = Scripted(name="a", events=(call,), hang=True)
    runner = InMemoryRunner(agent, plugins=[counter])
    sid = await new_session(runner)
    delivered: list[Event] = []
    async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
        async with trio.open_nursery() as nursery:

            async def stop_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                events.cancel("operator pressed stop")

            nursery.start_soon(stop_soon)
            async for event in events:
                delivered.append(event)
        assert events.cancelled
    assert [e.get_function_calls()[0].id for e in delivered[:1]] == ["c1"]
    assert agent.finished
    assert counter.after_runs == 1
    assert (await stored_events(runner, sid))[1:] == delivered  # the closing response too
    closing = delivered[-1]
    (response,) = closing.get_function_responses()
    assert response.id == "c1"
    assert response.name == "slow"
    assert response.response["error"] == "cancelled"
    assert closing.author == "a"
    assert closing.content is not None
    assert closing.content.role == "user"


async def test_long_running_calls_are_not_closed_on_cancel() -> None:
    call = Event(
        content=Content(role="model", parts=[Part.from_function_call("approve", {}, id="lr")]),
        long_running_tool_ids={"lr"},
    )
    runner = InMemoryRunner(Scripted(name="a", events=(call,), hang=True))
    sid = await new_session(runner)
    async with runner.run(user_id="u", session_id=sid, new_message="hi") as events:
        await events.receive()
    assert not any(e.get_function_responses() for e in await stored_events(runner, sid))


async def test_timeout_around_the_run_leaves_a_consistent_session(autojump_clock: Any) -> None:
    call = Event(content=Content(role="model", parts=[Part.from_function_call("f", {}, id="c")]))
    agent = Scripted(name="a", events=(call,), hang=True)
    runner = InMemoryRunner(agent)
    sid = await new_session(runner)
    with trio.move_on_after(5) as scope:
        await collect(runner, sid)
    assert scope.cancelled_caught
    assert agent.finished
    stored = await stored_events(runner, sid)
    assert [r.id for r in stored[-1].get_function_responses()] == ["c"]


# -- one run per session ---------------------------------------------------------------------------


async def test_second_run_on_a_busy_session_is_rejected() -> None:
    agent = Scripted(name="a", events=(Event(content=text("1")),), hang=True)
    runner = InMemoryRunner(agent)
    sid = await new_session(runner)
    async with runner.run(user_id="u", session_id=sid, new_message="first") as events:
        await events.receive()
        with pytest.raises(SessionBusyError, match=sid):
            await collect(runner, sid, "second")
        events.cancel()
    assert [
        e.content.text for e in await stored_events(runner, sid) if e.author == "user" and e.content
    ] == ["first"]


async def test_queued_runs_wait_their_turn_and_never_interleave() -> None:
    class Slow(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            for _ in range(3):
                await trio.sleep(0.01)
                await ctx.emit(Event(content=text(ctx.invocation_id)))

    runner = InMemoryRunner(Slow(name="s"), concurrent_runs="queue")
    sid = await new_session(runner)
    async with trio.open_nursery() as nursery:
        for word in ("one", "two", "three"):
            nursery.start_soon(collect, runner, sid, word)
    stored = await stored_events(runner, sid)
    runs = [e.invocation_id for e in stored]
    blocks = [runs[i] for i in range(len(runs)) if i == 0 or runs[i] != runs[i - 1]]
    assert len(blocks) == 3
    assert len(set(blocks)) == 3
