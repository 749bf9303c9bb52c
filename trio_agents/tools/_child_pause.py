"""An :class:`~trio_agents.tools.AgentTool` whose agent paused: carrying the pause to the parent.

When the wrapped agent stops waiting for the client (a long-running call, a confirmation
request), its session would be lost with the tool call. Instead the parent agent commits a
*waiting event*: the child's open calls, with their own ids, as long-running calls of the parent
invocation, and in its ``custom_metadata`` what it takes to continue the child (its initial
state and its events). The parent invocation pauses there like on any long-running call. The
client answers the child's calls by their ids; the parent agent then runs the agent tool's call
again, which rebuilds the child session from the waiting event, resumes the child with the
answers and gives the call its real result. Neither the waiting event nor the answers reach the
parent's model: it sees its call to the agent tool, then the agent's answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._content import Content, FunctionCall, Part
from .._events import Event
from .._serde import load_event, unstructure

if TYPE_CHECKING:
    from .._context import InvocationContext

__all__ = ["METADATA_KEY", "children_to_resume", "waiting_event"]  # and internal records

METADATA_KEY = "trio_agents.agent_tool"
"""The ``custom_metadata`` key of a waiting event (what continues a paused agent tool)."""


@attrs.frozen
class ChildPause:
    """A paused agent tool's child run: the call it answers, and how to continue it."""

    call_id: str
    """The parent's call of the agent tool (it gets its result when the child finishes)."""
    tool: str
    invocation_id: str
    state: Mapping[str, Any]
    """The child session's state when it was created."""
    events: Sequence[Mapping[str, Any]]
    """The child session's events, as JSON."""
    waiting: Sequence[FunctionCall]
    """The child's calls waiting for the client."""

    @classmethod
    def of(
        cls,
        call_id: str,
        tool: str,
        state: Mapping[str, Any],
        events: Sequence[Event],
        pending: set[str],
    ) -> ChildPause:
        """The pause of a child whose calls ``pending`` have no answer."""
        waiting = [c for e in events for c in e.get_function_calls() if c.id in pending]
        return cls(
            call_id=call_id,
            tool=tool,
            invocation_id=events[-1].invocation_id if events else "",
            state=dict(state),
            events=[unstructure(e) for e in events],
            waiting=waiting,
        )

    def child_events(self) -> list[Event]:
        return [load_event(data) for data in self.events]

    def to_json(self) -> dict[str, Any]:
        return {
            "callId": self.call_id,
            "tool": self.tool,
            "invocationId": self.invocation_id,
            "state": dict(self.state),
            "events": list(self.events),
        }


@attrs.frozen
class ChildResume:
    """What the re-run of a paused agent tool's call continues: the child, and the answers."""

    pause: ChildPause
    answers: Content


def waiting_event(ctx: InvocationContext, pause: ChildPause) -> Event:
    """The parent's event exposing ``pause``'s calls to the client (long-running, own ids)."""
    parts = [Part(function_call=call) for call in pause.waiting]
    return Event(
        invocation_id=ctx.invocation_id,
        author=ctx.agent.name,
        branch=ctx.branch,
        content=Content(role="model", parts=parts),
        long_running_tool_ids=[c.id for c in pause.waiting if c.id],
        custom_metadata={METADATA_KEY: pause.to_json()},
    )


def pause_of(event: Event) -> ChildPause | None:
    """The child pause a waiting event carries, or None for any other event."""
    data = (event.custom_metadata or {}).get(METADATA_KEY)
    if not isinstance(data, dict) or event.content is None:
        return None
    waiting = [c for c in event.get_function_calls() if c.id]
    return ChildPause(
        call_id=str(data.get("callId", "")),
        tool=str(data.get("tool", "")),
        invocation_id=str(data.get("invocationId", "")),
        state=dict(data.get("state") or {}),
        events=list(data.get("events") or []),
        waiting=waiting,
    )


def children_to_resume(ctx: InvocationContext) -> dict[str, ChildResume]:
    """The agent-tool calls of the running agent whose paused child the user's message answers
    (and that were not re-run since), by the agent-tool call id."""
    content = ctx.user_content
    if content is None:
        return {}
    answers = {
        p.function_response.id: p
        for p in content.parts
        if p.function_response is not None and p.function_response.id
    }
    if not answers:
        return {}
    found: dict[str, ChildResume] = {}
    rerun: set[str] = set()
    answered_here = False
    agent = ctx.agent.name
    for event in reversed(ctx.session.events):
        if event.invocation_id != ctx.invocation_id:
            break  # a waiting event belongs to the invocation its answer resumes
        if event.author == "user" and any(r.id in answers for r in event.get_function_responses()):
            answered_here = True
        if not answered_here and event.author == agent:
            rerun.update(r.id for r in event.get_function_responses() if r.id)
        pause = pause_of(event) if event.author == agent else None
        if pause is None or pause.call_id in rerun or pause.call_id in found:
            continue
        mine = [answers[c.id] for c in pause.waiting if c.id in answers]
        if mine:
            found[pause.call_id] = ChildResume(pause, Content(role="user", parts=mine))
    return found


def hidden_calls(event: Event) -> list[str]:
    """The call ids of a waiting event (its calls and their answers are not the model's)."""
    if event.custom_metadata is None or METADATA_KEY not in event.custom_metadata:
        return []
    return [c.id for c in event.get_function_calls() if c.id]
