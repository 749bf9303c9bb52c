"""ToolPolicyPlugin: first matching rule wins, default allow, denials answer the model."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugins.helpers import Recorder, Run, fc, fr, kinds
from trio_agents import ConfigurationError, Content, LlmAgent, Part, SequentialAgent
from trio_agents.models import LlmResponse
from trio_agents.plugins import Denial, ToolPolicyPlugin, ToolRule, allow, deny
from trio_agents.testing import ScriptedModel


class Tools:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def all(self) -> list[Any]:
        def search(q: str = "") -> dict[str, str]:
            self.ran.append("search")
            return {"found": q}

        def delete_file(path: str = "") -> dict[str, bool]:
            self.ran.append("delete_file")
            return {"deleted": True}

        def delete_user(name: str = "") -> dict[str, bool]:
            self.ran.append("delete_user")
            return {"deleted": True}

        return [search, delete_file, delete_user]


async def call_once(
    tool: str, policy: ToolPolicyPlugin, *, user: str = "u", agent: str = "a", **extra: Any
) -> tuple[list[Any], Tools, Run]:
    tools = Tools()
    model = ScriptedModel([fc(tool), "after"])
    run = await Run(LlmAgent(name=agent, model=model, tools=tools.all()), policy, **extra).start(
        user_id=user
    )
    events = await run.send()
    return events, tools, run


async def test_a_denied_call_answers_the_model_with_an_error_and_is_counted() -> None:
    policy = ToolPolicyPlugin([deny("delete_*", reason="destructive")])
    events, tools, _ = await call_once("delete_file", policy)
    assert kinds(events) == ["FC:delete_file", "FR:delete_file", "T:after"]
    (response,) = fr(events[1])
    assert response["denied_by"] == "tool_policy"
    assert "not allowed" in response["error"]
    assert "destructive" in response["error"]
    assert tools.ran == []
    assert policy.denied == 1
    assert policy.denials == {Denial(agent="a", tool="delete_file", user="u"): 1}


async def test_calls_without_a_matching_rule_are_allowed_by_default() -> None:
    policy = ToolPolicyPlugin([deny("delete_*")])
    events, tools, _ = await call_once("search", policy)
    assert fr(events[1]) == [{"found": ""}]
    assert tools.ran == ["search"]
    assert policy.denied == 0


@pytest.mark.parametrize(
    ("user", "allowed"),
    [("alice", True), ("bob", False)],
)
async def test_the_first_matching_rule_wins(user: str, allowed: bool) -> None:
    policy = ToolPolicyPlugin([allow("delete_file", user="alice"), deny("delete_*")])
    _, tools, _ = await call_once("delete_file", policy, user=user)
    assert (tools.ran == ["delete_file"]) is allowed
    assert policy.denied == (0 if allowed else 1)


async def test_default_deny_with_an_allow_list() -> None:
    policy = ToolPolicyPlugin([allow("search")], default="deny")
    _, allowed_tools, _ = await call_once("search", policy)
    _, denied_tools, _ = await call_once("delete_user", policy)
    assert allowed_tools.ran == ["search"]
    assert denied_tools.ran == []
    assert policy.denials == {Denial("a", "delete_user", "u"): 1}


async def test_rules_per_agent() -> None:
    tools = Tools()
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(
                name="admin", model=ScriptedModel([fc("delete_user"), "a"]), tools=tools.all()
            ),
            LlmAgent(
                name="guest", model=ScriptedModel([fc("delete_user"), "g"]), tools=tools.all()
            ),
        ],
    )
    policy = ToolPolicyPlugin([deny("delete_*", agent="guest")])
    events = await Run(seq, policy).send()
    assert tools.ran == ["delete_user"]
    assert [r.get("denied_by") for e in events for r in fr(e)] == [None, "tool_policy"]
    assert policy.denials == {Denial("guest", "delete_user", "u"): 1}


async def test_one_denied_call_among_concurrent_calls_keeps_call_order() -> None:
    turn = LlmResponse(
        content=Content(
            role="model",
            parts=[
                Part.from_function_call("search", {"q": "x"}),
                Part.from_function_call("delete_file", {}),
                Part.from_function_call("search", {"q": "y"}),
            ],
        )
    )
    tools = Tools()
    agent = LlmAgent(name="a", model=ScriptedModel([turn, "done"]), tools=tools.all())
    policy = ToolPolicyPlugin([deny("delete_file")])
    events = await Run(agent, policy).send()
    responses = fr(events[1])
    assert responses[0] == {"found": "x"}
    assert responses[1]["denied_by"] == "tool_policy"
    assert responses[2] == {"found": "y"}
    assert sorted(tools.ran) == ["search", "search"]


async def test_a_denial_skips_later_before_tool_hooks_but_not_the_after_tool_hooks() -> None:
    log: list[str] = []
    later = Recorder("later", log)
    policy = ToolPolicyPlugin([deny("search")])
    tools = Tools()

    def agent_before_tool(**kwargs: Any) -> None:
        log.append("agent.before_tool")

    agent = LlmAgent(
        name="a",
        model=ScriptedModel([fc("search"), "ok"]),
        tools=tools.all(),
        before_tool_callback=agent_before_tool,
    )
    await Run(agent, policy, later).send()
    assert "later.before_tool" not in log
    assert "agent.before_tool" not in log
    (after,) = later.seen("after_tool")
    assert after["result"]["denied_by"] == "tool_policy"


def test_rule_validation_and_matching() -> None:
    with pytest.raises(ConfigurationError, match="effect"):
        ToolRule(effect="maybe")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="effect"):
        ToolPolicyPlugin(default="maybe")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ToolRule"):
        ToolPolicyPlugin(["deny everything"])  # type: ignore[list-item]
    rule = deny("read_*", agent="a?", user="*")
    assert rule.matches(tool="read_file", agent="a1", user="x")
    assert not rule.matches(tool="read_file", agent="a12", user="x")
    assert not rule.matches(tool="Read_file", agent="a1", user="x")
    policy = ToolPolicyPlugin([rule])
    assert policy.decide(tool="read_file", agent="a1", user="x") is rule
    assert policy.decide(tool="write", agent="a1", user="x") is None
    assert policy.allows(tool="write", agent="a1", user="x")
    assert not policy.allows(tool="read_file", agent="a1", user="x")
