"""Tool confirmation: the record a user's approval travels in, and its request call's name.

A tool that needs the user's approval asks for it (``FunctionTool(require_confirmation=...)`` or
``tool_context.request_confirmation()``); the agent then emits a long-running call named
:data:`REQUEST_CONFIRMATION` that the client answers with a function response carrying
``{"confirmed": bool, "payload": ...}``. The answer re-runs the original call with
``tool_context.tool_confirmation`` set. The request calls and their answers are between the
framework and the client: the model never sees them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._content import JSONValue
from ._errors import ConfigurationError

if TYPE_CHECKING:
    from ._content import Content
    from ._events import Event

__all__ = [
    "REQUEST_CONFIRMATION",
    "ToolConfirmation",
    "check_confirmation_answers",
    "confirmation_from_response",
]

REQUEST_CONFIRMATION = "adk_request_confirmation"
"""The name of the long-running call that asks the client to approve a tool call."""


@attrs.frozen(kw_only=True)
class ToolConfirmation:
    """A request for, or an answer to, a tool call's confirmation.

    ``hint`` tells the user what is asked; ``confirmed`` is the answer; ``payload`` is any JSON
    the user sends along (or the tool asks for), handed to the re-run tool.
    """

    hint: str = ""
    confirmed: bool = False
    payload: JSONValue = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ADK writes (``payload`` omitted when None)."""
        out: dict[str, Any] = {"hint": self.hint, "confirmed": self.confirmed}
        if self.payload is not None:
            out["payload"] = self.payload
        return out


def confirmation_from_response(response: Mapping[str, Any], call_id: str) -> ToolConfirmation:
    """The answer a client sent to the confirmation request ``call_id``.

    Accepts ``{"confirmed": bool, "payload": ..., "hint": ...}``, also wrapped as
    ``{"response": "<that object as JSON text>"}`` (how ADK's web client sends it).

    Raises:
        ConfigurationError: ``confirmed`` is missing or not a bool, or the answer is not an
            object; the message names ``call_id``.
    """
    answer: Any = response
    if len(response) == 1 and isinstance(response.get("response"), str):
        try:
            answer = json.loads(response["response"])
        except ValueError as exc:
            raise ConfigurationError(
                f"the answer to confirmation request {call_id!r} is not JSON: {exc}"
            ) from exc
    if not isinstance(answer, Mapping):
        raise ConfigurationError(
            f"the answer to confirmation request {call_id!r} must be an object with a "
            f"'confirmed' bool, got {type(answer).__name__}"
        )
    confirmed = answer.get("confirmed")
    if not isinstance(confirmed, bool):
        raise ConfigurationError(
            f"the answer to confirmation request {call_id!r} needs 'confirmed': true or false, "
            f"got {confirmed!r}"
        )
    hint = answer.get("hint", "")
    return ToolConfirmation(
        hint=hint if isinstance(hint, str) else "",
        confirmed=confirmed,
        payload=answer.get("payload"),
    )


def check_confirmation_answers(message: Content, events: Sequence[Event]) -> None:
    """Refuse a user message whose answers to confirmation requests are malformed or late.

    Each function response answering an ``adk_request_confirmation`` call (by the call's name
    in ``events``, or by its own name) must carry a bool ``confirmed``, and that request must
    not have been answered before. Responses whose call is not in ``events`` are left to the
    caller's check.

    Raises:
        ConfigurationError: naming the request's call id.
    """
    answers = {
        p.function_response.id: p.function_response
        for p in message.parts
        if p.function_response is not None and p.function_response.id
    }
    if not answers:
        return
    requests: set[str] = set()
    answered: set[str] = set()
    found: set[str] = set()
    for index in range(len(events) - 1, -1, -1):  # newest first: a call precedes its answers
        event = events[index]
        if event.author == "user":
            answered.update(str(r.id) for r in event.get_function_responses() if r.id in answers)
        for call in event.get_function_calls():
            if call.id in answers:
                found.add(call.id)
                if call.name == REQUEST_CONFIRMATION:
                    requests.add(call.id)
        if len(found) == len(answers):
            break
    for call_id, response in answers.items():
        if call_id not in requests and response.name != REQUEST_CONFIRMATION:
            continue
        assert call_id is not None
        if call_id in answered:
            raise ConfigurationError(
                f"confirmation request {call_id!r} was already answered: it has no open call"
            )
        confirmation_from_response(response.response, call_id)
