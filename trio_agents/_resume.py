"""Resuming an invocation: finding its events, checking the request, the calls it waits for.

A resumable app's agents commit checkpoints as they go (``agent_state`` before a workflow agent
starts a sub-agent, ``end_of_agent`` when an agent finishes). Resuming reads the invocation's own
events, newest first back to its opening message, into a ``ResumePlan``
(:mod:`trio_agents._resume_plan`), which the resumed run keeps up to date as it commits:
agents that ended are skipped, workflow agents continue from their checkpoint, and an LLM agent
continues from its last committed event (its committed tool results are reused; calls without
a result, or answered only by the runtime's closing response, run again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._content import Content, FunctionCall
from ._errors import ResumeError
from ._resume_plan import ResumePlan
from .sessions._base import EventLog

if TYPE_CHECKING:
    from ._events import Event
    from .agents._base import BaseAgent

__all__ = ["find_invocation", "resumption", "waiting_calls"]  # and internal record classes


class InvocationRecord:
    """An invocation's events in commit order, and where its opening message sits in history."""

    __slots__ = ("events", "invocation_id", "opening_index")

    def __init__(self, invocation_id: str, opening_index: int, events: list[Event]) -> None:
        self.invocation_id = invocation_id
        self.opening_index = opening_index
        """Index in the session's history of the user message that started the invocation."""
        self.events = events

    @property
    def opening_message(self) -> Content | None:
        """The user message that started the invocation."""
        return self.events[0].content if self.events else None

    def latest_user_content(self) -> Content | None:
        """The newest user message of the invocation (an answer, or the opening message)."""
        for event in reversed(self.events):
            if event.author == "user" and event.content is not None:
                return event.content
        return None


def find_invocation(events: Sequence[Event], invocation_id: str) -> InvocationRecord | None:
    """The events of ``invocation_id``, read from the newest event back to its opening message
    (a user message that answers no call); None when no event carries that id."""
    found: list[Event] = []
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.invocation_id != invocation_id:
            continue
        found.append(event)
        if event.author == "user" and event.content is not None and not _answers(event):
            found.reverse()
            return InvocationRecord(invocation_id, index, found)
    if not found:
        return None
    found.reverse()  # no opening message (written by another tool): start at its first event
    return InvocationRecord(invocation_id, len(events) - len(found), found)


def _answers(event: Event) -> bool:
    content = event.content
    return content is not None and any(p.function_response is not None for p in content.parts)


def _open_long_running(events: Sequence[Event]) -> dict[str, FunctionCall]:
    """The long-running calls of ``events`` that no user message has answered, in call order."""
    calls: dict[str, FunctionCall] = {}
    answered: set[str] = set()
    for event in events:
        if event.author == "user":
            answered.update(r.id for r in event.get_function_responses() if r.id)
            continue
        waiting = event.long_running_tool_ids
        if waiting:
            for call in event.get_function_calls():
                if call.id in waiting:
                    calls[call.id] = call
    return {i: c for i, c in calls.items() if i not in answered}


def waiting_calls(events: Sequence[Event], invocation_id: str) -> tuple[FunctionCall, ...]:
    """The long-running calls (confirmation requests included) ``invocation_id`` waits for."""
    record = find_invocation(events, invocation_id)
    if record is None:
        return ()
    return tuple(_open_long_running(record.events).values())


# -- checking a resume request before anything is stored ------------------------------------------


def check_answers(message: Content, record: InvocationRecord) -> None:
    """Every function response of ``message`` must answer an open long-running call (or
    confirmation request) of the invocation.

    Raises:
        ResumeError: naming the call id that answers no open call.
    """
    calls: set[str] = set()
    for event in record.events:
        calls.update(event.long_running_tool_ids or ())
    for part in message.parts:
        response = part.function_response
        if response is None:
            continue
        if not response.id or response.id not in calls:
            raise ResumeError(
                f"function response {response.id!r} answers no open call of invocation "
                f"{record.invocation_id!r}",
                invocation_id=record.invocation_id,
                call_id=response.id,
            )


class Resumption:
    """A checked request to resume an invocation: what it resumes and the message to store."""

    __slots__ = ("message", "plan", "record", "start_agent")

    def __init__(
        self, record: InvocationRecord, plan: ResumePlan, start: BaseAgent, message: Content | None
    ) -> None:
        self.record = record
        self.plan = plan
        self.start_agent = start
        """The agent the invocation started with: the resumed run starts there again."""
        self.message = message
        """The answers to store (None: the run resumes without a message)."""

    @property
    def invocation_id(self) -> str:
        return self.record.invocation_id

    def replan(self, events: Sequence[Event]) -> ResumePlan:
        """The plan again, from ``events`` (after the runtime closed the calls a dead run left)."""
        record = find_invocation(events, self.invocation_id) or self.record
        self.record = record
        self.plan = ResumePlan.of(self.plan.root, record)
        return self.plan


def resumption(
    root: BaseAgent,
    resumable: bool,
    events: Sequence[Event],
    invocation_id: str | None,
    message: Content | None,
    answered: str | None,
) -> Resumption | None:
    """Check a run request against the stored invocation it resumes; None for a new invocation
    (or, in an app that is not resumable, an answer that continues the call's author alone).

    ``answered`` is the invocation the message's function responses answer, if any. An explicit
    ``invocation_id`` must name an unfinished invocation of the session; the message, if any,
    must be its opening message again (not stored twice) or answers to its open calls.

    Raises:
        ResumeError: naming the invocation, or the call id that answers no open call.
    """
    if invocation_id is None:
        if not resumable or answered is None:
            return None
        found = _resumable(root, events, answered, strict=False)
        if found is None:
            return None  # a late update to a finished invocation's call: its author takes it
        record, plan, start = found
        if message is not None and message == record.latest_user_content():
            message = None  # the client sent its last answer again: it is stored once
        if message is not None:
            check_answers(message, record)
        return Resumption(record, plan, start, message)
    if not resumable:
        raise ResumeError(
            f"cannot resume invocation {invocation_id!r}: the app is not resumable "
            "(give it resumability_config=ResumabilityConfig(is_resumable=True))",
            invocation_id=invocation_id,
        )
    found = _resumable(root, events, invocation_id, strict=True)
    assert found is not None
    record, plan, start = found
    return Resumption(record, plan, start, _resume_message(record, message, answered))


def _resumable(
    root: BaseAgent, events: Sequence[Event], invocation_id: str, *, strict: bool
) -> tuple[InvocationRecord, ResumePlan, BaseAgent] | None:
    from .agents._transfer import agent_to_run

    record = find_invocation(events, invocation_id)
    if record is None:
        raise ResumeError(
            f"invocation {invocation_id!r} is not in this session", invocation_id=invocation_id
        )
    plan = ResumePlan.of(root, record)
    before = record.opening_index + 1  # the history as the invocation's first run saw it
    opening = events.head(before) if isinstance(events, EventLog) else events[:before]
    start = agent_to_run(root, opening)
    if _finished(plan, start):
        if not strict:
            return None
        raise ResumeError(
            f"invocation {invocation_id!r} already finished: there is nothing to resume",
            invocation_id=invocation_id,
        )
    return record, plan, start


def _finished(plan: ResumePlan, start: BaseAgent) -> bool:
    """Whether the agent the invocation started with ended (following its hand-offs)."""
    agent: BaseAgent | None = start
    seen: set[str] = set()
    while agent is not None and agent.name not in seen:
        if not plan.has_ended(agent):
            return False
        seen.add(agent.name)
        agent = plan.transfer_of(agent)
    return True


def _resume_message(
    record: InvocationRecord, message: Content | None, answered: str | None
) -> Content | None:
    if message is None or message in (record.opening_message, record.latest_user_content()):
        return None  # its own message, or its last answer, again: each is stored once
    invocation_id = record.invocation_id
    if answered is None:
        raise ResumeError(
            f"invocation {invocation_id!r} resumes without a message, with its own message again, "
            "or with function responses answering its open calls; got another message",
            invocation_id=invocation_id,
        )
    if answered != invocation_id:
        raise ResumeError(
            f"the function responses answer calls of invocation {answered!r}, "
            f"not of {invocation_id!r}",
            invocation_id=invocation_id,
        )
    check_answers(message, record)
    return message
