"""What each hook sees and what its result does (R-PLG-5..11, S-CB-2..16).

Also: ``after_run`` runs exactly once on every clean ending (R-PLG-8), no hook runs after it, and
hooks from sibling ``ParallelAgent`` branches (and from concurrent invocations) interleave, so a
plugin keeps per-invocation state keyed by invocation id.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given, note, strategies as st

from tests.plugins.helpers import (
    Recorder,
    Run,
    agent_callbacks,
    fc,
    fr,
    kinds,
    llm_agent,
    logged,
    reply,
)
from trio_agents import (
    BaseAgent,
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    ParallelAgent,
    RunConfig,
    SequentialAgent,
    StreamingMode,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin
from trio_agents.plugins._manager import PluginManager
from trio_agents.testing import ScriptedModel

# -- on_user_message (R-PLG-5, S-CB-6) ----------------------------------------------------------


async def test_rewritten_user_message_is_stored_and_seen_by_the_model_s_cb_6() -> None:
    log: list[str] = []
    model = ScriptedModel(["ok"])
    agent = LlmAgent(name="a", model=model)
    rewritten = Content.from_text("REWRITTEN")
    run = Run(agent, Recorder("p1", log, on_user_message=rewritten))
    await run.send("original")
    stored = await run.stored()
    assert (stored[0].author, stored[0].text) == ("user", "REWRITTEN")
    (request,) = model.requests
    assert request.contents[-1].role == "user"
    assert request.contents[-1].parts[0].text == "REWRITTEN"
    assert all("original" not in str(c) for c in request.contents)


async def test_on_user_message_sees_the_message_and_the_replacement_becomes_user_content() -> None:
    seen: list[Any] = []

    def capture(**kwargs: Any) -> Content:
        seen.append(kwargs["user_message"])
        return Content.from_text("new")

    class Reader(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            assert ctx.user_content is not None
            await ctx.emit(Event(content=Content.from_text(f"got {ctx.user_content.text}")))

    events = await Run(Reader(name="r"), Recorder("p", on_user_message=capture)).send("old")
    assert [m.text for m in seen] == ["old"]
    assert [e.text for e in events] == ["got new"]


# -- on_event (R-PLG-6, ARCHITECTURE §4, S-CB-5) ------------------------------------------------


async def test_on_event_replacement_keeps_identity_and_is_what_is_stored_s_cb_5() -> None:
    replacement = Event(
        id="forged",
        invocation_id="forged",
        timestamp=1.0,
        author="x",
        content=Content.from_text("REPLACED", role="model"),
    )
    plugin = Recorder("p", on_event=replacement)
    run = Run(LlmAgent(name="a", model=ScriptedModel(["original"])), plugin)
    (event,) = await run.send()
    (original,) = [kwargs["event"] for kwargs in plugin.seen("on_event")]
    assert (event.author, event.text) == ("x", "REPLACED")
    assert (event.id, event.invocation_id, event.timestamp) == (
        original.id,
        original.invocation_id,
        original.timestamp,
    )
    stored = await run.stored()
    assert stored[1:] == [event]


async def test_on_event_replacement_only_overrides_the_fields_it_sets() -> None:
    # ADK 2.13 merges the fields a replacement sets onto the original event: the branch, the
    # finish reason and the actions of the original stay when the replacement leaves them out.
    def reword(*, event: Event, **_: Any) -> Event | None:
        if event.text != "original":
            return None
        return Event(content=Content.from_text("REWORDED", role="model"))

    plugin = Recorder("p", on_event=reword)
    model = ScriptedModel(["original"])
    branchy = ParallelAgent(name="p", sub_agents=[LlmAgent(name="a", model=model, output_key="k")])
    run = Run(branchy, plugin)
    (event,) = await run.send()
    assert (event.author, event.branch, event.text) == ("a", "p.a", "REWORDED")
    assert event.finish_reason == "STOP"
    assert dict(event.actions.state_delta) == {"k": "original"}
    assert (await run.stored())[1:] == [event]


async def test_every_event_rewritten_by_on_event_is_stored_as_delivered() -> None:
    def shout(*, event: Event, **_: Any) -> Event:
        parts = [
            attrs.evolve(p, text=p.text.upper()) if p.text is not None else p
            for p in (event.content.parts if event.content else ())
        ]
        content = attrs.evolve(event.content, parts=parts) if event.content else None
        return attrs.evolve(event, id="x", invocation_id="y", timestamp=0.0, content=content)

    log: list[str] = []
    plugin = Recorder("p", log, on_event=shout)
    run = Run(llm_agent(log, [fc("echo", {"x": 1}), "done"]), plugin)
    events = await run.send()
    originals = [kwargs["event"] for kwargs in plugin.seen("on_event")]
    assert kinds(events) == ["FC:echo", "FR:echo", "T:DONE"]
    assert [(e.id, e.invocation_id, e.timestamp) for e in events] == [
        (o.id, o.invocation_id, o.timestamp) for o in originals
    ]
    assert (await run.stored())[1:] == events


async def test_on_event_sees_partial_chunks_and_only_complete_events_are_stored() -> None:
    plugin = Recorder("p")
    model = ScriptedModel([["Hel", "lo", "Hello"]])
    run = Run(LlmAgent(name="a", model=model), plugin)
    events = await run.send(run_config=RunConfig(streaming_mode=StreamingMode.SSE))
    seen = [kwargs["event"] for kwargs in plugin.seen("on_event")]
    assert [(e.text, bool(e.partial)) for e in seen] == [
        ("Hel", True),
        ("lo", True),
        ("Hello", False),
    ]
    assert [e.id for e in events] == [e.id for e in seen]
    assert (await run.stored())[1:] == [events[-1]]


# -- before_run (R-PLG-7) and before/after agent ---------------------------------------------------


async def test_before_run_content_ends_the_run_with_one_stored_model_event_r_plg_7() -> None:
    log: list[str] = []
    model_log: list[str] = []
    agent = llm_agent(model_log, ["never"])
    run = Run(agent, Recorder("p", log, before_run=Content.from_text("blocked", role="model")))
    events = await run.send()
    stored = await run.stored()
    assert [(e.author, e.text) for e in stored] == [("user", "hi"), ("model", "blocked")]
    assert stored[1:] == events
    assert model_log == []
    assert log.count("p.after_run") == 1


async def test_plugin_before_agent_short_circuit_and_state_write_in_a_sequence_s_cb_16() -> None:
    def before_agent(*, agent: BaseAgent, callback_context: Any) -> Content | None:
        if agent.name == "a1":
            return Content.from_text("a1 blocked", role="model")
        if agent.name == "a2":
            callback_context.state["cb"] = 1
        return None

    a1_model, a2_model = ScriptedModel(["never"]), ScriptedModel(["a2 reply"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[LlmAgent(name="a1", model=a1_model), LlmAgent(name="a2", model=a2_model)],
    )
    run = Run(seq, Recorder("p", before_agent=before_agent))
    events = await run.send()
    assert [(e.author, e.text, dict(e.actions.state_delta)) for e in events] == [
        ("a1", "a1 blocked", {}),
        ("a2", None, {"cb": 1}),
        ("a2", "a2 reply", {}),
    ]
    assert a1_model.requests == []
    assert (await run.stored())[1:] == events


async def test_plugin_after_agent_content_is_appended_and_does_not_end_the_sequence() -> None:
    def after_agent(*, agent: BaseAgent, callback_context: Any) -> Content | None:
        return (
            Content.from_text(f"after {agent.name}", role="model") if agent.name == "a1" else None
        )

    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="a1", model=ScriptedModel(["one"])),
            LlmAgent(name="a2", model=ScriptedModel(["two"])),
        ],
    )
    events = await Run(seq, Recorder("p", after_agent=after_agent)).send()
    assert [(e.author, e.text) for e in events] == [
        ("a1", "one"),
        ("a1", "after a1"),
        ("a2", "two"),
    ]


# -- model hooks (R-LLM-4, R-LLM-5, R-PLG-9, R-PLG-10) --------------------------------------------


async def test_before_model_cached_response_skips_the_model_and_every_after_model_s_cb_3() -> None:
    log: list[str] = []
    agent = llm_agent(log, ["never"], **agent_callbacks(log))
    run = Run(agent, Recorder("p1", log, before_model=reply("cached")), Recorder("p2", log))
    events = await run.send()
    assert kinds(events) == ["T:cached"]
    assert "model" not in log
    assert not [entry for entry in log if "after_model" in entry or "p2.before_model" in entry]


async def test_before_model_edits_to_the_request_reach_the_model_s_cb_15() -> None:
    def edit(*, llm_request: LlmRequest, **_: Any) -> None:
        llm_request.append_instructions("Always answer in French.")

    model = ScriptedModel(["oui"])
    await Run(LlmAgent(name="a", model=model), Recorder("p", before_model=edit)).send()
    (request,) = model.requests
    assert request.system_instruction is not None
    assert request.system_instruction.endswith("Always answer in French.")


async def test_plugin_recovery_from_a_model_error_passes_through_after_model_s_cb_9() -> None:
    log: list[str] = []
    agent = llm_agent(log, [ConnectionError("down")], **agent_callbacks(log))
    p1 = Recorder("p1", log, on_model_error=reply("fallback"))
    p2 = Recorder("p2", log)
    events = await Run(agent, p1, p2).send()
    assert kinds(events) == ["T:fallback"]
    (error_call,) = p1.seen("on_model_error")
    assert isinstance(error_call["error"], ConnectionError)
    assert isinstance(error_call["llm_request"], LlmRequest)
    (after,) = p2.seen("after_model")
    assert after["llm_response"].content.parts[0].text == "fallback"
    assert log.index("p1.on_model_error") < log.index("p1.after_model")
    assert "agent.after_model" in log
    assert "agent.on_model_error" not in log


async def test_agent_recovery_from_a_model_error_is_seen_by_plugin_after_model_s_cb_9() -> None:
    log: list[str] = []
    agent = llm_agent(
        log, [ConnectionError("down")], **agent_callbacks(log, on_model_error=reply("fallback"))
    )
    plugin = Recorder("p", log)
    events = await Run(agent, plugin).send()
    assert kinds(events) == ["T:fallback"]
    assert log.index("p.on_model_error") < log.index("agent.on_model_error")
    assert log.index("agent.on_model_error") < log.index("p.after_model")
    assert log.index("p.after_model") < log.index("agent.after_model")
    (after,) = plugin.seen("after_model")
    assert after["llm_response"].content.parts[0].text == "fallback"


async def test_after_model_sees_the_response_and_usage_and_may_replace_it() -> None:
    from trio_agents import UsageMetadata

    usage = UsageMetadata(prompt_token_count=3, candidates_token_count=2, total_token_count=5)
    response = LlmResponse(content=Content.from_text("raw", role="model"), usage_metadata=usage)
    p1 = Recorder("p1", after_model=reply("clean"))
    events = await Run(LlmAgent(name="a", model=ScriptedModel([response])), p1).send()
    (after,) = p1.seen("after_model")
    assert after["llm_response"].usage_metadata == usage
    assert kinds(events) == ["T:clean"]
    assert events[0].usage_metadata == usage  # unset stream markers come from the original


# -- tool hooks (R-TOOL-2, R-PLG-9, R-PLG-10) ------------------------------------------------------


async def test_before_tool_edits_to_the_args_reach_the_tool_but_not_the_call_event_s_cb_13() -> (
    None
):
    def edit(*, tool_args: dict[str, Any], **_: Any) -> None:
        tool_args["x"] = 42

    log: list[str] = []
    events = await Run(
        llm_agent(log, [fc("echo", {"x": 1}), "ok"]), Recorder("p", before_tool=edit)
    ).send()
    assert events[0].get_function_calls()[0].args == {"x": 1}
    assert fr(events[1]) == [{"x": 42}]


async def test_tool_hooks_receive_the_tool_the_args_and_a_tool_context() -> None:
    from trio_agents import ToolContext

    log: list[str] = []
    plugin = Recorder("p", log)
    events = await Run(llm_agent(log, [fc("echo", {"x": 5}), "ok"]), plugin).send()
    (before,) = plugin.seen("before_tool")
    (after,) = plugin.seen("after_tool")
    call_id = events[0].get_function_calls()[0].id
    assert before["tool"].name == "echo"
    assert before["tool_args"] == {"x": 5}
    assert isinstance(before["tool_context"], ToolContext)
    assert before["tool_context"].function_call_id == call_id
    assert after["result"] == {"x": 5}
    assert after["tool_context"] is before["tool_context"]


async def test_plugin_on_tool_error_recovers_and_after_tool_sees_the_dict_s_cb_8() -> None:
    log: list[str] = []
    agent = llm_agent(log, [fc("boom"), "after recovery"], **agent_callbacks(log))
    p1 = Recorder("p1", log, on_tool_error={"recovered": True})
    p2 = Recorder("p2", log)
    events = await Run(agent, p1, p2).send()
    assert kinds(events) == ["FC:boom", "FR:boom", "T:after recovery"]
    assert fr(events[1]) == [{"recovered": True}]
    (error_call,) = p1.seen("on_tool_error")
    assert isinstance(error_call["error"], RuntimeError)
    (after,) = p2.seen("after_tool")
    assert after["result"] == {"recovered": True}
    assert log.count("model") == 2  # the model is called again
    assert log[-2:] == ["p1.after_run", "p2.after_run"]


# -- after_run (R-PLG-8) and nothing after it ---------------------------------------------------


def parallel_app(log: list[str], *, hang: bool = False, fail: bool = False) -> ParallelAgent:
    """``par`` over LLM agents A and B; B's tool hangs or fails when asked."""

    async def work(x: int = 0) -> dict[str, int]:
        await trio.lowlevel.checkpoint()
        return {"x": x}

    async def slow() -> None:
        if fail:
            raise RuntimeError("slow failed")
        if hang:
            await trio.sleep_forever()

    a = LlmAgent(name="A", model=ScriptedModel([fc("work"), "A done"]), tools=[work])
    b = LlmAgent(name="B", model=ScriptedModel([fc("slow"), "B done"]), tools=[slow])
    return ParallelAgent(name="par", sub_agents=[a, b])


STOPS = ("complete", "leave", "cancel", "outer_cancel", "error")


@pytest.mark.parametrize("stop", STOPS)
async def test_after_run_once_on_every_clean_end_never_after_an_error_and_nothing_after_it(
    stop: str,
) -> None:
    log: list[str] = []
    app = parallel_app(log, hang=stop not in ("complete", "error"), fail=stop == "error")
    run = await Run(app, Recorder("p1", log), Recorder("p2", log)).start()
    failures: list[BaseException] = []
    with trio.CancelScope() as outer:
        try:
            async with run.runner.run(
                user_id="u", session_id=run.session_id, new_message="hi"
            ) as events:
                async for event in events:
                    run.delivered.append(event)
                    if stop == "leave" and len(run.delivered) == 2:
                        break
                    if stop == "cancel" and len(run.delivered) == 2:
                        events.cancel("test stops the run")
                    if stop == "outer_cancel" and len(run.delivered) == 2:
                        outer.cancel()
        except RuntimeError as exc:
            failures.append(exc)
    assert [str(e) for e in failures] == (["slow failed"] if stop == "error" else [])
    if stop == "error":
        assert "p1.after_run" not in log
        assert log[-2:] == ["p1.on_run_error", "p2.on_run_error"]
        return
    assert log.count("p1.after_run") == log.count("p2.after_run") == 1
    # after_run is the last hook: nothing from the cancelled branches runs after it.
    assert log[-2:] == ["p1.after_run", "p2.after_run"]
    if stop == "complete":
        assert {e.text for e in run.delivered} >= {"A done", "B done"}


async def test_after_run_runs_when_the_consumer_raises_inside_the_block() -> None:
    log: list[str] = []
    run = await Run(parallel_app(log, hang=True), Recorder("p", log)).start()
    with pytest.raises(KeyError):
        async with run.runner.run(user_id="u", session_id=run.session_id, new_message="hi") as ev:
            async for _ in ev:
                raise KeyError("consumer bug")
    assert log[-1] == "p.after_run"
    assert log.count("p.after_run") == 1


async def test_hooks_of_one_run_see_one_invocation_context() -> None:
    log: list[str] = []
    plugin = Recorder("p", log)
    await Run(llm_agent(log, [fc("echo"), "ok"]), plugin).send()
    ids: set[str] = set()
    for _, kwargs in plugin.calls:
        if "invocation_context" in kwargs:
            ids.add(kwargs["invocation_context"].invocation_id)
        elif "callback_context" in kwargs:
            ids.add(kwargs["callback_context"].invocation_id)
        elif "tool_context" in kwargs:
            ids.add(kwargs["tool_context"].invocation_id)
    assert len(ids) == 1


# -- parallel branches interleave (ARCHITECTURE §2, R-PAR) ----------------------------------------


class Rendezvous(BasePlugin):
    """``before_tool`` of each branch waits until every branch is inside ``before_tool``."""

    def __init__(self, parties: int) -> None:
        super().__init__(name="rendezvous")
        self.parties = parties
        self.inside: list[str] = []
        self.all_in = trio.Event()

    async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> None:
        self.inside.append(tool_context.branch)
        if len(self.inside) == self.parties:
            self.all_in.set()
        await self.all_in.wait()
        return None


async def test_hooks_from_sibling_branches_run_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    plugin = Rendezvous(parties=2)
    log: list[str] = []
    with trio.fail_after(60):  # a serialised hook chain would deadlock here
        events = await Run(parallel_app(log), plugin).send()
    assert sorted(plugin.inside) == ["par.A", "par.B"]
    assert {e.text for e in events} >= {"A done", "B done"}


@attrs.define
class _Open:
    agents: Counter[str] = attrs.field(factory=Counter)
    models: Counter[str] = attrs.field(factory=Counter)
    tools: Counter[str] = attrs.field(factory=Counter)
    counts: Counter[str] = attrs.field(factory=Counter)


class PerInvocation(BasePlugin):
    """Keeps what is in flight per invocation id; checks pairing; files a record at after_run."""

    def __init__(self) -> None:
        super().__init__(name="per_invocation")
        self.live: dict[str, _Open] = {}
        self.finished: dict[str, Counter[str]] = {}
        self.order: list[tuple[str, str]] = []
        self.problems: list[str] = []

    def _state(self, invocation_id: str, hook: str) -> _Open:
        self.order.append((invocation_id, hook))
        if invocation_id in self.finished:
            self.problems.append(f"{hook} after after_run of {invocation_id}")
        return self.live.setdefault(invocation_id, _Open())

    async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> None:
        state = self._state(callback_context.invocation_id, "before_agent")
        state.agents[agent.name] += 1
        state.counts["agent"] += 1

    async def after_agent_callback(self, *, agent: Any, callback_context: Any) -> None:
        state = self._state(callback_context.invocation_id, "after_agent")
        state.agents[agent.name] -= 1

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        state = self._state(callback_context.invocation_id, "before_model")
        key = f"{callback_context.branch}/{callback_context.agent_name}"
        if state.models[key]:
            self.problems.append(f"two model calls in flight on {key}")
        state.models[key] += 1
        state.counts["model"] += 1
        await trio.lowlevel.checkpoint()

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> None:
        state = self._state(callback_context.invocation_id, "after_model")
        state.models[f"{callback_context.branch}/{callback_context.agent_name}"] -= 1

    async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> None:
        state = self._state(tool_context.invocation_id, "before_tool")
        state.tools[tool_context.function_call_id] += 1
        state.counts["tool"] += 1
        await trio.lowlevel.checkpoint()

    async def after_tool_callback(
        self, *, tool: Any, tool_args: Any, tool_context: Any, result: Any
    ) -> None:
        state = self._state(tool_context.invocation_id, "after_tool")
        state.tools[tool_context.function_call_id] -= 1

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        invocation_id = invocation_context.invocation_id
        state = self.live.pop(invocation_id, _Open())
        for name, table in (
            ("agent", state.agents),
            ("model", state.models),
            ("tool", state.tools),
        ):
            if any(table.values()):
                self.problems.append(f"{name} left open in {invocation_id}: {dict(table)}")
        self.finished[invocation_id] = state.counts
        self.order.append((invocation_id, "after_run"))


def branchy_app(width: int) -> ParallelAgent:
    async def work(n: int = 0) -> dict[str, int]:
        for _ in range(n):
            await trio.lowlevel.checkpoint()
        return {"n": n}

    async def answer(request: LlmRequest) -> LlmResponse:
        await trio.lowlevel.checkpoint()
        if request.contents[-1].parts[0].function_response is None:
            return fc("work", {"n": len(request.contents)})
        return reply("done")

    return ParallelAgent(
        name="par",
        sub_agents=[
            LlmAgent(name=f"b{i}", model=ScriptedModel(answer), tools=[work]) for i in range(width)
        ],
    )


@given(
    _seed=st.random_module(),
    width=st.integers(min_value=2, max_value=4),
    invocations=st.integers(min_value=1, max_value=3),
)
async def test_per_invocation_plugin_state_stays_consistent_under_interleaving(
    _seed: Any, width: int, invocations: int
) -> None:
    plugin = PerInvocation()
    runner = InMemoryRunner(branchy_app(width), plugins=[plugin])
    ids: list[str] = []

    async def one_turn() -> None:
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
            ids.append(events.invocation_id)
            async for _ in events:
                pass

    async with trio.open_nursery() as nursery:
        for _ in range(invocations):
            nursery.start_soon(one_turn)
    note(repr(plugin.order))
    assert plugin.problems == []
    assert plugin.live == {}
    assert sorted(plugin.finished) == sorted(ids)
    for counts in plugin.finished.values():
        # par + every branch; two model calls and one tool call per branch.
        assert counts == Counter(agent=width + 1, model=2 * width, tool=width)
    # Each invocation's after_run is its last hook.
    for invocation_id in ids:
        hooks = [hook for inv, hook in plugin.order if inv == invocation_id]
        assert hooks[-1] == "after_run"
        assert hooks.count("after_run") == 1


# -- agent-level callbacks still run after plugins that observe -----------------------------------


async def test_observing_plugins_change_nothing() -> None:
    log: list[str] = []
    plain = await Run(llm_agent(log, [fc("echo", {"x": 3}), "done"])).send()
    observed = await Run(
        llm_agent(log, [fc("echo", {"x": 3}), "done"]), Recorder("p1"), Recorder("p2")
    ).send()
    assert kinds(observed) == kinds(plain)
    assert [fr(e) for e in observed] == [fr(e) for e in plain]


async def test_a_plugin_can_write_state_from_before_model_r_plg_10() -> None:
    def count(*, callback_context: Any, **_: Any) -> None:
        callback_context.state["calls"] = callback_context.state.get("calls", 0) + 1

    log: list[str] = []
    run = Run(llm_agent(log, [fc("echo"), "done"]), Recorder("p", before_model=count))
    events = await run.send()
    assert [dict(e.actions.state_delta) for e in events] == [{"calls": 1}, {}, {"calls": 2}]
    session = await run.runner.session_service.get_session(
        app_name=run.runner.app_name, user_id="u", session_id=run.session_id
    )
    assert session is not None
    assert session.state["calls"] == 2


async def test_agent_callbacks_are_skipped_only_for_the_kind_that_was_short_circuited() -> None:
    log: list[str] = []
    agent = llm_agent(log, ["never"], **agent_callbacks(log))
    agent.after_agent_callback = logged(log, "agent.after_agent")
    await Run(agent, Recorder("p", log, before_model=reply("cached"))).send()
    assert "agent.before_agent1" in log
    assert "agent.after_agent" in log
    assert "agent.before_model" not in log


async def test_state_only_events_and_escalations_reach_on_event() -> None:
    class Escalator(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> None:
            await ctx.emit(Event(actions=EventActions(state_delta={"k": 1}, escalate=True)))

    plugin = Recorder("p")
    await Run(Escalator(name="e"), plugin).send()
    (seen,) = [kwargs["event"] for kwargs in plugin.seen("on_event")]
    assert seen.actions.state_delta == {"k": 1}
    assert seen.actions.escalate


class _AgentHooksOnly(BasePlugin):
    async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> None:
        return None


class _EventHook(_AgentHooksOnly):
    async def on_event_callback(self, *, invocation_context: Any, event: Event) -> None:
        return None


def test_only_a_plugin_with_its_own_on_event_hook_makes_events_wait_for_plugins() -> None:
    """Events need the plugins' turn only when one of them has an ``on_event`` hook: else an
    in-memory run commits each event as it is emitted, as with no plugin at all."""
    assert not PluginManager([]).sees_events
    assert not PluginManager([_AgentHooksOnly("agent_hooks")]).sees_events
    assert PluginManager([_AgentHooksOnly("a"), _EventHook("b")]).sees_events
