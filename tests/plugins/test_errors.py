"""Errors around plugins (R-PLG-4, R-PLG-9, R-LLM-5, R-TOOL-2, R-AG-3, R-RUN-6, S-CB-7..12).

An exception inside a hook becomes ``PluginError(plugin=..., hook=...)`` chained to the cause.
Notification-only hooks never mask the error that is propagating. ``close()`` closes every plugin
within a time bound each.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from tests.plugins.helpers import (
    Recorder,
    Run,
    agent_callbacks,
    fc,
    kinds,
    llm_agent,
)
from trio_agents import (
    ConfigurationError,
    Content,
    InMemoryRunner,
    LlmAgent,
    PluginError,
    SequentialAgent,
)
from trio_agents.plugins import BasePlugin, PluginManager
from trio_agents.testing import ScriptedModel

# -- errors of agents, models and tools reach the error hooks --------------------------------------


async def test_tool_error_without_handlers_notifies_and_propagates_s_cb_7() -> None:
    log: list[str] = []
    agent = llm_agent(log, [fc("boom"), "never"])
    seq = SequentialAgent(name="seq", sub_agents=[agent])
    plugin = Recorder("p", log)
    run = Run(seq, plugin)
    with pytest.raises(RuntimeError, match="boom") as info:
        await run.send()
    assert not isinstance(info.value, PluginError)
    hooks = [entry for entry in log if entry.startswith("p.") and "error" in entry]
    # on_agent_error once per agent the error escapes (R-AG-3), then on_run_error (R-RUN-6).
    assert hooks == ["p.on_tool_error", "p.on_agent_error", "p.on_agent_error", "p.on_run_error"]
    assert [kw["agent"].name for kw in plugin.seen("on_agent_error")] == ["a", "seq"]
    errors = {id(kw["error"]) for _, kw in plugin.calls if "error" in kw}
    assert errors == {id(info.value)}
    assert "p.after_run" not in log
    assert "p.after_tool" not in log


async def test_model_error_without_handlers_propagates_with_its_type_s_cb_10() -> None:
    log: list[str] = []
    agent = llm_agent(log, [ConnectionError("down")], **agent_callbacks(log))
    plugin = Recorder("p", log)
    with pytest.raises(ConnectionError, match="down"):
        await Run(agent, plugin).send()
    (error_call,) = plugin.seen("on_model_error")
    assert isinstance(error_call["error"], ConnectionError)
    assert log.index("p.on_model_error") < log.index("agent.on_model_error")
    assert [entry for entry in log if entry.startswith("p.")][-3:] == [
        "p.on_agent_error",
        "p.on_event",  # the error event, delivered before the run error is reported
        "p.on_run_error",
    ]
    assert "p.after_model" not in log


async def test_run_error_hook_gets_the_error_of_a_custom_agent_r_run_6() -> None:
    from tests.agents.helpers import Say

    plugin = Recorder("p")
    with pytest.raises(ValueError, match="bad"):
        await Run(Say(name="s", error=ValueError("bad")), plugin).send()
    (call,) = plugin.seen("on_run_error")
    assert isinstance(call["error"], ValueError)
    assert not plugin.seen("after_run")


# -- a failing hook is a PluginError (R-PLG-4, S-CB-11) --------------------------------------------


FAILING: dict[str, list[Any]] = {
    "on_user_message": ["ok"],
    "before_run": ["ok"],
    "before_agent": ["ok"],
    "after_agent": ["ok"],
    "before_model": ["ok"],
    "after_model": ["ok"],
    "on_model_error": [ConnectionError("down")],
    "before_tool": [fc("echo"), "ok"],
    "after_tool": [fc("echo"), "ok"],
    "on_tool_error": [fc("boom"), "ok"],
    "on_event": ["ok"],
    "after_run": ["ok"],
}


@pytest.mark.parametrize("hook", list(FAILING))
async def test_an_exception_in_a_hook_is_a_plugin_error_naming_plugin_and_hook(hook: str) -> None:
    log: list[str] = []
    cause = KeyError("x")
    good = Recorder("good", log)
    run = Run(llm_agent(log, FAILING[hook]), Recorder("bad", log, **{hook: cause}), good)
    with pytest.raises(PluginError) as info:
        await run.send()
    error = info.value
    assert (error.plugin, error.hook) == ("bad", f"{hook}_callback")
    assert error.__cause__ is cause
    assert isinstance(error, RuntimeError)
    assert "'bad'" in str(error)
    assert f"{hook}_callback" in str(error)
    if hook != "after_run":
        # The chain stopped at the failing plugin.
        assert f"good.{hook}" not in log
        assert "bad.after_run" not in log


async def test_a_failing_before_model_hook_skips_the_model_s_cb_11() -> None:
    log: list[str] = []
    with pytest.raises(PluginError) as info:
        await Run(
            llm_agent(log, ["never"]), Recorder("bad", log, before_model=KeyError("x"))
        ).send()
    assert info.value.hook == "before_model_callback"
    assert isinstance(info.value.__cause__, KeyError)
    assert "model" not in log


async def test_a_failing_on_user_message_hook_stores_nothing() -> None:
    log: list[str] = []
    run = Run(llm_agent(log, ["ok"]), Recorder("bad", log, on_user_message=KeyError("x")))
    with pytest.raises(PluginError):
        await run.send()
    assert await run.stored() == []
    assert "model" not in log


async def test_a_plugin_error_inside_the_run_reaches_the_error_hooks() -> None:
    log: list[str] = []
    watcher = Recorder("watcher", log)
    run = Run(llm_agent(log, ["ok"]), watcher, Recorder("bad", log, after_model=KeyError("x")))
    with pytest.raises(PluginError):
        await run.send()
    (agent_error,) = watcher.seen("on_agent_error")
    (run_error,) = watcher.seen("on_run_error")
    assert isinstance(agent_error["error"], PluginError)
    assert run_error["error"] is agent_error["error"]
    assert not watcher.seen("after_run")
    stored = await run.stored()
    assert stored[-1].error_code == "PluginError"


async def test_a_failing_after_run_is_reported_to_on_run_error_r_plg_8() -> None:
    log: list[str] = []
    watcher = Recorder("watcher", log)
    run = Run(llm_agent(log, ["ok"]), Recorder("bad", log, after_run=KeyError("x")), watcher)
    with pytest.raises(PluginError):
        await run.send()
    (run_error,) = watcher.seen("on_run_error")
    assert isinstance(run_error["error"], PluginError)


@pytest.mark.parametrize(
    ("hook", "result"),
    [("on_user_message", "just text"), ("on_event", Content.from_text("not an event"))],
)
async def test_a_result_of_the_wrong_type_is_the_plugin_s_fault(hook: str, result: Any) -> None:
    log: list[str] = []
    run = Run(llm_agent(log, ["ok"]), Recorder("bad", log, **{hook: result}))
    with pytest.raises(PluginError) as info:
        await run.send()
    assert (info.value.plugin, info.value.hook) == ("bad", f"{hook}_callback")
    assert isinstance(info.value.__cause__, TypeError)


# -- notification-only hooks never mask the error (R-PLG-4) ----------------------------------------


async def test_failing_error_hooks_do_not_mask_the_original_error() -> None:
    log: list[str] = []
    agent = llm_agent(log, [fc("boom"), "never"])
    noisy = Recorder(
        "noisy", log, on_agent_error=KeyError("agent hook"), on_run_error=KeyError("run hook")
    )
    quiet = Recorder("quiet", log)
    with pytest.raises(RuntimeError, match="boom") as info:
        await Run(agent, noisy, quiet).send()
    assert type(info.value) is RuntimeError
    # Every plugin was notified although the first one failed.
    assert quiet.seen("on_agent_error")
    assert quiet.seen("on_run_error")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "on_agent_error_callback" in notes
    assert "on_run_error_callback" in notes
    assert "'noisy'" in notes


async def test_a_hanging_error_hook_is_bounded_and_the_error_still_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Hang(BasePlugin):
        async def on_agent_error_callback(self, **kwargs: Any) -> None:
            await trio.sleep_forever()

        async def on_run_error_callback(self, **kwargs: Any) -> None:
            await trio.sleep_forever()

    async def boom() -> None:  # async: a sync tool runs in a thread, which autojump ignores
        await trio.lowlevel.checkpoint()
        raise RuntimeError("boom")

    log: list[str] = []
    agent = llm_agent(log, [fc("boom"), "never"], tools=[boom])
    run = Run(agent, Hang("hang"), cleanup_timeout=5)
    start = trio.current_time()
    with trio.fail_after(60), pytest.raises(RuntimeError, match="boom"):
        await run.send()
    # Two notifications (agent, then run), each abandoned after at most cleanup_timeout.
    assert trio.current_time() - start <= 10


async def test_an_error_hook_returning_none_lets_the_tool_error_propagate_r_tool_2() -> None:
    log: list[str] = []
    p1, p2 = Recorder("p1", log), Recorder("p2", log)
    with pytest.raises(RuntimeError, match="boom"):
        await Run(llm_agent(log, [fc("boom"), "never"], **agent_callbacks(log)), p1, p2).send()
    assert [e for e in log if "on_tool_error" in e] == [
        "p1.on_tool_error",
        "p2.on_tool_error",
        "agent.on_tool_error",
    ]


# -- registration (R-PLG-1, S-CB-12) ---------------------------------------------------------------


def test_duplicate_plugin_names_are_rejected_s_cb_12() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="'same'") as info:
        InMemoryRunner(agent, plugins=[Recorder("same"), Recorder("other"), Recorder("same")])
    assert isinstance(info.value, ValueError)


def test_only_plugins_can_be_registered() -> None:
    agent = LlmAgent(name="a", model=ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="not a BasePlugin"):
        InMemoryRunner(agent, plugins=[object()])  # type: ignore[list-item]


async def test_base_plugin_hooks_observe_and_change_nothing() -> None:
    log: list[str] = []
    events = await Run(llm_agent(log, [fc("echo", {"x": 1}), "ok"]), BasePlugin("noop")).send()
    assert kinds(events) == ["FC:echo", "FR:echo", "T:ok"]


# -- close (R-PLG-4) -------------------------------------------------------------------------------


class Closing(BasePlugin):
    def __init__(self, name: str, log: list[str], *, error: Exception | None = None) -> None:
        super().__init__(name)
        self.log = log
        self.error = error

    async def close(self) -> None:
        self.log.append(f"{self.name}.close")
        await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error


class HangingClose(Closing):
    async def close(self) -> None:
        self.log.append(f"{self.name}.close")
        try:
            await trio.sleep_forever()
        finally:
            self.log.append(f"{self.name}.abandoned")


async def test_runner_close_closes_every_plugin_once_in_registration_order() -> None:
    log: list[str] = []
    runner = InMemoryRunner(
        LlmAgent(name="a", model=ScriptedModel([])),
        plugins=[Closing("one", log), Closing("two", log)],
    )
    async with runner:
        assert log == []
    assert log == ["one.close", "two.close"]


async def test_a_hanging_close_is_abandoned_after_cleanup_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    runner = InMemoryRunner(
        LlmAgent(name="a", model=ScriptedModel([])),
        plugins=[HangingClose("hang", log), Closing("next", log)],
        cleanup_timeout=3,
    )
    start = trio.current_time()
    with trio.fail_after(60):
        await runner.close()
    assert trio.current_time() - start == pytest.approx(3)
    assert log == ["hang.close", "hang.abandoned", "next.close"]


async def test_a_failing_close_does_not_stop_the_other_plugins_closing() -> None:
    log: list[str] = []
    runner = InMemoryRunner(
        LlmAgent(name="a", model=ScriptedModel([])),
        plugins=[Closing("bad", log, error=KeyError("c")), Closing("next", log)],
    )
    with pytest.raises(PluginError) as info:
        await runner.close()
    assert log == ["bad.close", "next.close"]
    assert (info.value.plugin, info.value.hook) == ("bad", "close")


async def test_manager_close_bounds_each_plugin_and_raises_the_first_failure_after_all(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    manager = PluginManager(
        [
            Closing("bad", log, error=KeyError("first")),
            HangingClose("hang", log),
            Closing("worse", log, error=ValueError("second")),
            Closing("fine", log),
        ]
    )
    start = trio.current_time()
    with (
        caplog.at_level(logging.WARNING, logger="trio_agents.plugins"),
        pytest.raises(PluginError) as info,
    ):
        await manager.close(per_plugin_timeout=2)
    assert trio.current_time() - start == pytest.approx(2)
    assert log == ["bad.close", "hang.close", "hang.abandoned", "worse.close", "fine.close"]
    assert (info.value.plugin, info.value.hook) == ("bad", "close")
    assert isinstance(info.value.__cause__, KeyError)
    assert any("'worse'" in note for note in info.value.__notes__)
    assert "'hang'" in caplog.text
