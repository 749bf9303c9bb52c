"""What the Runner writes when an invocation ends: closing responses and error events.

A function call left without a response would leave the history unusable for the next model
turn (ARCHITECTURE §2 rule 7), so when an invocation ends — cancelled, failed, or its process
dead — each call it left open gets a response ``{"error": "cancelled", "reason": ...}``, grouped
per (author, branch) into one user-role event, as a tool's responses would be. One builder serves
the live invocation (its open calls are tracked as events commit) and a dead one (its open calls
are found in the stored history when the next run starts). A failure also gets a content-less
error event per failing exception, authored by the agent it failed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from ._content import Content, FunctionResponse, Part
from ._events import Event

__all__ = [
    "ABANDONED_REASON",
    "abandoned_call_events",
    "closing_events",
    "error_events",
    "is_closing_response",
    "leaves",
]

ABANDONED_REASON = "the invocation ended without answering (its process stopped)"
"""The ``reason`` of the response that closes a call left open by a dead invocation."""


_END_REASONS = frozenset({"run ended", "run cancelled", ABANDONED_REASON})
_FAILED_REASON = "run failed: "


def closing_response(reason: str) -> dict[str, str]:
    """The response that closes a call the runtime answered in the tool's place."""
    return {"error": "cancelled", "reason": reason}


def is_closing_response(response: FunctionResponse) -> bool:
    """Whether ``response`` is one the runtime wrote to close a call (not the tool's result):
    ``{"error": "cancelled", "reason": ...}`` with one of the runtime's reasons."""
    answer = response.response
    if len(answer) != 2 or answer.get("error") != "cancelled":
        return False
    reason = answer.get("reason")
    return isinstance(reason, str) and (reason in _END_REASONS or reason.startswith(_FAILED_REASON))


@attrs.frozen
class OpenCall:
    """A function call without a response yet: who made it, where, and the tool's name."""

    author: str
    branch: str | None
    name: str


def closing_events(
    open_calls: Mapping[str, OpenCall], reason: str, invocation_id: str
) -> list[Event]:
    """One event per (author, branch) answering each of ``open_calls`` (by call id) as
    cancelled, in the order the calls were made."""
    groups: dict[tuple[str, str | None], list[Part]] = {}
    for call_id, call in open_calls.items():
        part = Part.from_function_response(call.name, closing_response(reason), id=call_id)
        groups.setdefault((call.author, call.branch), []).append(part)
    return [
        Event(
            invocation_id=invocation_id,
            author=author,
            branch=branch,
            content=Content(role="user", parts=parts),
        )
        for (author, branch), parts in groups.items()
    ]


def abandoned_call_events(events: Sequence[Event]) -> list[Event]:
    """Closing responses for the open, not long-running calls of the newest invocation.

    Only the newest invocation can have any (every run closes its own calls, and the next run
    closes those of a run whose process died), so only its events are scanned, newest first.
    Long-running calls stay open: the client answers them.
    """
    if not events:
        return []
    newest = events[-1].invocation_id
    answered: set[str | None] = set()
    found: list[tuple[str, OpenCall]] = []
    for event in reversed(events):
        if event.invocation_id != newest:
            break
        answered.update(r.id for r in event.get_function_responses())
        waiting = event.long_running_tool_ids or frozenset()
        for call in reversed(event.get_function_calls()):
            if call.id is not None and call.id not in answered and call.id not in waiting:
                found.append((call.id, OpenCall(event.author, event.branch, call.name)))
    return closing_events(dict(reversed(found)), ABANDONED_REASON, newest)


def error_events(
    failure: BaseException | None,
    sites: Mapping[int, tuple[BaseException, str, str | None]],
    default_author: str,
    invocation_id: str,
) -> list[Event]:
    """One content-less error event per exception of ``failure`` (R-RUN-6): ``error_code`` is the
    exception's string ``status`` if it has one, else its class name; the author and branch are
    where it failed (``sites``, by ``id`` of the exception), else ``default_author``."""
    events = []
    for exc in leaves(failure):
        _, author, branch = sites.get(id(exc), (exc, default_author, None))
        code = getattr(exc, "status", None)
        events.append(
            Event(
                invocation_id=invocation_id,
                author=author,
                branch=branch,
                error_code=code if isinstance(code, str) else type(exc).__name__,
                error_message=str(exc),
            )
        )
    return events


def leaves(exc: BaseException | None) -> Iterable[BaseException]:
    """The exceptions of ``exc``, groups flattened."""
    if exc is None:
        return ()
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return (exc,)
