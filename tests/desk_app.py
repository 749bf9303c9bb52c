"""A help desk app whose runs pause for the user: a refund needs approval, a ticket an answer.

``refund`` is a ``FunctionTool(require_confirmation=True)``: calling it asks for the user's
confirmation (an ``adk_request_confirmation`` call); ``open_ticket`` is long-running and
returns nothing, so its call waits for the user's function response; ``look_up`` fails the
first time it is called in a process, so that run ends in an error it can be resumed from. The
scripted model calls ``refund`` when the user's text says "refund", ``open_ticket`` when it
says "ticket", ``look_up`` when it says "look up", and answers a function response with a
sentence naming it. Served by the dev UI tests
(``trio-agents web tests/desk_app.py``) and used by the HTTP tests.
"""

from __future__ import annotations

import json
from typing import Any

from trio_agents import App, Content, LlmAgent, Part, ResumabilityConfig, ToolContext
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool

REFUND_ARGS = {"order": "A-17", "amount": 5}
TICKET_ARGS = {"topic": "printer"}


def refund(order: str, amount: int, tool_context: ToolContext) -> dict[str, Any]:
    """Refund ``amount`` euros on ``order`` (needs the user's approval)."""
    confirmation = tool_context.tool_confirmation
    payload = None if confirmation is None else confirmation.payload
    tool_context.state["refunded"] = {"order": order, "amount": amount, "payload": payload}
    return {"refunded": amount, "order": order}


def open_ticket(topic: str) -> None:
    """Open a support ticket about ``topic``; a person answers it later."""


LOOKUPS: list[str] = []
"""The orders ``look_up`` was called for in this process."""


def look_up(order: str) -> dict[str, Any]:
    """The status of ``order`` (the order database is down at the first call)."""
    LOOKUPS.append(order)
    if len(LOOKUPS) == 1:
        raise RuntimeError("the order database is down")
    return {"order": order, "status": "shipped"}


def _reply(request: LlmRequest) -> LlmResponse:
    last = request.contents[-1]
    for part in last.parts:
        answer = part.function_response
        if answer is not None:
            said = json.dumps(dict(answer.response), sort_keys=True)
            return _model(Part(text=f"{answer.name} answered {said}"))
    text = "".join(part.text or "" for part in last.parts)
    if "refund" in text:
        return _model(Part.from_function_call("refund", REFUND_ARGS))
    if "ticket" in text:
        return _model(Part.from_function_call("open_ticket", TICKET_ARGS))
    if "look up" in text:
        return _model(Part.from_function_call("look_up", {"order": REFUND_ARGS["order"]}))
    return _model(Part(text="Ask me for a refund or a ticket."))


def _model(part: Part) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=[part]))


def desk_agent() -> LlmAgent:
    """The help desk agent, with its own scripted model."""
    return LlmAgent(
        name="desk",
        model=ScriptedModel(_reply),
        instruction="Help the user.",
        tools=[
            FunctionTool(refund, require_confirmation=True),
            LongRunningFunctionTool(open_ticket),
            look_up,
        ],
    )


def desk_app(*, resumable: bool = True) -> App:
    """The app ``desk``, resumable unless told otherwise."""
    config = ResumabilityConfig(is_resumable=resumable)
    return App(name="desk", root_agent=desk_agent(), resumability_config=config)


app = desk_app()
