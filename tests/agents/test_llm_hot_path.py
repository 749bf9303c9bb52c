"""The shortcuts of the model step (W5's hot path) change nothing a user can observe.

A lone function call runs in the agent's own task, several in a nursery (ARCHITECTURE §4). The
lone-call shortcut must be invisible: every scenario below runs twice, once as shipped and once
with the lone call forced through the nursery path, and the two runs must deliver and store the
same events, raise the same exception (type, message, group shape), call the same callbacks in
the same order and leave the same state.

The other shortcuts are checked against the slow way they replace: call arguments copied
shallowly when every value is a scalar, function-call ids given without converters, tools that
only declare themselves added without a tool context, instructions without placeholders used as
they are (and their joined text kept until the agent changes), response actions merged only when
a call has any, and a step with no model hook to consult run without a callback context.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any
from unittest import mock

import attrs
import pytest
import trio
from hypothesis import given, note, strategies as st

from tests.agents.llm_helpers import Chat, call, calls, fc, identity, kinds, responses
from trio_agents import (
    Content,
    Event,
    FunctionCall,
    InMemoryRunner,
    LlmAgent,
    ModelError,
    Part,
    RunConfig,
    StreamingMode,
    ToolContext,
)
from trio_agents._context import with_call_ids
from trio_agents.agents import _llm_tools, inject_session_state
from trio_agents.models import FunctionDeclaration, LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin
from trio_agents.testing import ScriptedModel
from trio_agents.testing.strategies import contents, json_values
from trio_agents.tools import BaseTool, FunctionTool, LongRunningFunctionTool

OUTCOMES = ("value", "scalar", "raise", "group1", "group2", "not_json", "actions", "sleep")


@contextlib.contextmanager
def through_a_nursery() -> Iterator[None]:
    """Run a lone call the way several calls run: in a child task of a nursery."""

    async def in_nursery(agent: Any, ctx: Any, one: Any, results: Any) -> BaseException | None:
        return await _llm_tools._run_concurrently(agent, ctx, [one], results)

    with mock.patch.object(_llm_tools, "_run_single", in_nursery):
        yield


@attrs.frozen
class Scenario:
    outcome: str
    checkpoint: bool
    sync: bool
    long_running: bool
    unknown: bool
    before: str | None
    after: str | None
    on_error: str | None
    cancel: bool


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    outcome = draw(st.sampled_from(OUTCOMES))
    sync = outcome not in ("sleep", "group1", "group2") and draw(st.booleans())
    return Scenario(
        outcome=outcome,
        checkpoint=draw(st.booleans()),
        sync=sync,
        long_running=draw(st.booleans()),
        unknown=draw(st.booleans()),
        before=draw(st.sampled_from([None, "pass", "answer"])),
        after=draw(st.sampled_from([None, "pass", "replace"])),
        on_error=draw(st.sampled_from([None, "pass", "recover"])),
        cancel=outcome == "sleep" or draw(st.booleans()),  # a sleeping tool is always cancelled
    )


def _act(scenario: Scenario, n: int, tool_context: ToolContext) -> Any:
    outcome = scenario.outcome
    if outcome == "raise":
        raise RuntimeError(f"boom {n}")
    if outcome == "group1":
        raise ExceptionGroup("tool group", [ValueError("only")])
    if outcome == "group2":
        raise ExceptionGroup("tool group", [ValueError("one"), KeyError("two")])
    if outcome == "not_json":
        return {"bad": {n}}  # a set: not JSON
    if outcome == "actions":
        tool_context.state["seen"] = n
        tool_context.actions.skip_summarization = True
        return {"kept": n}
    if outcome == "scalar":
        return None if scenario.long_running else n
    return {"n": n + 1}


def _tool(scenario: Scenario, log: list[str]) -> FunctionTool:
    async def work(n: int, tool_context: ToolContext) -> Any:
        log.append("tool")
        if scenario.checkpoint:
            await trio.lowlevel.checkpoint()
        if scenario.outcome == "sleep":
            await trio.sleep_forever()
        return _act(scenario, n, tool_context)

    def work_sync(n: int, tool_context: ToolContext) -> Any:
        log.append("tool")
        return _act(scenario, n, tool_context)

    func = work_sync if scenario.sync else work
    kind = LongRunningFunctionTool if scenario.long_running else FunctionTool
    return kind(func, name="work")


def _callbacks(scenario: Scenario, log: list[str]) -> dict[str, Any]:
    def before(*, tool: Any, args: dict[str, Any], tool_context: ToolContext) -> Any:
        log.append(f"before {tool.name} {args}")
        return {"short": args.get("n")} if scenario.before == "answer" else None

    def after(*, tool: Any, args: Any, tool_context: Any, tool_response: Any) -> Any:
        log.append(f"after {tool.name} {tool_response}")
        return {"after": True} if scenario.after == "replace" else None

    def on_error(*, tool: Any, args: Any, tool_context: Any, error: Exception) -> Any:
        log.append(f"error {tool.name} {type(error).__name__}: {error}")
        return {"recovered": str(error)} if scenario.on_error == "recover" else None

    def before_model(*, callback_context: Any, llm_request: Any) -> None:
        log.append("model")  # a step after a swallowed cancellation would show here

    chosen: dict[str, Any] = {"before_model_callback": before_model}
    if scenario.before:
        chosen["before_tool_callback"] = before
    if scenario.after:
        chosen["after_tool_callback"] = after
    if scenario.on_error:
        chosen["on_tool_error_callback"] = on_error
    return chosen


def _shape(exc: BaseException | None) -> Any:
    if exc is None:
        return None
    if isinstance(exc, BaseExceptionGroup):
        return (type(exc).__name__, exc.message, [_shape(e) for e in exc.exceptions])
    return (type(exc).__name__, str(exc))


def _part(part: Part) -> Any:
    if part.function_call is not None:
        return ("call", part.function_call.name, dict(part.function_call.args))
    if part.function_response is not None:
        answer = part.function_response
        return ("response", answer.name, dict(answer.response), answer.id is not None)
    return ("text", part.text)


def _picture(event: Event, invocation_id: str) -> Any:
    parts = [_part(p) for p in event.content.parts] if event.content else None
    actions = event.actions
    return (
        event.author,
        event.branch,
        event.invocation_id == invocation_id,
        parts,
        event.error_code,
        event.error_message,
        bool(event.long_running_tool_ids),
        dict(actions.state_delta),
        actions.escalate,
        actions.skip_summarization,
        event.is_final_response(),
    )


async def _run(scenario: Scenario) -> Any:
    """One run of ``scenario``; everything observable about it."""
    log: list[str] = []
    name = "nowhere" if scenario.unknown else "work"
    model = ScriptedModel([fc(name, {"n": 1}, id="c1"), "done"])
    agent = LlmAgent(
        name="a", model=model, tools=[_tool(scenario, log)], **_callbacks(scenario, log)
    )
    runner = InMemoryRunner(agent, app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    delivered: list[Event] = []
    failure: Exception | None = None
    invocation_id = ""
    try:
        with trio.fail_after(30):
            async with runner.run(user_id="u", session_id=session.id, new_message="go") as run:
                invocation_id = run.invocation_id
                async for event in run:
                    delivered.append(event)
                    if scenario.cancel and event.get_function_calls():
                        run.cancel("the test cancels")
    except Exception as exc:
        failure = exc
    stored = await runner.session_service.get_session(
        app_name="app", user_id="u", session_id=session.id
    )
    assert stored is not None
    return {
        "delivered": [_picture(e, invocation_id) for e in delivered],
        "stored": [_picture(e, invocation_id) for e in stored.events[1:]],
        "failure": _shape(failure),
        "log": log,
        "state": dict(stored.state),
        "model_calls": len(model.requests),
    }


@given(scenario=scenarios(), _seed=st.random_module())
async def test_a_lone_call_behaves_as_it_would_in_a_nursery(scenario: Scenario, _seed: Any) -> None:
    note(repr(scenario))
    direct = await _run(scenario)
    with through_a_nursery():
        nursery = await _run(scenario)
    note(repr(direct))
    assert direct == nursery


# -- the shortcut is taken only for a lone call ----------------------------------------------------


async def _tasks_of_tools(
    model_turn: LlmResponse, *, forced: bool = False
) -> tuple[Any, list[Any]]:
    agent_tasks: list[Any] = []
    tool_tasks: list[Any] = []

    def before_model(*, callback_context: Any, llm_request: Any) -> None:
        agent_tasks.append(trio.lowlevel.current_task())

    async def probe(n: int) -> int:
        tool_tasks.append(trio.lowlevel.current_task())
        return n

    model = ScriptedModel([model_turn, "done"])
    agent = LlmAgent(name="a", model=model, tools=[probe], before_model_callback=before_model)
    session = await Chat.start(agent)
    with through_a_nursery() if forced else contextlib.nullcontext():
        events = await session.send()
    assert kinds(events)[-1] == "T:done"
    return agent_tasks[0], tool_tasks


async def test_a_lone_call_runs_in_the_agent_task() -> None:
    agent_task, tool_tasks = await _tasks_of_tools(fc("probe", {"n": 1}))
    assert tool_tasks == [agent_task]


async def test_the_forced_nursery_path_runs_a_lone_call_in_a_child_task() -> None:
    agent_task, tool_tasks = await _tasks_of_tools(fc("probe", {"n": 1}), forced=True)
    assert len(tool_tasks) == 1
    assert tool_tasks[0] is not agent_task


async def test_several_calls_each_run_in_a_child_task_of_the_agent() -> None:
    turn = calls(call("probe", {"n": 1}), call("probe", {"n": 2}))
    agent_task, tool_tasks = await _tasks_of_tools(turn)
    assert len(set(tool_tasks)) == 2
    assert agent_task not in tool_tasks
    assert all(t.parent_nursery.parent_task is agent_task for t in tool_tasks)


# -- failures keep the shape a nursery gives them --------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected", "codes"),
    [
        (RuntimeError("boom"), ("RuntimeError", "boom"), ["RuntimeError"]),
        (ExceptionGroup("tool", [ValueError("only")]), ("ValueError", "only"), ["ValueError"]),
        (
            ExceptionGroup("tool", [ValueError("one"), KeyError("two")]),
            (
                "ExceptionGroup",
                _llm_tools.NURSERY_MESSAGE,
                [("ValueError", "one"), ("KeyError", "'two'")],
            ),
            ["ValueError", "KeyError"],
        ),
    ],
)
async def test_a_lone_failing_call_raises_what_a_nursery_would(
    raised: Exception, expected: Any, codes: list[str]
) -> None:
    async def fail() -> None:
        raise raised

    session = await Chat.start(LlmAgent(name="a", model=ScriptedModel([fc("fail")]), tools=[fail]))
    with pytest.raises(Exception) as info:
        await session.send()
    assert _shape(info.value) == expected
    assert [e.error_code for e in await session.stored() if e.error_code] == codes


async def test_a_cancelled_lone_call_is_closed_by_the_runner() -> None:
    started = trio.Event()

    async def wait() -> None:
        started.set()
        await trio.sleep_forever()

    session = await Chat.start(LlmAgent(name="a", model=ScriptedModel([fc("wait")]), tools=[wait]))
    runner = session.runner
    async with runner.run(user_id="u", session_id=session.session_id, new_message="go") as run:
        delivered = []
        async for event in run:
            delivered.append(event)
            if event.get_function_calls():
                await started.wait()
                run.cancel("stop")
    stored = await session.stored()
    assert stored == delivered
    assert kinds(stored) == ["FC:wait", "FR:wait"]
    assert dict(stored[1].get_function_responses()[0].response) == {
        "error": "cancelled",
        "reason": "run cancelled",
    }


# -- call arguments (R-TOOL-1) ---------------------------------------------------------------------


def _mutate_everything(value: Any) -> None:
    if isinstance(value, dict):
        for item in list(value.values()):
            _mutate_everything(item)
        value["mutated"] = True
    elif isinstance(value, list):
        for item in value:
            _mutate_everything(item)
        value.append("mutated")


@given(
    args=st.dictionaries(st.text(max_size=6), json_values(max_leaves=6), max_size=4),
    _seed=st.random_module(),
)
def test_call_arguments_are_copied_deeply_whatever_their_shape(args: Any, _seed: Any) -> None:
    one = FunctionCall(name="f", args=args)
    before = copy.deepcopy(dict(one.args))
    copied = _llm_tools._copied_args(one)
    assert type(copied) is dict
    assert copied == before
    assert copied is not one.args
    _mutate_everything(copied)
    assert dict(one.args) == before


# -- function-call ids (R-EV-6) --------------------------------------------------------------------


def _with_signatures(content: Content) -> Content:
    """Some function-call parts carry a thought signature, as Gemini's do."""
    parts = [
        attrs.evolve(p, thought_signature=b"sig") if p.function_call is not None and i % 2 else p
        for i, p in enumerate(content.parts)
    ]
    return attrs.evolve(content, parts=parts)


@given(content=contents(roles=("model",)).map(_with_signatures), _seed=st.random_module())
def test_calls_without_an_id_get_a_fresh_one_and_nothing_else_changes(
    content: Content, _seed: Any
) -> None:
    given_ids = [p.function_call.id if p.function_call else None for p in content.parts]
    result = with_call_ids(content)
    assert result is not None
    if all(p.function_call is None or p.function_call.id for p in content.parts):
        assert result is content
        return
    assert type(result) is Content
    assert type(result.parts) is tuple
    assert result.role == content.role
    fresh: list[str] = []
    for old, new, old_id in zip(content.parts, result.parts, given_ids, strict=True):
        if old.function_call is None or old_id:
            assert new is old
            continue
        assert type(new) is Part
        assert type(new.function_call) is FunctionCall
        assert new.function_call.id is not None
        assert new.function_call.id.startswith("adk-")
        fresh.append(new.function_call.id)
        # Everything but the id is as it was; the original part is untouched.
        assert attrs.evolve(new, function_call=attrs.evolve(new.function_call, id=None)) == old
        assert old.function_call.id is None
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            new.function_call.id = "x"  # type: ignore[misc]
    assert len(set(fresh)) == len(fresh)
    assert result == attrs.evolve(content, parts=list(result.parts))


# -- tools added to the request (R-LLM-3) ----------------------------------------------------------


class _Edits(BaseTool):
    """A tool that edits the request itself and records the context it was given."""

    def __init__(self, name: str, seen: list[Any]) -> None:
        super().__init__(name=name)
        self.seen = seen

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        self.seen.append(tool_context)
        llm_request.tools.append(FunctionDeclaration(name=f"{self.name}_declared"))
        await trio.lowlevel.checkpoint()

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return None


def first(x: int) -> int:
    """First."""
    return x


def second(x: int) -> int:
    """Second."""
    return x


async def test_declared_and_self_adding_tools_keep_their_order_and_share_one_context() -> None:
    seen: list[Any] = []
    patched = FunctionTool(second)

    async def instead(*, tool_context: ToolContext, llm_request: LlmRequest) -> None:
        seen.append(tool_context)
        llm_request.tools.append(FunctionDeclaration(name="patched_on_the_instance"))

    patched.process_llm_request = instead  # type: ignore[method-assign]
    requests: list[LlmRequest] = []

    def capture(*, callback_context: Any, llm_request: LlmRequest) -> None:
        requests.append(llm_request)

    tools = [FunctionTool(first), _Edits("one", seen), patched, _Edits("two", seen)]
    agent = LlmAgent(
        name="a", model=ScriptedModel(["ok"]), tools=tools, before_model_callback=capture
    )
    await (await Chat.start(agent)).send()
    names = [t.name for t in requests[0].tools]
    assert names == ["first", "one_declared", "patched_on_the_instance", "two_declared"]
    assert len(seen) == 3
    assert all(type(c) is ToolContext and c is seen[0] for c in seen)


# -- instructions (R-TPL-1) ------------------------------------------------------------------------


@given(text=st.text(st.characters(blacklist_characters="{"), max_size=40), _seed=st.random_module())
async def test_an_instruction_without_placeholders_is_sent_as_rendering_would_give_it(
    text: str, _seed: Any
) -> None:
    sent: list[str | None] = []
    rendered: list[str] = []

    async def capture(*, callback_context: Any, llm_request: LlmRequest) -> None:
        sent.append(llm_request.system_instruction)
        rendered.append(await inject_session_state(text, callback_context))

    agent = LlmAgent(
        name="a", model=ScriptedModel(["ok"]), instruction=text, before_model_callback=capture
    )
    await (await Chat.start(agent)).send()
    assert rendered == [text]
    assert sent == ["\n\n".join(piece for piece in (text, identity("a")) if piece)]


# -- merged response actions (R-EV-7) --------------------------------------------------------------


async def test_a_later_call_resetting_a_flag_still_wins_the_merge_r_ev_7() -> None:
    async def raise_flag(tool_context: ToolContext) -> str:
        tool_context.state["k"] = 1
        tool_context.actions.escalate = True
        return "up"

    async def lower_flag(tool_context: ToolContext) -> str:
        tool_context.actions.escalate = False
        return "down"

    async def quiet() -> str:
        return "quiet"

    turn = calls(call("raise_flag"), call("quiet"), call("lower_flag"))
    agent = LlmAgent(
        name="a", model=ScriptedModel([turn, "done"]), tools=[raise_flag, lower_flag, quiet]
    )
    events = await (await Chat.start(agent)).send()
    assert responses(events[1]) == [
        ("raise_flag", {"result": "up"}),
        ("quiet", {"result": "quiet"}),
        ("lower_flag", {"result": "down"}),
    ]
    assert dict(events[1].actions.state_delta) == {"k": 1}
    assert events[1].actions.escalate is False


async def test_calls_without_actions_give_a_response_event_without_actions() -> None:
    async def quiet() -> str:
        return "quiet"

    for turn in (fc("quiet"), calls(call("quiet"), call("quiet"))):
        agent = LlmAgent(name="a", model=ScriptedModel([turn, "done"]), tools=[quiet])
        events = await (await Chat.start(agent)).send()
        assert events[1].actions.is_empty()
        assert events[1].actions.escalate is None


# -- a step without model hooks needs no callback context ------------------------------------------

MODEL_TURNS = {
    "text": lambda i: f"answer {i}",
    "call": lambda i: fc("work", {"n": i}, id=f"c{i}"),
    "blank": lambda i: LlmResponse(
        content=Content(role="model", parts=(Part(text="  "),)), finish_reason="STOP"
    ),
    "fails": lambda i: ModelError(f"down {i}"),
}


@attrs.frozen
class ModelScenario:
    turns: tuple[str, ...]
    output_key: str | None
    streaming: bool


@st.composite
def model_scenarios(draw: st.DrawFn) -> ModelScenario:
    calls_first = draw(st.lists(st.just("call"), max_size=2))
    last = draw(st.sampled_from(["text", "call", "blank", "fails"]))
    return ModelScenario(
        turns=(*calls_first, last, "text"),
        output_key=draw(st.sampled_from([None, "out"])),
        streaming=draw(st.booleans()),
    )


async def _run_model_scenario(scenario: ModelScenario, hooks: str) -> Any:
    async def work(n: int) -> dict[str, int]:
        return {"n": n}

    seen: list[str] = []

    def passive(**kwargs: Any) -> None:
        seen.append(sorted(kwargs)[0])  # called, changes nothing

    callbacks: dict[str, Any] = {}
    plugins: list[BasePlugin] = []
    if hooks == "callbacks":
        callbacks = {
            "before_model_callback": passive,
            "after_model_callback": passive,
            "on_model_error_callback": passive,
        }
    if hooks == "plugin":
        plugins = [BasePlugin(name="passive")]
    model = ScriptedModel([MODEL_TURNS[t](i) for i, t in enumerate(scenario.turns)])
    agent = LlmAgent(
        name="a", model=model, tools=[work], output_key=scenario.output_key, **callbacks
    )
    runner = InMemoryRunner(agent, app_name="app", plugins=plugins)
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    config = RunConfig(streaming_mode=StreamingMode.SSE if scenario.streaming else None)
    delivered: list[Event] = []
    failure: Exception | None = None
    try:
        async with runner.run(
            user_id="u", session_id=session.id, new_message="go", run_config=config
        ) as run:
            invocation_id = run.invocation_id
            delivered.extend([event async for event in run])
    except Exception as exc:
        failure = exc
    stored = await runner.session_service.get_session(
        app_name="app", user_id="u", session_id=session.id
    )
    assert stored is not None
    return {
        "delivered": [_picture(e, invocation_id) for e in delivered],
        "stored": [_picture(e, invocation_id) for e in stored.events[1:]],
        "failure": _shape(failure),
        "state": dict(stored.state),
        "requests": [(r.system_instruction, len(r.contents), r.tools) for r in model.requests],
    }


@given(scenario=model_scenarios(), _seed=st.random_module())
async def test_a_step_without_model_hooks_behaves_as_with_passive_ones(
    scenario: ModelScenario, _seed: Any
) -> None:
    note(repr(scenario))
    bare = await _run_model_scenario(scenario, "none")
    assert bare == await _run_model_scenario(scenario, "callbacks")
    assert bare == await _run_model_scenario(scenario, "plugin")


# -- the joined system instruction follows the agent -----------------------------------------------


async def test_a_changed_instruction_name_or_description_reaches_the_next_request() -> None:
    model = ScriptedModel(["one", "two", "three", "four"])
    child = LlmAgent(
        name="child",
        model=model,
        instruction="Be brief.",
        disallow_transfer_to_parent=True,
        disallow_transfer_to_peers=True,
    )
    root = LlmAgent(name="root", model=model, global_instruction="G.", sub_agents=[child])
    session = await Chat.start(child)
    await session.send()
    child.instruction = "Be thorough."
    await session.send()
    child.description = "Helps."
    await session.send()
    root.global_instruction = "H."
    await session.send()
    assert [r.system_instruction for r in model.requests] == [
        "\n\n".join(["G.", "Be brief.", identity("child")]),
        "\n\n".join(["G.", "Be thorough.", identity("child")]),
        "\n\n".join(["G.", "Be thorough.", identity("child", "Helps.")]),
        "\n\n".join(["H.", "Be thorough.", identity("child", "Helps.")]),
    ]
