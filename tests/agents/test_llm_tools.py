"""Tool calls of an LLM agent (R-TOOL-1..8, R-EV-7, R-LRO, S-TOOL-*).

Concurrency is shown with events that would deadlock under sequential execution; the
``autojump_clock`` turns such a deadlock into an immediate ``TooSlowError`` instead of a hang.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pydantic
import pytest
import trio

from tests.agents.llm_helpers import Chat, call, calls, chat, fc, kinds, responses
from trio_agents import (
    Content,
    LlmAgent,
    LoopAgent,
    Part,
    SequentialAgent,
    ToolContext,
    ToolError,
)
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool, exit_loop


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


# -- unknown tools and missing arguments (R-TOOL-3, R-TOOL-4) ------------------------------------


async def test_unknown_tool_is_an_error_response_the_model_can_recover_from_s_tool_1() -> None:
    model = ScriptedModel([fc("nonexistent", {"x": 1}), "recovered"])
    events = await chat(LlmAgent(name="a", model=model, tools=[lookup]))
    assert kinds(events) == ["FC:nonexistent", "FR:nonexistent", "T:recovered"]
    assert responses(events[1]) == [
        (
            "nonexistent",
            {
                "error": "Invoking `nonexistent()` failed as no tool with that name is available. "
                "The tools you can call are: lookup. You could retry, but it is IMPORTANT that "
                "you only call a tool from that list."
            },
        )
    ]
    # The model saw the error response in its second request.
    answer = model.requests[1].contents[-1].parts[0].function_response
    assert answer is not None
    assert "no tool with that name" in answer.response["error"]


async def test_before_tool_callback_may_answer_an_unknown_tool_r_tool_3() -> None:
    """R-TOOL-3 [2.13]: the before-tool callbacks still see the call and may answer it."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def before(tool: Any, args: dict[str, Any], tool_context: ToolContext) -> Any:
        seen.append((tool.name, args))
        return {"answered": "by callback"}

    def after(**kwargs: Any) -> Any:
        raise AssertionError("after-tool callbacks are skipped for an unknown tool")

    model = ScriptedModel([fc("ghost", {"x": 1}), "done"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[lookup],
        before_tool_callback=before,
        after_tool_callback=after,
    )
    events = await chat(agent)
    assert seen == [("ghost", {"x": 1})]
    assert responses(events[1]) == [("ghost", {"answered": "by callback"})]


async def test_error_callbacks_see_a_value_error_for_an_unknown_tool_r_tool_3() -> None:
    """R-TOOL-3 [2.13]: otherwise the on-tool-error callbacks get a ``ValueError``."""
    errors: list[BaseException] = []

    def on_error(
        tool: Any, args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> Any:
        errors.append(error)
        return {"recovered": tool.name} if len(errors) == 1 else None

    model = ScriptedModel([fc("ghost"), fc("ghost"), "done"])
    events = await chat(
        LlmAgent(name="a", model=model, tools=[lookup], on_tool_error_callback=on_error)
    )
    assert [type(e) for e in errors] == [ValueError, ValueError]
    assert "no tool with that name" in str(errors[0])
    assert responses(events[1]) == [("ghost", {"recovered": "ghost"})]
    assert "error" in responses(events[3])[0][1]  # the second time nobody recovers


async def test_missing_mandatory_arguments_are_an_error_response_s_tool_2() -> None:
    ran: list[int] = []

    def needs_x(x: int, y: int = 0) -> int:
        ran.append(x)
        return x

    model = ScriptedModel([fc("needs_x", {"y": 1}), "sorry"])
    events = await chat(LlmAgent(name="a", model=model, tools=[needs_x]))
    assert kinds(events) == ["FC:needs_x", "FR:needs_x", "T:sorry"]
    assert responses(events[1]) == [
        (
            "needs_x",
            {
                "error": "Invoking `needs_x()` failed as the following mandatory input "
                "parameters are not present:\nx\nYou could retry calling this tool, but it is "
                "IMPORTANT for you to provide all the mandatory parameters."
            },
        )
    ]
    assert ran == []


async def test_arguments_not_in_the_signature_are_dropped_r_tool_4() -> None:
    model = ScriptedModel([fc("lookup", {"q": "x", "extra": True}), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[lookup]))
    assert responses(events[1]) == [("lookup", {"result": "found x"})]


# -- concurrency and merging (R-TOOL-6, R-EV-7) --------------------------------------------------


async def test_calls_of_one_turn_run_concurrently_and_merge_in_call_order_s_tool_3(
    autojump_clock: Any,
) -> None:
    second_ran = trio.Event()
    finished: list[str] = []

    async def first() -> str:
        await second_ran.wait()  # deadlocks if the calls ran one after the other
        finished.append("first")
        return "one"

    async def second() -> str:
        second_ran.set()
        finished.append("second")
        return "two"

    model = ScriptedModel([calls(call("first"), call("second")), "done"])
    with trio.fail_after(60):
        events = await chat(LlmAgent(name="a", model=model, tools=[first, second]))
    assert finished == ["second", "first"]
    assert kinds(events) == ["FC:first,second", "FR:first,second", "T:done"]
    assert responses(events[1]) == [("first", {"result": "one"}), ("second", {"result": "two"})]
    fr = events[1]
    assert fr.author == "a"
    assert fr.content is not None
    assert fr.content.role == "user"
    assert [r.id for r in fr.get_function_responses()] == [
        c.id for c in events[0].get_function_calls()
    ]


async def test_sync_tools_run_in_worker_threads_without_blocking_the_loop_r_tool_4() -> None:
    released = threading.Event()
    threads: list[int] = []

    def blocking() -> str:
        threads.append(threading.get_ident())
        # Released by the async sibling, which can only run if this does not block Trio.
        return "released" if released.wait(timeout=30) else "blocked the event loop"

    async def release() -> str:
        released.set()
        return "set"

    model = ScriptedModel([calls(call("blocking"), call("release")), "done"])
    events = await chat(LlmAgent(name="a", model=model, tools=[blocking, release]))
    assert responses(events[1]) == [
        ("blocking", {"result": "released"}),
        ("release", {"result": "set"}),
    ]
    assert threads != [threading.get_ident()]


async def test_sync_tools_of_one_turn_run_in_parallel_threads_r_tool_6() -> None:
    barrier = threading.Barrier(2, timeout=30)

    def left() -> int:
        return barrier.wait()

    def right() -> int:
        return barrier.wait()

    model = ScriptedModel([calls(call("left"), call("right")), "done"])
    events = await chat(LlmAgent(name="a", model=model, tools=[left, right]))
    # Barrier.wait returns 0 and 1 to the two parties; a broken barrier would raise.
    results = sorted(r.response["result"] for r in events[1].get_function_responses())
    assert results == [0, 1]


async def test_state_writes_of_concurrent_calls_merge_by_write_time(
    autojump_clock: Any,
) -> None:
    second_wrote = trio.Event()

    async def w1(tool_context: ToolContext) -> str:
        await second_wrote.wait()  # w1 writes last in time, but comes first in call order
        tool_context.state["k"] = "first"
        tool_context.state["d"] = {"a": 1}
        return "w1"

    async def w2(tool_context: ToolContext) -> str:
        tool_context.state["k"] = "second"
        tool_context.state["d"] = {"b": 2}
        second_wrote.set()
        return "w2"

    model = ScriptedModel([calls(call("w1"), call("w2")), "done"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[w1, w2]))
    with trio.fail_after(60):
        events = await session.send()
    # ADK merges in call order (R-EV-7), which would commit "second" over the later "first" and
    # move the live state backwards; here the later write wins, dicts still deep-merged.
    assert dict(events[1].actions.state_delta) == {"k": "first", "d": {"a": 1, "b": 2}}
    state = (await session.session()).state
    assert state["k"] == "first"
    assert state["d"] == {"a": 1, "b": 2}


async def test_each_call_has_its_own_tool_context_r_tool_6() -> None:
    seen: list[tuple[str | None, int]] = []

    def probe(n: int, tool_context: ToolContext) -> int:
        seen.append((tool_context.function_call_id, id(tool_context)))
        return n

    model = ScriptedModel([calls(call("probe", {"n": 1}), call("probe", {"n": 2})), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[probe]))
    call_ids = {c.id for c in events[0].get_function_calls()}
    assert {cid for cid, _ in seen} == call_ids
    assert len({ctx for _, ctx in seen}) == 2


# -- results (R-TOOL-5) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1, 2], {"result": [1, 2]}),
        (None, {"result": None}),
        ("text", {"result": "text"}),
        (3.5, {"result": 3.5}),
        ({"k": 1}, {"k": 1}),
        ({}, {}),
    ],
)
async def test_results_are_normalised_to_a_dict_s_tool_4(value: Any, expected: Any) -> None:
    def give() -> Any:
        return value

    model = ScriptedModel([fc("give"), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[give]))
    assert responses(events[1]) == [("give", expected)]


class Reading(pydantic.BaseModel):
    value: int
    unit: str | None = None


@dataclasses.dataclass
class Spot:
    x: int
    tags: list[str]


async def test_pydantic_and_dataclass_results_are_dumped_as_json() -> None:
    # ADK 2.13 serializes what a tool returns with pydantic: a model becomes its fields (None
    # ones left out), a dataclass its fields, also inside lists and dicts.
    def measure() -> Reading:
        return Reading(value=3)

    def where() -> dict[str, Any]:
        return {"spots": [Spot(x=1, tags=["a"])], "reading": Reading(value=2, unit="m")}

    model = ScriptedModel([calls(call("measure"), call("where")), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[measure, where]))
    assert responses(events[1]) == [
        ("measure", {"result": {"value": 3}}),
        ("where", {"spots": [{"x": 1, "tags": ["a"]}], "reading": {"value": 2, "unit": "m"}}),
    ]


async def test_a_result_that_is_not_json_is_a_tool_error_r_tool_5() -> None:
    def bad() -> object:
        return object()

    model = ScriptedModel([fc("bad", id="c1"), "never"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[bad]))
    with pytest.raises(ToolError, match="'bad'") as info:
        await session.send()
    assert (info.value.tool_name, info.value.call_id) == ("bad", "c1")
    assert len(model.requests) == 1


async def test_the_tool_gets_a_copy_of_the_call_arguments_r_tool_1() -> None:
    def mutate(items: list[int]) -> int:
        items.append(99)
        return len(items)

    model = ScriptedModel([fc("mutate", {"items": [1]}), "ok"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[mutate]))
    events = await session.send()
    assert responses(events[1]) == [("mutate", {"result": 2})]
    assert dict(events[0].get_function_calls()[0].args) == {"items": [1]}
    stored = await session.stored()
    assert dict(stored[0].get_function_calls()[0].args) == {"items": [1]}


# -- failures (R-TOOL-6, R-TOOL-8) ---------------------------------------------------------------


async def test_a_failing_tool_fails_the_run_after_the_call_event_r_tool_8() -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    model = ScriptedModel([fc("boom", id="c1"), "never"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[boom]))
    with pytest.raises(RuntimeError, match="boom"):
        await session.send()
    assert kinds(session.delivered) == ["FC:boom", "FR:boom", "E:RuntimeError"]
    assert len(model.requests) == 1
    stored = await session.stored()
    assert stored == session.delivered
    # The call is closed by the Runner (ARCHITECTURE §2 rule 7), then the error event.
    assert kinds(stored) == ["FC:boom", "FR:boom", "E:RuntimeError"]
    assert responses(stored[1]) == [
        ("boom", {"error": "cancelled", "reason": "run failed: RuntimeError"})
    ]
    assert (stored[2].author, stored[2].error_message) == ("a", "boom")


async def test_a_failure_cancels_the_siblings_and_keeps_finished_results_s_tool_5() -> None:
    slow_cancelled: list[bool] = []

    async def fast() -> str:
        return "fast done"

    async def slow() -> str:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            slow_cancelled.append(True)
            raise

    async def boom() -> str:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("boom")

    model = ScriptedModel([calls(call("fast"), call("slow"), call("boom")), "never"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[fast, slow, boom]))
    with pytest.raises(RuntimeError, match="boom"):
        await session.send()
    assert slow_cancelled == [True]
    assert kinds(session.delivered) == [
        "FC:fast,slow,boom",
        "FR:fast",
        "FR:slow,boom",
        "E:RuntimeError",
    ]
    assert responses(session.delivered[1]) == [("fast", {"result": "fast done"})]
    stored = await session.stored()
    assert stored == session.delivered
    assert kinds(stored) == ["FC:fast,slow,boom", "FR:fast", "FR:slow,boom", "E:RuntimeError"]
    assert stored[1].id == session.delivered[1].id
    assert len(model.requests) == 1


# -- state and actions (R-ST-3, R-TOOL-7) --------------------------------------------------------


async def test_tool_state_writes_ride_on_the_response_event_s_st_1() -> None:
    def remember(tool_context: ToolContext) -> str:
        tool_context.state["x"] = 1
        tool_context.state["temp:t"] = "T"
        tool_context.state["app:a"] = "A"
        tool_context.state["user:u"] = "U"
        return "ok"

    def recall(tool_context: ToolContext) -> Any:
        return {"temp": tool_context.state.get("temp:t"), "x": tool_context.state.get("x")}

    model = ScriptedModel([fc("remember"), fc("recall"), "done"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[remember, recall]))
    events = await session.send()
    assert dict(events[1].actions.state_delta) == {"x": 1, "app:a": "A", "user:u": "U"}
    # temp: is visible for the rest of the invocation (R-ST-4) ...
    assert responses(events[3]) == [("recall", {"temp": "T", "x": 1})]
    state = (await session.session()).state
    # ... and never persisted.
    assert state == {"x": 1, "app:a": "A", "user:u": "U"}
    other = await Chat.start(session.runner.agent, runner=session.runner)
    assert (await other.session()).state == {"app:a": "A", "user:u": "U"}


async def test_skip_summarization_makes_the_response_final_r_tool_7() -> None:
    def quiet(tool_context: ToolContext) -> str:
        tool_context.actions.skip_summarization = True
        return "raw result"

    model = ScriptedModel([fc("quiet"), "never"])
    events = await chat(LlmAgent(name="a", model=model, tools=[quiet]))
    assert kinds(events) == ["FC:quiet", "FR:quiet"]
    assert events[1].actions.skip_summarization is True
    assert events[1].is_final_response()
    assert len(model.requests) == 1


async def test_exit_loop_ends_the_loop_without_another_model_call_r_tool_7() -> None:
    worker_model = ScriptedModel(["w1", fc("exit_loop"), "never"])
    other_model = ScriptedModel(["o1", "never"])
    loop = LoopAgent(
        name="loop",
        sub_agents=[
            LlmAgent(name="worker", model=worker_model, tools=[exit_loop]),
            LlmAgent(name="other", model=other_model),
        ],
    )
    events = await chat(loop)
    assert [(e.author, k) for e, k in zip(events, kinds(events), strict=True)] == [
        ("worker", "T:w1"),
        ("other", "T:o1"),
        ("worker", "FC:exit_loop"),
        ("worker", "FR:exit_loop"),
    ]
    assert events[-1].actions.escalate is True
    assert events[-1].actions.skip_summarization is True
    assert responses(events[-1]) == [("exit_loop", {"result": None})]
    assert len(worker_model.requests) == 2
    assert len(other_model.requests) == 1


def test_exit_loop_declaration_hides_the_tool_context() -> None:
    declaration = exit_loop.declaration()
    assert declaration.name == "exit_loop"
    assert declaration.parameters is None


async def test_escalate_lets_the_agent_finish_then_ends_the_loop_r_loop_3() -> None:
    def stop(tool_context: ToolContext) -> str:
        tool_context.actions.escalate = True
        return "stopping"

    worker_model = ScriptedModel([fc("stop"), "summary"])
    other_model = ScriptedModel(["never"])
    loop = LoopAgent(
        name="loop",
        sub_agents=[
            LlmAgent(name="worker", model=worker_model, tools=[stop]),
            LlmAgent(name="other", model=other_model),
        ],
    )
    events = await chat(loop)
    assert kinds(events) == ["FC:stop", "FR:stop", "T:summary"]
    assert events[1].actions.escalate is True
    assert other_model.requests == []


async def test_end_invocation_from_a_tool_stops_the_agent_s_tool_7() -> None:
    def finish(tool_context: ToolContext) -> str:
        tool_context.end_invocation = True
        return "bye"

    model = ScriptedModel([fc("finish"), "never"])
    events = await chat(LlmAgent(name="a", model=model, tools=[finish]))
    assert kinds(events) == ["FC:finish", "FR:finish"]
    assert len(model.requests) == 1


async def test_end_invocation_does_not_stop_the_enclosing_sequence_s_tool_6() -> None:
    def finish(tool_context: ToolContext) -> str:
        tool_context.end_invocation = True
        return "bye"

    first = ScriptedModel([fc("finish"), "never"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="a1", model=first, tools=[finish]),
            LlmAgent(name="a2", model=ScriptedModel(["a2 runs"])),
        ],
    )
    events = await chat(seq)
    assert kinds(events) == ["FC:finish", "FR:finish", "T:a2 runs"]
    assert len(first.requests) == 1


# -- long-running tools (R-LRO) ------------------------------------------------------------------


async def test_long_running_tool_pending_result_then_model_reply_s_lro_1() -> None:
    runs: list[str] = []

    def start_job(job: str) -> dict[str, str]:
        runs.append(job)
        return {"status": "pending"}

    model = ScriptedModel([fc("start_job", {"job": "j"}), "started"])
    agent = LlmAgent(name="a", model=model, tools=[LongRunningFunctionTool(start_job)])
    events = await chat(agent)
    assert kinds(events) == ["FC:start_job", "FR:start_job", "T:started"]
    call_id = events[0].get_function_calls()[0].id
    assert events[0].long_running_tool_ids == {call_id}
    assert [e.is_final_response() for e in events] == [True, False, True]
    assert responses(events[1]) == [("start_job", {"status": "pending"})]
    assert runs == ["j"]
    assert len(model.requests) == 2


async def test_long_running_tool_returning_none_ends_the_step_then_resumes_s_lro_4() -> None:
    runs: list[int] = []

    def approve(amount: int) -> None:
        runs.append(amount)

    model = ScriptedModel([fc("approve", {"amount": 5}), "approved, thanks"])
    agent = LlmAgent(name="a", model=model, tools=[LongRunningFunctionTool(approve)])
    session = await Chat.start(agent)
    first = await session.send("pay 5")
    assert kinds(first) == ["FC:approve"]
    assert len(model.requests) == 1
    call_id = first[0].get_function_calls()[0].id
    assert call_id is not None

    answer = Part.from_function_response("approve", {"status": "ok"}, id=call_id)
    second = await session.send(Content(role="user", parts=[answer]))
    assert kinds(second) == ["T:approved, thanks"]
    assert runs == [5]  # the tool is not run again
    contents = model.requests[1].contents
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert contents[0] == Content.from_text("pay 5", role="user")
    assert contents[2].parts[0].function_response is not None
    assert dict(contents[2].parts[0].function_response.response) == {"status": "ok"}


async def test_latest_long_running_answer_follows_its_call_directly_s_lro_2() -> None:
    def job() -> dict[str, str]:
        return {"status": "pending"}

    model = ScriptedModel([fc("job"), "waiting", "still", "finished"])
    agent = LlmAgent(name="a", model=model, tools=[LongRunningFunctionTool(job)])
    session = await Chat.start(agent)
    first = await session.send("go")
    call_id = first[0].get_function_calls()[0].id
    for update in ({"status": "still waiting"}, {"result": 2}):
        answer = Part.from_function_response("job", update, id=call_id)
        await session.send(Content(role="user", parts=[answer]))
    contents = model.requests[-1].contents
    assert len(contents) == 3
    assert contents[0] == Content.from_text("go", role="user")
    assert contents[1].parts[0].function_call is not None
    latest = contents[2].parts[0].function_response
    assert latest is not None
    assert dict(latest.response) == {"result": 2}


async def test_explicit_function_tool_behaves_like_a_plain_function() -> None:
    tool = FunctionTool(lookup, name="search", description="Search things.")
    model = ScriptedModel([fc("search", {"q": "z"}), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[tool]))
    assert responses(events[1]) == [("search", {"result": "found z"})]
    assert model.requests[0].tools[0].name == "search"
    assert model.requests[0].tools[0].description == "Search things."
