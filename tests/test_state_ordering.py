"""State writes under concurrency: one ordering rule, by write time (README "What the Runner
guarantees").

Parallel branches share the live state. Every write lands in the live state at once, so the live
state holds the latest write of each key; a commit never re-applies a write that a later write
replaced. Random mixes of LLM branches (tools reading and writing ``tool_context.state``), custom
agents (``ctx.state``) and model callbacks (``callback_context.state``) each add 1 to a shared
counter ``k`` times, with random checkpoints between steps, under many scheduler interleavings.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import attrs
import trio
from hypothesis import given, note, settings, strategies as st

from tests.agents.llm_helpers import call, calls
from trio_agents import (
    BaseAgent,
    CallbackContext,
    Event,
    InvocationContext,
    LlmAgent,
    ParallelAgent,
    Runner,
    SequentialAgent,
    ToolContext,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin
from trio_agents.sessions import InMemorySessionService, SessionService, SqliteSessionService
from trio_agents.testing import ScriptedModel

KEY = "spent"


@attrs.define
class Log:
    """What the branches read before each write, and what plugins saw at each commit."""

    reads: list[int] = attrs.Factory(list)
    committed: list[int] = attrs.Factory(list)

    def add_one(self, state: Any) -> int:
        seen = state.get(KEY, 0)  # no await between the read and the write
        self.reads.append(seen)
        state[KEY] = seen + 1
        return seen + 1


class Watch(BasePlugin):
    def __init__(self, log: Log) -> None:
        super().__init__(name="watch")
        self.log = log

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        if not event.partial:
            self.log.committed.append(invocation_context.session.state.get(KEY, 0))


async def pause(checkpoints: int) -> None:
    for _ in range(checkpoints):
        await trio.lowlevel.checkpoint()


@attrs.frozen
class Branch:
    kind: str  # tool | tools | custom | callback
    times: int
    pauses: tuple[int, ...]


def branches() -> st.SearchStrategy[Branch]:
    def of(kind: str, times: int) -> st.SearchStrategy[Branch]:
        pauses = st.lists(st.integers(0, 3), min_size=times, max_size=times).map(tuple)
        return pauses.map(lambda p: Branch(kind, times, p))

    kinds = st.sampled_from(["tool", "tools", "custom", "callback"])
    return st.tuples(kinds, st.integers(1, 3)).flatmap(lambda kt: of(*kt))


class Adder(BaseAgent):
    log: Log
    pauses: tuple[int, ...]

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        for checkpoints in self.pauses:
            await pause(checkpoints)
            value = self.log.add_one(ctx.state)
            await ctx.emit(Event(custom_metadata={"wrote": value}))


def build(index: int, branch: Branch, log: Log) -> BaseAgent:
    name = f"b{index}"
    if branch.kind == "custom":
        return Adder(name=name, log=log, pauses=branch.pauses)
    steps = iter(branch.pauses)

    def add(tool_context: ToolContext) -> dict[str, int]:
        return {"now": log.add_one(tool_context.state)}

    async def add_later(tool_context: ToolContext) -> dict[str, int]:
        await pause(next(steps, 0))
        return {"now": log.add_one(tool_context.state)}

    if branch.kind == "callback":

        async def before_model(
            callback_context: CallbackContext, llm_request: LlmRequest
        ) -> LlmResponse | None:
            if len(llm_request.contents) > 2 * branch.times:
                return None
            await pause(next(steps, 0))
            log.add_one(callback_context.state)
            return LlmResponse(content=calls(call("noop")).content)

        async def noop() -> str:
            return "ok"

        script: list[Any] = ["done"]
        return LlmAgent(
            name=name,
            model=ScriptedModel(script),
            tools=[noop],
            before_model_callback=before_model,
        )
    if branch.kind == "tools":  # all calls in one model turn: the tools run concurrently
        turn = calls(*[call("add_later") for _ in range(branch.times)])
        return LlmAgent(name=name, model=ScriptedModel([turn, "done"]), tools=[add_later])
    script = [calls(call("add")) for _ in range(branch.times)] + ["done"]
    return LlmAgent(name=name, model=ScriptedModel(script), tools=[add])


SPECS = st.lists(branches(), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(specs=SPECS, nested=st.booleans(), watch=st.booleans(), _seed=st.random_module())
async def test_concurrent_read_modify_writes_never_lose_an_update(
    specs: list[Branch], nested: bool, watch: bool, _seed: Any
) -> None:
    await check_counter(InMemorySessionService(), specs, nested, watch)


@settings(max_examples=20, deadline=None)
@given(specs=SPECS, _seed=st.random_module())
async def test_read_modify_writes_hold_on_sqlite_where_commits_wait(
    specs: list[Branch], _seed: Any
) -> None:
    """SQLite commits in a worker thread: other branches write while an event is stored."""
    with tempfile.TemporaryDirectory() as folder:
        async with SqliteSessionService(Path(folder) / "s.db", durable=False) as service:
            await check_counter(service, specs, nested=False, watch=True)


async def check_counter(
    service: SessionService, specs: list[Branch], nested: bool, watch: bool
) -> None:
    note(repr(specs))
    log = Log()
    agents = [build(i, spec, log) for i, spec in enumerate(specs)]
    root: BaseAgent = ParallelAgent(name="fan", sub_agents=agents)
    if nested:
        root = SequentialAgent(name="seq", sub_agents=[root])
    plugins = [Watch(log)] if watch else []
    runner = Runner(agent=root, app_name="app", session_service=service, plugins=plugins)
    session = await service.create_session(app_name="app", user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        delivered = [e async for e in events]
        live = dict(events.session.state)
    total = sum(spec.times for spec in specs)

    # No update is lost: every read saw every earlier write, in order.
    assert log.reads == list(range(total))
    assert live[KEY] == total
    # The live value never went back, as plugins saw it at each commit.
    assert log.committed == sorted(log.committed)
    stored = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert stored is not None
    assert stored.state[KEY] == total
    # The stored deltas, folded in commit order, end at the live state, and never go back.
    folded: dict[str, Any] = {}
    values = []
    for event in stored.events:
        folded.update(event.actions.state_delta)
        if KEY in event.actions.state_delta:
            values.append(event.actions.state_delta[KEY])
    assert folded == live
    assert values == sorted(values)
    assert stored.events[1:] == delivered


async def test_a_commit_never_brings_back_a_replaced_write() -> None:
    """Two branches: A writes 1 and emits slowly; B writes 2 after A's write and commits first.
    A's event must not carry 1 back over 2 (ADK's shared dict would)."""
    order: list[str] = []
    b_wrote = trio.Event()

    class A(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            ctx.state[KEY] = 1
            order.append("A wrote")
            await b_wrote.wait()
            await ctx.emit(Event())
            order.append(f"A committed, live {ctx.session.state[KEY]}")

    class B(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await trio.lowlevel.checkpoint()
            ctx.state[KEY] = 2
            b_wrote.set()
            order.append("B wrote")
            await ctx.emit(Event())

    service = InMemorySessionService()
    runner = Runner(
        agent=ParallelAgent(name="fan", sub_agents=[A(name="a"), B(name="b")]),
        app_name="app",
        session_service=service,
    )
    session = await service.create_session(app_name="app", user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        delivered = [e async for e in events]
    assert order[:2] == ["A wrote", "B wrote"]
    assert "A committed, live 2" in order
    by_author = {e.author: dict(e.actions.state_delta) for e in delivered}
    assert by_author == {"a": {}, "b": {KEY: 2}}  # A's replaced write is not committed
    stored = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert stored is not None
    assert stored.state[KEY] == 2


async def test_a_value_set_on_an_event_is_written_at_commit() -> None:
    """A delta set directly on an event is a write made when the event is committed: it
    replaces a branch's earlier pending write, which is then not committed."""
    a_wrote = trio.Event()
    direct_done = trio.Event()

    class Pending(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            ctx.state[KEY] = "pending"
            a_wrote.set()
            await direct_done.wait()
            await ctx.emit(Event())

    class Direct(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await a_wrote.wait()
            from trio_agents import EventActions

            await ctx.emit(Event(actions=EventActions(state_delta={KEY: "direct"})))
            direct_done.set()

    service = InMemorySessionService()
    runner = Runner(
        agent=ParallelAgent(name="fan", sub_agents=[Pending(name="p"), Direct(name="d")]),
        app_name="app",
        session_service=service,
    )
    session = await service.create_session(app_name="app", user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
        delivered = [e async for e in events]
        live = dict(events.session.state)
    assert live[KEY] == "direct"
    assert [dict(e.actions.state_delta) for e in delivered] == [{KEY: "direct"}, {}]
