"""The terminal chat asks the user to answer what a turn left open: y/n for a confirmation
request, a JSON value or text for a long-running call."""

from __future__ import annotations

import io

from rich.console import Console

from tests.agents.llm_helpers import fc, kinds
from trio_agents import InMemoryRunner, LlmAgent
from trio_agents.cli._chat import chat
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool

refunds: list[int] = []


def refund(amount: int) -> dict[str, int]:
    """Refund an amount."""
    refunds.append(amount)
    return {"refunded": amount}


async def converse(agent: LlmAgent, *answers: str) -> tuple[str, list[str]]:
    runner = InMemoryRunner(agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    script = iter(answers)

    async def read_line() -> str | None:
        return next(script, None)

    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    await chat(runner, user_id="u", session_id=session.id, console=console, read_line=read_line)
    stored = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session.id
    )
    assert stored is not None
    return out.getvalue(), kinds([e for e in stored.events if e.author != "user"])


def confirming_agent() -> LlmAgent:
    model = ScriptedModel([fc("refund", {"amount": 250}), "Refund done.", "Understood."])
    tool = FunctionTool(refund, require_confirmation=True)
    return LlmAgent(name="shop", model=model, tools=[tool])


async def test_yes_runs_the_confirmed_tool() -> None:
    refunds.clear()
    screen, history = await converse(confirming_agent(), "refund me", "y")
    assert "confirm refund(" in screen
    assert '"amount": 250' in screen
    assert refunds == [250]
    assert "shop: Refund done." in screen
    assert history[-1] == "T:Refund done."


async def test_no_tells_the_model_and_the_tool_never_runs() -> None:
    refunds.clear()
    model = ScriptedModel([fc("refund", {"amount": 250}), "Not refunded."])
    agent = LlmAgent(
        name="shop", model=model, tools=[FunctionTool(refund, require_confirmation=True)]
    )
    screen, _ = await converse(agent, "refund me", "n")
    assert refunds == []
    assert "shop: Not refunded." in screen
    answer = model.requests[1].contents[-1].parts[0].function_response
    assert answer is not None
    assert answer.name == "refund"
    assert "error" in dict(answer.response)


async def test_an_unclear_answer_leaves_the_request_open() -> None:
    refunds.clear()
    screen, history = await converse(confirming_agent(), "refund me", "maybe")
    assert refunds == []
    assert "[y/n]" in screen
    # The request stays open: no answer to it was stored, the chat waits for the next message.
    assert history == ["FC:refund", "FC:adk_request_confirmation", "FR:refund"]


async def test_a_long_running_call_is_answered_with_json() -> None:
    def approve(amount: int) -> None:
        """Ask a manager; the answer comes later."""

    model = ScriptedModel([fc("approve", {"amount": 5}), "Approved by Ann."])
    agent = LlmAgent(name="desk", model=model, tools=[LongRunningFunctionTool(approve)])
    screen, history = await converse(agent, "pay 5", '{"status": "approved", "by": "Ann"}')
    assert "answer approve" in screen
    assert "desk: Approved by Ann." in screen
    sent = model.requests[1].contents[-1].parts[0].function_response
    assert sent is not None
    assert dict(sent.response) == {"status": "approved", "by": "Ann"}
    assert history[-1] == "T:Approved by Ann."
