"""Hook order and the short-circuit rule (R-PLG-1..3, S-CB-1..4).

Plugins run in registration order, before the agent-, model- and tool-level callbacks of the same
kind; the first non-None result wins and skips every later plugin and the callbacks of that kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from tests.plugins.helpers import (
    Recorder,
    Run,
    agent_callbacks,
    fc,
    fr,
    kinds,
    llm_agent,
    reply,
)
from trio_agents import Content, Event, InMemoryRunner, LlmAgent, SequentialAgent

# -- the full order (R-PLG-3, S-CB-1) --------------------------------------------------------------


def model_step(*extra: str) -> list[str]:
    return [
        "p1.before_model",
        "p2.before_model",
        "agent.before_model",
        "model",
        "p1.after_model",
        "p2.after_model",
        "agent.after_model",
        *extra,
    ]


ON_EVENT = ["p1.on_event", "p2.on_event"]

FULL_ORDER = [
    "p1.on_user_message",
    "p2.on_user_message",
    "p1.before_run",
    "p2.before_run",
    "p1.before_agent",
    "p2.before_agent",
    "agent.before_agent1",
    "agent.before_agent2",
    *model_step(*ON_EVENT),  # the function-call event
    "p1.before_tool",
    "p2.before_tool",
    "agent.before_tool",
    "tool.echo",
    "p1.after_tool",
    "p2.after_tool",
    "agent.after_tool",
    *ON_EVENT,  # the function-response event
    *model_step(*ON_EVENT),  # the final text
    "p1.after_agent",
    "p2.after_agent",
    "agent.after_agent",
    "p1.after_run",
    "p2.after_run",
]


async def test_full_hook_order_of_a_one_tool_run_s_cb_1() -> None:
    log: list[str] = []
    agent = llm_agent(log, [fc("echo", {"x": 1}), "done"], **agent_callbacks(log))
    run = Run(agent, Recorder("p1", log), Recorder("p2", log))
    events = await run.send()
    assert kinds(events) == ["FC:echo", "FR:echo", "T:done"]
    assert log == FULL_ORDER


async def test_registration_order_is_kept_for_every_hook_r_plg_1() -> None:
    log: list[str] = []
    agent = llm_agent(log, [fc("echo"), "done"])
    names = ["zeta", "alpha", "mid"]
    run = Run(agent, *(Recorder(name, log) for name in names))
    await run.send()
    plugin_entries = [entry.split(".") for entry in log if entry.split(".")[0] in names]
    hooks: dict[str, list[str]] = {}
    for name, hook in plugin_entries:
        hooks.setdefault(hook, []).append(name)
    assert len(hooks) == 10
    for order in hooks.values():
        # Every round of a hook calls the plugins in registration order.
        assert order == names * (len(order) // 3)


async def test_plugins_see_the_events_in_delivery_order_and_never_the_user_event_r_plg_6() -> None:
    log: list[str] = []
    plugin = Recorder("p", log)
    run = Run(llm_agent(log, [fc("echo"), "done"]), plugin)
    events = await run.send()
    seen = [kwargs["event"] for kwargs in plugin.seen("on_event")]
    assert [e.id for e in seen] == [e.id for e in events]
    assert all(e.author != "user" for e in seen)


async def test_every_agent_of_a_workflow_gets_the_agent_hooks_in_nesting_order() -> None:
    log: list[str] = []
    first = LlmAgent(name="first", model=llm_agent(log, ["1"]).model)
    second = LlmAgent(name="second", model=llm_agent(log, ["2"]).model)
    seq = SequentialAgent(name="seq", sub_agents=[first, second])
    plugin = Recorder("p", log)
    await Run(seq, plugin).send()
    agents = [
        (hook, kwargs["agent"].name)
        for hook, kwargs in plugin.calls
        if hook in ("before_agent", "after_agent")
    ]
    assert agents == [
        ("before_agent", "seq"),
        ("before_agent", "first"),
        ("after_agent", "first"),
        ("before_agent", "second"),
        ("after_agent", "second"),
        ("after_agent", "seq"),
    ]


# -- the short-circuit matrix (R-PLG-2) ------------------------------------------------------------


@attrs.frozen
class Case:
    """p1's ``hook`` returns ``result``; ``check(run, events, log)`` asserts the effect."""

    hook: str
    result: Any
    script: list[Any]
    check: Callable[[list[Event], list[Event], list[str]], None]
    skipped: tuple[str, ...] = ()
    """Log entries that the intervention must have prevented."""


def _user_message(events: list[Event], stored: list[Event], log: list[str]) -> None:
    assert stored[0].text == "replaced"
    assert kinds(events) == ["T:ok"]


def _before_run(events: list[Event], stored: list[Event], log: list[str]) -> None:
    assert [(e.author, e.text) for e in events] == [("model", "blocked")]
    assert stored[1:] == events
    assert "p1.after_run" in log


def _before_agent(events: list[Event], stored: list[Event], log: list[str]) -> None:
    assert [(e.author, e.text) for e in events] == [("a", "from plugin")]
    assert stored[1:] == events


def _after_agent(events: list[Event], stored: list[Event], log: list[str]) -> None:
    assert [(e.author, e.text) for e in events] == [("a", "ok"), ("a", "appended")]


def _model_text(text: str) -> Callable[[list[Event], list[Event], list[str]], None]:
    def check(events: list[Event], stored: list[Event], log: list[str]) -> None:
        assert kinds(events) == [f"T:{text}"]
        assert kinds(stored[1:]) == [f"T:{text}"]

    return check


def _tool_result(expected: dict[str, Any]) -> Callable[[list[Event], list[Event], list[str]], None]:
    def check(events: list[Event], stored: list[Event], log: list[str]) -> None:
        assert kinds(events) == ["FC:echo", "FR:echo", "T:ok"]
        assert fr(events[1]) == [expected]
        assert stored[1:] == events

    return check


def _event(events: list[Event], stored: list[Event], log: list[str]) -> None:
    assert [e.text for e in events] == ["REPLACED"]
    assert stored[1:] == events


def _boom_recovered(events: list[Event], stored: list[Event], log: list[str]) -> None:
    assert kinds(events) == ["FC:boom", "FR:boom", "T:ok"]
    assert fr(events[1]) == [{"recovered": True}]


CASES = [
    Case(
        "on_user_message",
        Content.from_text("replaced"),
        ["ok"],
        _user_message,
    ),
    Case(
        "before_run",
        Content.from_text("blocked", role="model"),
        [],
        _before_run,
        skipped=("p1.before_agent", "agent.before_agent1", "model"),
    ),
    Case(
        "before_agent",
        Content.from_text("from plugin", role="model"),
        [],
        _before_agent,
        skipped=("agent.before_agent1", "model", "p1.after_agent", "agent.after_agent"),
    ),
    Case(
        "after_agent",
        Content.from_text("appended", role="model"),
        ["ok"],
        _after_agent,
    ),
    Case(
        "before_model",
        reply("cached"),
        [],
        _model_text("cached"),
        skipped=("agent.before_model", "model", "p1.after_model", "agent.after_model"),
    ),
    Case("after_model", reply("rewritten"), ["original"], _model_text("rewritten")),
    Case(
        "on_model_error",
        reply("fallback"),
        [ConnectionError("down")],
        _model_text("fallback"),
    ),
    Case(
        "before_tool",
        {"short": True},
        [fc("echo"), "ok"],
        _tool_result({"short": True}),
        skipped=("agent.before_tool", "tool.echo"),
    ),
    Case("after_tool", {"after": 1}, [fc("echo"), "ok"], _tool_result({"after": 1})),
    Case("on_tool_error", {"recovered": True}, [fc("boom"), "ok"], _boom_recovered),
    Case("on_event", Event(author="x", content=Content.from_text("REPLACED")), ["ok"], _event),
]


@pytest.mark.parametrize("case", CASES, ids=[case.hook for case in CASES])
async def test_first_non_none_result_skips_later_plugins_and_the_agent_callbacks_r_plg_2(
    case: Case,
) -> None:
    log: list[str] = []
    agent = llm_agent(log, case.script, **agent_callbacks(log))
    run = Run(agent, Recorder("p1", log, **{case.hook: case.result}), Recorder("p2", log))
    events = await run.send()
    assert f"p1.{case.hook}" in log
    # Neither the later plugin nor the agent-level callbacks of that kind ran.
    assert f"p2.{case.hook}" not in log
    assert not [entry for entry in log if entry.startswith(f"agent.{case.hook}")]
    for entry in case.skipped:
        assert entry not in log
    case.check(events, await run.stored(), log)


@pytest.mark.parametrize("hook", ["before_tool", "after_tool", "on_tool_error"])
async def test_an_empty_dict_from_a_tool_hook_still_wins_s_cb_14(hook: str) -> None:
    log: list[str] = []
    tool = "boom" if hook == "on_tool_error" else "echo"
    agent = llm_agent(log, [fc(tool), "ok"], **agent_callbacks(log))
    run = Run(agent, Recorder("p1", log, **{hook: {}}), Recorder("p2", log))
    events = await run.send()
    assert fr(events[1]) == [{}]
    assert f"p2.{hook}" not in log
    assert f"agent.{hook}" not in log


async def test_the_agent_chain_runs_when_every_plugin_returns_none_r_plg_2() -> None:
    log: list[str] = []
    agent = llm_agent(
        log,
        [fc("echo"), "never"],
        **agent_callbacks(log, before_tool={"from_agent": True}, before_model=None),
    )
    run = Run(agent, Recorder("p1", log), Recorder("p2", log))
    events = await run.send()
    assert fr(events[1]) == [{"from_agent": True}]
    assert log.index("p2.before_tool") < log.index("agent.before_tool")
    assert "tool.echo" not in log


async def test_short_circuits_of_before_tool_still_run_the_after_tool_hooks_s_cb_2() -> None:
    log: list[str] = []
    agent = llm_agent(log, [fc("echo"), "ok"], **agent_callbacks(log))
    run = Run(agent, Recorder("p1", log, before_tool={"short": True}), Recorder("p2", log))
    events = await run.send()
    assert fr(events[1]) == [{"short": True}]
    tool_entries = [entry for entry in log if "tool" in entry]
    assert tool_entries == [
        "p1.before_tool",
        "p1.after_tool",
        "p2.after_tool",
        "agent.after_tool",
    ]


async def test_after_tool_hooks_receive_the_before_tool_result_r_plg_9() -> None:
    log: list[str] = []
    p2 = Recorder("p2", log)
    agent = llm_agent(log, [fc("echo"), "ok"])
    await Run(agent, Recorder("p1", log, before_tool={"short": True}), p2).send()
    (after,) = p2.seen("after_tool")
    assert after["result"] == {"short": True}


async def test_before_run_short_circuit_runs_no_agent_hook_and_stores_one_event_s_cb_4() -> None:
    log: list[str] = []
    agent = llm_agent(log, [], **agent_callbacks(log))
    blocked = Content.from_text("blocked", role="model")
    run = Run(agent, Recorder("p1", log, before_run=blocked), Recorder("p2", log))
    events = await run.send()
    assert [(e.author, e.text) for e in events] == [("model", "blocked")]
    stored = await run.stored()
    assert [(e.author, e.text) for e in stored] == [("user", "hi"), ("model", "blocked")]
    assert stored[1] == events[0]
    assert stored[1].invocation_id == stored[0].invocation_id
    assert log == [
        "p1.on_user_message",
        "p2.on_user_message",
        "p1.before_run",
        "p1.on_event",  # the short-circuit event goes through on_event (R-PLG-6)
        "p2.on_event",
        "p1.after_run",
        "p2.after_run",
    ]


async def test_a_non_content_before_run_result_is_ignored_r_plg_7() -> None:
    log: list[str] = []
    run = Run(llm_agent(log, ["ok"]), Recorder("p1", log, before_run="not content"))
    events = await run.send()
    assert kinds(events) == ["T:ok"]


async def test_plugins_are_inherited_by_agent_tool_children_r_plg_11() -> None:
    from trio_agents.tools import AgentTool

    log: list[str] = []
    child = LlmAgent(name="child", model=llm_agent(log, ["child says"]).model)
    parent = llm_agent(log, [fc("child", {"request": "do"}), "ok"], tools=[AgentTool(child)])
    plugin = Recorder("p", log)
    await Run(parent, plugin).send()
    runs = {kwargs["invocation_context"].invocation_id for kwargs in plugin.seen("before_run")}
    assert len(runs) == 2  # the parent invocation and the child run
    assert [kw["agent"].name for kw in plugin.seen("before_agent")] == ["a", "child"]
    assert len(plugin.seen("after_run")) == 2


async def test_agent_tool_children_without_plugins_when_asked_r_plg_11() -> None:
    from trio_agents.tools import AgentTool

    log: list[str] = []
    child = LlmAgent(name="child", model=llm_agent(log, ["child says"]).model)
    tool = AgentTool(child, include_plugins=False)
    parent = llm_agent(log, [fc("child", {"request": "do"}), "ok"], tools=[tool])
    plugin = Recorder("p", log)
    await Run(parent, plugin).send()
    assert [kw["agent"].name for kw in plugin.seen("before_agent")] == ["a"]
    assert len(plugin.seen("after_run")) == 1


def test_runner_keeps_the_plugins_in_registration_order() -> None:
    plugins = [Recorder(name) for name in ("c", "a", "b")]
    runner = InMemoryRunner(LlmAgent(name="a"), plugins=plugins)
    assert [p.name for p in runner.plugin_manager.plugins] == ["c", "a", "b"]
