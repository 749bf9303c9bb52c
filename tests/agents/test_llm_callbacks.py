"""Model and tool callbacks of an LLM agent (R-LLM-4, R-LLM-5, R-TOOL-2, S-CB-*).

Every chain accepts one callable or a list, sync or async; the first non-None result wins and the
rest of the chain is skipped (ARCHITECTURE §4: a before-tool ``{}`` short-circuits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.llm_helpers import Chat, call, calls, chat, fc, kinds, responses
from trio_agents import ConfigurationError, Content, LlmAgent, PluginError, ToolContext
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.plugins import BasePlugin
from trio_agents.testing import ScriptedModel


def reply(text: str) -> LlmResponse:
    return LlmResponse(content=Content.from_text(text, role="model"))


def recorder(log: list[str], name: str, result: Any = None, *, asynchronous: bool = False) -> Any:
    """A callback accepting any keywords that logs ``name`` and returns ``result``."""

    def sync_cb(**kwargs: Any) -> Any:
        log.append(name)
        return result

    async def async_cb(**kwargs: Any) -> Any:
        log.append(name)
        return result

    return async_cb if asynchronous else sync_cb


class Counter:
    """A tool that counts its runs."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def tool(self) -> Callable[..., Any]:
        def echo(x: int = 0) -> dict[str, int]:
            self.runs.append({"x": x})
            return {"x": x}

        return echo


# -- before_model (R-LLM-4) ----------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_before_model_response_replaces_the_call_and_skips_after_model_r_llm_4(
    asynchronous: bool,
) -> None:
    log: list[str] = []
    model = ScriptedModel(["never"])
    agent = LlmAgent(
        name="a",
        model=model,
        before_model_callback=recorder(log, "before", reply("cached"), asynchronous=asynchronous),
        after_model_callback=recorder(log, "after", reply("replaced")),
    )
    session = await Chat.start(agent)
    events = await session.send()
    assert kinds(events) == ["T:cached"]
    assert model.requests == []
    assert log == ["before"]
    assert kinds(await session.stored()) == ["T:cached"]


async def test_before_model_returning_none_lets_the_model_answer() -> None:
    log: list[str] = []
    model = ScriptedModel(["from model"])
    agent = LlmAgent(name="a", model=model, before_model_callback=recorder(log, "before"))
    events = await chat(agent)
    assert kinds(events) == ["T:from model"]
    assert log == ["before"]
    assert len(model.requests) == 1


async def test_before_model_chain_stops_at_the_first_non_none_result() -> None:
    log: list[str] = []
    chain = [
        recorder(log, "1"),
        recorder(log, "2", reply("r2"), asynchronous=True),
        recorder(log, "3", reply("r3")),
        recorder(log, "4"),
    ]
    model = ScriptedModel(["never"])
    events = await chat(LlmAgent(name="a", model=model, before_model_callback=chain))
    assert kinds(events) == ["T:r2"]
    assert log == ["1", "2"]


async def test_before_model_chain_of_nones_runs_every_callback_then_the_model() -> None:
    log: list[str] = []
    chain = [recorder(log, str(i), asynchronous=i % 2 == 0) for i in range(4)]
    model = ScriptedModel(["model"])
    events = await chat(LlmAgent(name="a", model=model, before_model_callback=chain))
    assert kinds(events) == ["T:model"]
    assert log == ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    "pieces",
    [("Always answer in French.",), (["Always answer in French."],), ("Always", ["answer."])],
    ids=["text", "list", "mixed"],  # ADK's append_instructions takes a list of strings
)
async def test_before_model_may_edit_the_request_s_cb_15(pieces: tuple[Any, ...]) -> None:
    def edit(*, callback_context: Any, llm_request: LlmRequest) -> None:
        llm_request.append_instructions(*pieces)
        llm_request.contents.append(Content.from_text("extra", role="user"))

    model = ScriptedModel(["oui"])
    await chat(LlmAgent(name="a", model=model, instruction="Base.", before_model_callback=edit))
    (request,) = model.requests
    assert request.system_instruction is not None
    expected = "Always\n\nanswer." if len(pieces) == 2 else "Always answer in French."
    assert request.system_instruction.endswith("\n\n" + expected)
    assert request.system_instruction.startswith("Base.")
    assert request.contents[-1] == Content.from_text("extra", role="user")


async def test_before_model_state_writes_land_on_each_model_event_s_st_10() -> None:
    def count(*, callback_context: Any, llm_request: LlmRequest) -> None:
        callback_context.state["bm_count"] = callback_context.state.get("bm_count", 0) + 1

    model = ScriptedModel([fc("echo"), "done"])
    session = await Chat.start(
        LlmAgent(name="a", model=model, tools=[Counter().tool()], before_model_callback=count)
    )
    events = await session.send()
    assert kinds(events) == ["FC:echo", "FR:echo", "T:done"]
    assert dict(events[0].actions.state_delta) == {"bm_count": 1}
    assert dict(events[1].actions.state_delta) == {}
    assert dict(events[2].actions.state_delta) == {"bm_count": 2}
    assert (await session.session()).state == {"bm_count": 2}


async def test_callbacks_receive_the_agents_callback_context() -> None:
    seen: list[tuple[str, str]] = []

    def before(*, callback_context: Any, llm_request: LlmRequest) -> None:
        seen.append((callback_context.agent_name, callback_context.invocation_id))

    session = await Chat.start(
        LlmAgent(name="named", model=ScriptedModel(["ok"]), before_model_callback=before)
    )
    events = await session.send()
    assert seen == [("named", events[0].invocation_id)]


# -- after_model (R-LLM-4.3) ---------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_after_model_replaces_the_response(asynchronous: bool) -> None:
    seen: list[str | None] = []

    def sync_cb(*, callback_context: Any, llm_response: LlmResponse) -> LlmResponse:
        seen.append(llm_response.content.text if llm_response.content else None)
        return reply("replaced")

    async def async_cb(*, callback_context: Any, llm_response: LlmResponse) -> LlmResponse:
        return sync_cb(callback_context=callback_context, llm_response=llm_response)

    model = ScriptedModel(["original"])
    agent = LlmAgent(
        name="a", model=model, after_model_callback=async_cb if asynchronous else sync_cb
    )
    session = await Chat.start(agent)
    events = await session.send()
    assert kinds(events) == ["T:replaced"]
    assert seen == ["original"]
    assert kinds(await session.stored()) == ["T:replaced"]


async def test_after_model_chain_stops_at_the_first_non_none_result() -> None:
    log: list[str] = []
    chain = [recorder(log, "1"), recorder(log, "2", reply("r2")), recorder(log, "3", reply("r3"))]
    events = await chat(
        LlmAgent(name="a", model=ScriptedModel(["model"]), after_model_callback=chain)
    )
    assert kinds(events) == ["T:r2"]
    assert log == ["1", "2"]


async def test_after_model_returning_none_keeps_the_model_response() -> None:
    log: list[str] = []
    events = await chat(
        LlmAgent(
            name="a", model=ScriptedModel(["model"]), after_model_callback=recorder(log, "after")
        )
    )
    assert kinds(events) == ["T:model"]
    assert log == ["after"]


async def test_after_model_may_turn_text_into_a_tool_call() -> None:
    counter = Counter()
    replaced = iter([fc("echo", {"x": 4})])

    def swap(*, callback_context: Any, llm_response: LlmResponse) -> LlmResponse | None:
        return next(replaced, None)

    model = ScriptedModel(["ignored", "final"])
    agent = LlmAgent(name="a", model=model, tools=[counter.tool()], after_model_callback=swap)
    events = await chat(agent)
    assert kinds(events) == ["FC:echo", "FR:echo", "T:final"]
    assert counter.runs == [{"x": 4}]


async def test_a_model_callback_returning_a_wrong_type_is_a_configuration_error() -> None:
    agent = LlmAgent(
        name="a",
        model=ScriptedModel(["x"]),
        after_model_callback=lambda *, callback_context, llm_response: "not a response",
    )
    with pytest.raises(ConfigurationError, match="LlmResponse or None"):
        await chat(agent)


# -- on_model_error (R-LLM-5) --------------------------------------------------------------------


async def test_on_model_error_response_is_used_and_passes_after_model_s_cb_9() -> None:
    errors: list[BaseException] = []
    after_saw: list[str | None] = []

    def recover(*, callback_context: Any, llm_request: LlmRequest, error: Exception) -> Any:
        errors.append(error)
        return reply("fallback")

    def after(*, callback_context: Any, llm_response: LlmResponse) -> None:
        after_saw.append(llm_response.content.text if llm_response.content else None)

    model = ScriptedModel([ConnectionError("down")])
    agent = LlmAgent(
        name="a", model=model, on_model_error_callback=recover, after_model_callback=after
    )
    session = await Chat.start(agent)
    events = await session.send()
    assert kinds(events) == ["T:fallback"]
    assert [type(e) for e in errors] == [ConnectionError]
    assert after_saw == ["fallback"]
    assert kinds(await session.stored()) == ["T:fallback"]


async def test_on_model_error_chain_of_nones_lets_the_error_propagate_s_cb_10() -> None:
    log: list[str] = []
    model = ScriptedModel([ConnectionError("down")])
    agent = LlmAgent(
        name="a",
        model=model,
        on_model_error_callback=[recorder(log, "1"), recorder(log, "2", asynchronous=True)],
    )
    with pytest.raises(ConnectionError, match="down"):
        await chat(agent)
    assert log == ["1", "2"]


async def test_on_model_error_chain_first_non_none_wins() -> None:
    log: list[str] = []
    chain = [
        recorder(log, "1"),
        recorder(log, "2", reply("r2"), asynchronous=True),
        recorder(log, "3", reply("r3")),
    ]
    model = ScriptedModel([ValueError("bad")])
    events = await chat(LlmAgent(name="a", model=model, on_model_error_callback=chain))
    assert kinds(events) == ["T:r2"]
    assert log == ["1", "2"]


# -- before_tool / after_tool (R-TOOL-2) ---------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("result", [{"short": True}, {}], ids=["dict", "empty-dict"])
async def test_before_tool_result_short_circuits_the_tool_s_cb_14(
    result: dict[str, Any], asynchronous: bool
) -> None:
    log: list[str] = []
    after_saw: list[Any] = []
    counter = Counter()

    def after(*, tool: Any, args: Any, tool_context: Any, tool_response: Any) -> None:
        after_saw.append(tool_response)

    model = ScriptedModel([fc("echo", {"x": 1}), "ok"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[counter.tool()],
        before_tool_callback=[
            recorder(log, "1", result, asynchronous=asynchronous),
            recorder(log, "2", {"second": True}),
        ],
        after_tool_callback=after,
    )
    events = await chat(agent)
    assert responses(events[1]) == [("echo", result)]
    assert counter.runs == []
    assert log == ["1"]
    assert after_saw == [result]  # after-tool still runs with the short-circuit result


async def test_before_tool_returning_none_runs_the_tool() -> None:
    log: list[str] = []
    counter = Counter()
    model = ScriptedModel([fc("echo", {"x": 3}), "ok"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[counter.tool()],
        before_tool_callback=[recorder(log, "1"), recorder(log, "2", asynchronous=True)],
    )
    events = await chat(agent)
    assert responses(events[1]) == [("echo", {"x": 3})]
    assert log == ["1", "2"]


async def test_before_tool_argument_edits_reach_the_tool_but_not_the_event_s_cb_13() -> None:
    seen: list[Any] = []

    def edit(*, tool: Any, args: dict[str, Any], tool_context: ToolContext) -> None:
        seen.append((tool.name, tool_context.function_call_id))
        args["x"] = 42

    counter = Counter()
    model = ScriptedModel([fc("echo", {"x": 1}, id="c1"), "ok"])
    session = await Chat.start(
        LlmAgent(name="a", model=model, tools=[counter.tool()], before_tool_callback=edit)
    )
    events = await session.send()
    assert responses(events[1]) == [("echo", {"x": 42})]
    assert dict(events[0].get_function_calls()[0].args) == {"x": 1}
    assert dict((await session.stored())[0].get_function_calls()[0].args) == {"x": 1}
    assert seen == [("echo", "c1")]


@pytest.mark.parametrize("replacement", [{"changed": 1}, {}], ids=["dict", "empty-dict"])
async def test_after_tool_result_replaces_the_response(replacement: dict[str, Any]) -> None:
    log: list[str] = []
    seen: list[Any] = []

    async def after(*, tool: Any, args: Any, tool_context: Any, tool_response: Any) -> Any:
        seen.append((dict(args), tool_response))
        return replacement

    model = ScriptedModel([fc("echo", {"x": 2}), "ok"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[Counter().tool()],
        after_tool_callback=[after, recorder(log, "never", {"no": 1})],
    )
    events = await chat(agent)
    assert responses(events[1]) == [("echo", replacement)]
    assert seen == [({"x": 2}, {"x": 2})]
    assert log == []


async def test_after_tool_returning_none_keeps_the_result() -> None:
    log: list[str] = []
    model = ScriptedModel([fc("echo", {"x": 2}), "ok"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[Counter().tool()],
        after_tool_callback=recorder(log, "after"),
    )
    events = await chat(agent)
    assert responses(events[1]) == [("echo", {"x": 2})]
    assert log == ["after"]


async def test_tool_callback_state_writes_ride_on_the_response_event_r_st_3() -> None:
    def before(*, tool: Any, args: Any, tool_context: ToolContext) -> None:
        tool_context.state["before"] = 1

    def after(*, tool: Any, args: Any, tool_context: ToolContext, tool_response: Any) -> None:
        tool_context.state["after"] = 2

    model = ScriptedModel([fc("echo"), "ok"])
    events = await chat(
        LlmAgent(
            name="a",
            model=model,
            tools=[Counter().tool()],
            before_tool_callback=before,
            after_tool_callback=after,
        )
    )
    assert dict(events[1].actions.state_delta) == {"before": 1, "after": 2}


# -- on_tool_error (R-TOOL-2.3, S-CB-7, S-CB-8) ---------------------------------------------------


def boom(x: int = 0) -> None:
    raise RuntimeError(f"boom {x}")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_on_tool_error_result_becomes_the_response(asynchronous: bool) -> None:
    errors: list[Exception] = []
    after_saw: list[Any] = []

    def recover(*, tool: Any, args: Any, tool_context: Any, error: Exception) -> Any:
        errors.append(error)
        return {"recovered": True}

    async def recover_async(**kwargs: Any) -> Any:
        return recover(**kwargs)

    def after(*, tool: Any, args: Any, tool_context: Any, tool_response: Any) -> None:
        after_saw.append(tool_response)

    model = ScriptedModel([fc("boom", {"x": 1}), "recovered it"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[boom],
        on_tool_error_callback=recover_async if asynchronous else recover,
        after_tool_callback=after,
    )
    events = await chat(agent)
    assert kinds(events) == ["FC:boom", "FR:boom", "T:recovered it"]
    assert responses(events[1]) == [("boom", {"recovered": True})]
    assert [str(e) for e in errors] == ["boom 1"]
    assert isinstance(errors[0], RuntimeError)
    assert after_saw == [{"recovered": True}]
    assert len(model.requests) == 2


async def test_on_tool_error_chain_first_non_none_wins() -> None:
    log: list[str] = []
    chain = [
        recorder(log, "1"),
        recorder(log, "2", {"by": 2}, asynchronous=True),
        recorder(log, "3", {"by": 3}),
    ]
    model = ScriptedModel([fc("boom"), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[boom], on_tool_error_callback=chain))
    assert responses(events[1]) == [("boom", {"by": 2})]
    assert log == ["1", "2"]


async def test_on_tool_error_returning_none_lets_the_error_propagate_s_cb_7() -> None:
    log: list[str] = []
    model = ScriptedModel([fc("boom"), "never"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[boom],
        on_tool_error_callback=recorder(log, "error"),
        after_tool_callback=recorder(log, "after"),
    )
    with pytest.raises(RuntimeError, match="boom 0"):
        await chat(agent)
    assert log == ["error"]


async def test_before_tool_short_circuit_means_no_error_handling() -> None:
    log: list[str] = []
    agent = LlmAgent(
        name="a",
        model=ScriptedModel([fc("boom"), "ok"]),
        tools=[boom],
        before_tool_callback=recorder(log, "before", {"skipped": True}),
        on_tool_error_callback=recorder(log, "error", {"unused": True}),
    )
    events = await chat(agent)
    assert responses(events[1]) == [("boom", {"skipped": True})]
    assert log == ["before"]


# -- plugins run before the agent's callbacks (R-PLG, S-CB-2, S-CB-3, S-CB-8) -------------------


class Hooks(BasePlugin):
    def __init__(self, name: str, log: list[str], **results: Any) -> None:
        super().__init__(name=name)
        self.log = log
        self.results = results

    def _hook(self, hook: str) -> Any:
        self.log.append(f"{self.name}.{hook}")
        result = self.results.get(hook)
        if isinstance(result, BaseException):
            raise result
        return result

    async def before_model_callback(self, **kwargs: Any) -> Any:
        return self._hook("before_model")

    async def after_model_callback(self, **kwargs: Any) -> Any:
        return self._hook("after_model")

    async def on_model_error_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_model_error")

    async def before_tool_callback(self, **kwargs: Any) -> Any:
        return self._hook("before_tool")

    async def after_tool_callback(self, **kwargs: Any) -> Any:
        return self._hook("after_tool")

    async def on_tool_error_callback(self, **kwargs: Any) -> Any:
        return self._hook("on_tool_error")


def agent_hooks(log: list[str]) -> dict[str, Any]:
    return {
        f"{hook}_callback": recorder(log, f"agent.{hook}")
        for hook in (
            "before_model",
            "after_model",
            "on_model_error",
            "before_tool",
            "after_tool",
            "on_tool_error",
        )
    }


async def plugin_chat(agent: LlmAgent, *plugins: BasePlugin) -> list[Any]:
    from trio_agents import InMemoryRunner

    runner = InMemoryRunner(agent, plugins=plugins)
    session = await Chat.start(agent, runner=runner)
    return await session.send()


async def test_hook_order_plugins_first_then_agent_s_cb_1() -> None:
    log: list[str] = []
    agent = LlmAgent(
        name="a",
        model=ScriptedModel([fc("echo"), "ok"]),
        tools=[Counter().tool()],
        **agent_hooks(log),
    )
    await plugin_chat(agent, Hooks("p1", log), Hooks("p2", log))
    model_hooks = ["p1.before_model", "p2.before_model", "agent.before_model"]
    after_model = ["p1.after_model", "p2.after_model", "agent.after_model"]
    assert log == [
        *model_hooks,
        *after_model,
        "p1.before_tool",
        "p2.before_tool",
        "agent.before_tool",
        "p1.after_tool",
        "p2.after_tool",
        "agent.after_tool",
        *model_hooks,
        *after_model,
    ]


async def test_plugin_before_tool_short_circuits_the_rest_s_cb_2() -> None:
    log: list[str] = []
    counter = Counter()
    agent = LlmAgent(
        name="a",
        model=ScriptedModel([fc("echo"), "ok"]),
        tools=[counter.tool()],
        **agent_hooks(log),
    )
    events = await plugin_chat(
        agent, Hooks("p1", log, before_tool={"short": True}), Hooks("p2", log)
    )
    assert responses(events[1]) == [("echo", {"short": True})]
    assert counter.runs == []
    tool_hooks = [entry for entry in log if "tool" in entry]
    assert tool_hooks == ["p1.before_tool", "p1.after_tool", "p2.after_tool", "agent.after_tool"]


async def test_plugin_before_model_response_skips_model_and_every_after_hook_s_cb_3() -> None:
    log: list[str] = []
    model = ScriptedModel(["never"])
    agent = LlmAgent(name="a", model=model, **agent_hooks(log))
    events = await plugin_chat(
        agent, Hooks("p1", log, before_model=reply("cached")), Hooks("p2", log)
    )
    assert kinds(events) == ["T:cached"]
    assert model.requests == []
    assert log == ["p1.before_model"]


async def test_plugin_on_tool_error_recovers_s_cb_8() -> None:
    log: list[str] = []
    model = ScriptedModel([fc("boom"), "after recovery"])
    agent = LlmAgent(name="a", model=model, tools=[boom], **agent_hooks(log))
    events = await plugin_chat(agent, Hooks("p1", log, on_tool_error={"recovered": True}))
    assert kinds(events) == ["FC:boom", "FR:boom", "T:after recovery"]
    assert responses(events[1]) == [("boom", {"recovered": True})]
    assert "agent.on_tool_error" not in log
    assert log.index("p1.on_tool_error") < log.index("p1.after_tool")


async def test_a_failing_plugin_hook_is_a_plugin_error_s_cb_11() -> None:
    log: list[str] = []
    model = ScriptedModel(["never"])
    agent = LlmAgent(name="a", model=model)
    with pytest.raises(PluginError, match="'bad'") as info:
        await plugin_chat(agent, Hooks("bad", log, before_model=KeyError("x")))
    assert info.value.hook == "before_model_callback"
    assert isinstance(info.value.__cause__, KeyError)
    assert model.requests == []


# -- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        "before_model_callback",
        "after_model_callback",
        "on_model_error_callback",
        "before_tool_callback",
        "after_tool_callback",
        "on_tool_error_callback",
    ],
)
def test_callbacks_must_accept_their_keyword_arguments(field: str) -> None:
    def wrong(unexpected: Any) -> None:
        return None

    with pytest.raises(ConfigurationError, match=field):
        LlmAgent(name="a", **{field: wrong})
    with pytest.raises(ConfigurationError, match=field):
        LlmAgent(name="a", **{field: [lambda **kw: None, "not callable"]})


async def test_callbacks_set_after_construction_are_read_back_and_run() -> None:
    # ADK's agents are pydantic models: `agent.before_model_callback = cb` takes effect, and
    # reading the field gives what was set.
    log: list[str] = []
    agent = LlmAgent(
        name="a", model=ScriptedModel([fc("echo", {"x": 1}), "done"]), tools=[Counter().tool()]
    )
    assert agent.before_model_callback is None
    fields = [
        "before_model_callback",
        "after_model_callback",
        "before_tool_callback",
        "after_tool_callback",
    ]
    for field in fields:
        callback = recorder(log, field)
        setattr(agent, field, callback)
        assert getattr(agent, field) is callback
    await chat(agent)
    assert log == [
        "before_model_callback",
        "after_model_callback",
        "before_tool_callback",
        "after_tool_callback",
        "before_model_callback",
        "after_model_callback",
    ]
    agent.before_model_callback = None
    assert agent.before_model_callback is None
    with pytest.raises(ConfigurationError, match="after_tool_callback"):
        agent.after_tool_callback = "not callable"


async def test_text_and_call_from_one_response_keep_their_order_with_callbacks() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(call("echo"), text="thinking"), "ok"])
    agent = LlmAgent(
        name="a", model=model, tools=[Counter().tool()], after_model_callback=recorder(log, "am")
    )
    events = await chat(agent)
    assert events[0].text == "thinking"
    assert kinds(events) == ["FC:echo", "FR:echo", "T:ok"]
    assert log == ["am", "am"]
