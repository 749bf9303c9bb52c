"""The user message of a run: validated, and matched to the invocation it answers."""

from __future__ import annotations

from collections.abc import Sequence

from ._content import Content
from ._errors import ConfigurationError
from ._events import Event
from .sessions._base import Session

__all__ = ["answered_branch", "answered_invocation", "user_message"]


def answered_invocation(message: Content, session: Session) -> str | None:
    """The invocation whose calls ``message`` answers, or None for a message with no answers.

    Function responses in a user message must answer calls in the history (R-RUN-2), all from one
    invocation; the run then continues that invocation's id (R-RUN-3, R-LRO-3 [2.13]).
    """
    ids = {p.function_response.id for p in message.parts if p.function_response is not None}
    if not ids:
        return None
    if None in ids:
        raise ConfigurationError("a function response in the user message has no call id")
    owners: dict[str, str] = {}
    for event in reversed(session.events):
        for call in event.get_function_calls():
            if call.id is not None and call.id in ids and call.id not in owners:
                owners[call.id] = event.invocation_id
        if len(owners) == len(ids):
            break
    missing = sorted(str(i) for i in ids if i not in owners)
    if missing:
        raise ConfigurationError(f"Function call not found for function response ids: {missing}")
    invocations = set(owners.values())
    if len(invocations) > 1:
        raise ConfigurationError(
            f"the function responses answer calls of several invocations: {sorted(invocations)}"
        )
    return invocations.pop() or None


def answered_branch(message: Content, events: Sequence[Event]) -> str | None:
    """The branch of the call that the first function response of ``message`` answers (None
    when it answers none): the user's answer is stored on that branch, as ADK stores it, so
    that the agents of other parallel branches do not see it."""
    call_id = next((p.function_response.id for p in message.parts if p.function_response), None)
    if call_id is None:
        return None
    for event in reversed(events):
        if any(call.id == call_id for call in event.get_function_calls()):
            return event.branch
    return None


def user_message(message: Content | str | None) -> Content:
    """Validate and normalize the user message (R-RUN-2)."""
    if message is None:
        raise ConfigurationError(
            "new_message is required (or invocation_id, to resume a paused invocation)"
        )
    if isinstance(message, str):
        return Content.from_text(message, role="user")
    if not isinstance(message, Content):
        raise ConfigurationError(
            f"new_message must be a Content or a str, got {type(message).__name__}"
        )
    if any(p.function_call is not None for p in message.parts):
        raise ConfigurationError("User message cannot contain function calls.")
    if message.role != "user":
        message = Content(role="user", parts=message.parts)
    return message
