"""Toolsets: asked once per model step, filtered and prefixed, hosted in a scope someone owns."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, note, strategies as st

from trio_agents import (
    ConfigurationError,
    InMemoryRunner,
    LlmAgent,
    ParallelAgent,
    ReadonlyContext,
    ToolsetError,
)
from trio_agents._content import Content, Part
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.testing import ScriptedModel
from trio_agents.tools import BaseTool, BaseToolset, FunctionTool
from trio_agents.tools._scope import current_scope


def _tool(name: str) -> FunctionTool:
    def tool(x: int = 0) -> dict[str, Any]:
        return {"tool": name, "x": x}

    tool.__name__ = name
    tool.__doc__ = f"The tool {name}."
    return FunctionTool(tool)


class Offering(BaseToolset):
    """Offers the tools named in ``offer`` (a list one may change between steps)."""

    def __init__(self, offer: list[str], **options: Any) -> None:
        super().__init__(**options)
        self.offer = offer
        self.asked: list[ReadonlyContext | None] = []
        self.closed = 0
        self.fail_with: Exception | None = None

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        await trio.lowlevel.checkpoint()
        self.asked.append(readonly_context)
        if self.fail_with is not None:
            raise self.fail_with
        return [_tool(name) for name in self.offer]

    async def close(self) -> None:
        self.closed += 1


def _calls(*names: str) -> LlmResponse:
    parts = [Part.from_function_call(name, {"x": i}) for i, name in enumerate(names)]
    return LlmResponse(content=Content(role="model", parts=parts), finish_reason="STOP")


async def _run(agent: Any, *, session_id: str = "s", runner: Any = None) -> list[Any]:
    runner = runner or InMemoryRunner(agent, app_name="app")
    service = runner.session_service
    if await service.get_session(app_name="app", user_id="u", session_id=session_id) is None:
        await service.create_session(app_name="app", user_id="u", session_id=session_id)
    async with runner.run(user_id="u", session_id=session_id, new_message="go") as events:
        return [event async for event in events]


def _declared(request: LlmRequest) -> list[str]:
    return [declaration.name for declaration in request.tools]


def _responses(events: list[Any]) -> list[dict[str, Any]]:
    return [
        dict(p.function_response.response)
        for e in events
        if e.content
        for p in e.content.parts
        if p.function_response
    ]


# -- construction -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["read_file", [1, 2], 42])
def test_tool_filter_must_be_names_or_a_predicate(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="tool_filter"):
        Offering([], tool_filter=bad)


@pytest.mark.parametrize("bad", ["", 3])
def test_prefix_must_be_a_non_empty_string(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="tool_name_prefix"):
        Offering([], tool_name_prefix=bad)


def test_agent_accepts_toolsets_beside_functions_and_tools() -> None:
    toolset = Offering(["a"])
    agent = LlmAgent(name="x", model=ScriptedModel([]), tools=[_tool("b"), toolset, len])
    assert agent.toolsets == [toolset]
    assert agent.uses_toolsets
    assert [t.name for t in agent.run_tools] == ["b", "len"]  # outside a step: no toolset tools


# -- filtering and prefixing --------------------------------------------------------------------


async def test_filter_by_names_and_prefix() -> None:
    toolset = Offering(["a", "b", "c"], tool_filter=["a", "c"], tool_name_prefix="kit")
    tools = await toolset.get_tools_with_prefix()
    assert [t.name for t in tools] == ["kit_a", "kit_c"]
    assert [t.declaration().name for t in tools] == ["kit_a", "kit_c"]  # type: ignore[union-attr]


async def test_predicate_sees_the_tool_and_the_context() -> None:
    seen: list[tuple[str, str | None]] = []

    def only_mine(tool: BaseTool, ctx: ReadonlyContext | None) -> bool:
        seen.append((tool.name, ctx.agent_name if ctx else None))
        return ctx is not None and tool.name.startswith(ctx.agent_name)

    toolset = Offering(["me_tool", "other_tool"], tool_filter=only_mine)
    model = ScriptedModel([_calls("me_tool"), "done"])
    events = await _run(LlmAgent(name="me", model=model, tools=[toolset]))
    assert _declared(model.requests[0]) == ["me_tool"]
    assert _responses(events) == [{"tool": "me_tool", "x": 0}]
    assert ("other_tool", "me") in seen


async def test_prefixed_tool_runs_under_the_prefixed_name() -> None:
    model = ScriptedModel([_calls("kit_a"), "done"])
    agent = LlmAgent(name="a", model=model, tools=[Offering(["a"], tool_name_prefix="kit")])
    events = await _run(agent)
    assert _responses(events) == [{"tool": "a", "x": 0}]
    assert [
        p.function_response.name
        for e in events
        if e.content
        for p in e.content.parts
        if p.function_response
    ] == ["kit_a"]


# -- resolution per model step --------------------------------------------------------------------


async def test_tools_are_asked_once_per_step_and_may_change() -> None:
    toolset = Offering(["a", "b"])

    def script(request: LlmRequest) -> Any:
        step = len(model.requests)
        if step == 1:
            toolset.offer[:] = ["c"]  # takes effect at the next step
            return _calls("a", "b", "a")
        if step == 2:
            return _calls("c")
        return "done"

    model = ScriptedModel(script)
    agent = LlmAgent(name="agent", model=model, tools=[_tool("fixed"), toolset])
    events = await _run(agent)
    assert [_declared(r) for r in model.requests] == [
        ["fixed", "a", "b"],
        ["fixed", "c"],
        ["fixed", "c"],
    ]
    assert len(toolset.asked) == 3  # one per step, not one per call
    assert [r["tool"] for r in _responses(events)] == ["a", "b", "a", "c"]
    assert all(ctx is not None and ctx.agent_name == "agent" for ctx in toolset.asked)


async def test_a_tool_that_left_the_list_is_an_unknown_tool() -> None:
    toolset = Offering(["gone"])

    def script(request: LlmRequest) -> Any:
        if len(model.requests) == 1:
            toolset.offer[:] = []
            return _calls("gone")
        return "done"

    model = ScriptedModel(script)
    events = await _run(LlmAgent(name="a", model=model, tools=[toolset]))
    # the call is answered with the tools of the step that made it
    assert _responses(events) == [{"tool": "gone", "x": 0}]
    model2 = ScriptedModel([_calls("gone"), "done"])
    events = await _run(LlmAgent(name="a", model=model2, tools=[toolset]))
    (error,) = _responses(events)
    assert "gone" in error["error"]


async def test_failing_toolset_is_a_typed_error_naming_it() -> None:
    toolset = Offering(["a"])
    toolset.fail_with = OSError("disk on fire")
    model = ScriptedModel(["unused"])
    with pytest.raises(ToolsetError, match=r"'Offering'.*disk on fire") as caught:
        await _run(LlmAgent(name="a", model=model, tools=[toolset]))
    assert caught.value.toolset == "Offering"
    assert isinstance(caught.value.__cause__, OSError)
    assert model.requests == []


async def test_two_tools_with_one_name_are_refused() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel(["x"]), tools=[_tool("a"), Offering(["a"])])
    with pytest.raises(ConfigurationError, match="two tools are named 'a'"):
        await _run(agent)


@given(
    names=st.lists(st.sampled_from("abcde"), min_size=1, max_size=4, unique=True),
    _seed=st.random_module(),
)
async def test_parallel_agents_each_see_their_own_step_tools(names: list[str], _seed: Any) -> None:
    """Agents sharing one toolset, each filtered by its own name, run concurrently: every
    request declares, and every call runs, only that agent's tool."""
    toolset = Offering(
        [f"{name}_tool" for name in names],
        tool_filter=lambda tool, ctx: ctx is not None and tool.name == f"{ctx.agent_name}_tool",
    )
    models = {name: ScriptedModel([_calls(f"{name}_tool"), f"{name} done"]) for name in names}
    agents = [LlmAgent(name=n, model=models[n], tools=[toolset]) for n in names]
    events = await _run(ParallelAgent(name="all", sub_agents=agents))
    note(repr([e.author for e in events]))
    for name, model in models.items():
        assert [_declared(r) for r in model.requests] == [[f"{name}_tool"], [f"{name}_tool"]]
    by_author = {e.author: _responses([e]) for e in events if _responses([e])}
    assert by_author == {name: [{"tool": f"{name}_tool", "x": 0}] for name in names}


# -- hosting: the scope toolsets keep long-lived tasks in ----------------------------------------


class Hosting(Offering):
    """Starts one long-lived task per scope it is asked in; counts starts and stops."""

    def __init__(self) -> None:
        super().__init__(["ping"])
        self.started = 0
        self.stopped = 0
        self._scopes: set[int] = set()
        self.outside_scope = 0

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        scope = current_scope()
        if scope is None:
            self.outside_scope += 1
        elif id(scope) not in self._scopes:
            self._scopes.add(id(scope))
            stop = trio.Event()
            await scope.nursery.start(self._hold, stop)
            scope.on_close(stop.set)
        return await super().get_tools(readonly_context)

    async def _hold(self, stop: trio.Event, *, task_status: Any) -> None:
        self.started += 1
        task_status.started()
        try:
            await stop.wait()
        finally:
            self.stopped += 1


async def test_without_runner_context_each_invocation_has_its_own_scope() -> None:
    toolset = Hosting()
    agent = LlmAgent(name="a", model=ScriptedModel(["one", "two"]), tools=[toolset])
    runner = InMemoryRunner(agent, app_name="app")
    await _run(agent, runner=runner, session_id="x")
    assert (toolset.started, toolset.stopped) == (1, 1)
    await _run(agent, runner=runner, session_id="y")
    assert (toolset.started, toolset.stopped) == (2, 2)
    assert toolset.outside_scope == 0


async def test_runner_context_owns_one_scope_for_every_invocation() -> None:
    toolset = Hosting()
    agent = LlmAgent(name="a", model=ScriptedModel(["one", "two"]), tools=[toolset])
    async with InMemoryRunner(agent, app_name="app") as runner:
        await _run(agent, runner=runner, session_id="x")
        await _run(agent, runner=runner, session_id="y")
        assert (toolset.started, toolset.stopped) == (1, 0)
    assert (toolset.started, toolset.stopped) == (1, 1)
    assert toolset.closed == 1  # the Runner closed its toolsets


async def test_cancelled_invocation_stops_its_scope() -> None:
    toolset = Hosting()

    async def stuck(request: LlmRequest) -> str:
        await trio.sleep_forever()
        return "never"

    agent = LlmAgent(name="a", model=ScriptedModel(stuck), tools=[toolset])
    runner = InMemoryRunner(agent, app_name="app")
    await runner.session_service.create_session(app_name="app", user_id="u", session_id="s")
    async with runner.run(user_id="u", session_id="s", new_message="go") as events:
        await trio.testing.wait_all_tasks_blocked()
        assert (toolset.started, toolset.stopped) == (1, 0)
        events.cancel()
        async for _ in events:
            pass
    assert (toolset.started, toolset.stopped) == (1, 1)


async def test_body_error_under_runner_context_is_not_wrapped() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel(["x"]), tools=[Hosting()])
    with pytest.raises(KeyError):
        async with InMemoryRunner(agent, app_name="app"):
            raise KeyError("mine")


async def test_toolsets_outside_a_run_have_no_scope() -> None:
    toolset = Hosting()
    await toolset.get_tools()
    assert toolset.outside_scope == 1
    assert toolset.started == 0


async def test_agent_tool_inner_run_uses_the_outer_scope() -> None:
    from trio_agents.tools import AgentTool

    toolset = Hosting()
    inner = LlmAgent(name="inner", model=ScriptedModel(["inner one", "inner two"]), tools=[toolset])
    outer_model = ScriptedModel(
        [
            LlmResponse(
                content=Content(
                    role="model", parts=[Part.from_function_call("inner", {"request": "hi"})]
                ),
                finish_reason="STOP",
            ),
            "outer one",
            LlmResponse(
                content=Content(
                    role="model", parts=[Part.from_function_call("inner", {"request": "again"})]
                ),
                finish_reason="STOP",
            ),
            "outer two",
        ]
    )
    outer = LlmAgent(name="outer", model=outer_model, tools=[AgentTool(inner)])
    async with InMemoryRunner(outer, app_name="app") as runner:
        first = await _run(outer, runner=runner, session_id="x")
        await _run(outer, runner=runner, session_id="y")
        assert (toolset.started, toolset.stopped) == (1, 0)
    assert (toolset.started, toolset.stopped) == (1, 1)
    assert _responses(first) == [{"result": "inner one"}]
