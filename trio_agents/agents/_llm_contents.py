"""The conversation an LLM agent sends to its model (R-LLM-7, R-LLM-8, R-BR).

The history is built incrementally: each (agent, branch) keeps the contents made from the events
seen so far, and a step converts only the events committed since the last step, so the cost of a
step does not grow with the length of the conversation.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from .._aftermath import is_closing_response
from .._content import Content, Part
from .._events import Event
from .._tool_confirmation import REQUEST_CONFIRMATION
from ..tools._child_pause import hidden_calls

if TYPE_CHECKING:
    from .._context import InvocationContext

__all__ = ["branch_visible", "history_for"]

CONTEXT_PREAMBLE = "For context:"


def branch_visible(event_branch: str | None, agent_branch: str | None) -> bool:
    """R-BR-1/2: no branch, the same branch, or a segment-wise ancestor of the agent's branch."""
    if agent_branch is None or event_branch is None or event_branch == agent_branch:
        return True
    return agent_branch.startswith(event_branch + ".")


@attrs.define
class History:
    """Contents built so far for one agent on one branch."""

    agent: str
    branch: str | None
    seen: int = 0
    contents: list[Content] = attrs.field(factory=list)
    turn_start: int = 0
    call_index: dict[str, int] = attrs.field(factory=dict)
    """Where each function call of this history sits in ``contents``."""

    last_id: str | None = None
    """The id of the last event converted, to notice a history that is not the one we built."""

    hidden: set[str] = attrs.field(factory=set)
    """Ids of calls the model must not see (a paused agent tool's calls, their answers)."""

    closed: dict[str, int] = attrs.field(factory=dict)
    """Calls the runtime closed (run cancelled, failed or its process died), by id: where the
    closing response sits in ``contents``. A result committed later takes its place."""

    def update(self, events: Sequence[Event]) -> None:
        """Convert the events committed since the last update (O(new events)).

        Histories are kept across invocations of a session; if ``events`` is not the sequence
        this history was built from (another window of it, a recreated session), start over.
        """
        size, seen = len(events), self.seen
        if seen and (seen > size or events[seen - 1].id != self.last_id):
            self._reset()
            seen = 0
        for index in range(seen, size):
            event = events[index]
            self._add(event)
            self.last_id = event.id
        self.seen = size

    def _reset(self) -> None:
        self.seen = self.turn_start = 0
        self.contents = []
        self.call_index = {}
        self.closed = {}
        self.hidden = set()
        self.last_id = None

    def _add(self, event: Event) -> None:
        content = event.content
        if content is None or not content.parts or event.partial:
            return
        if not branch_visible(event.branch, self.branch):
            return
        if event.long_running_tool_ids or event.author == "user":
            content = self._without_framework_calls(event, content)
            if content is None:
                return
        if event.author in (self.agent, "user"):
            own = self._own_content(event, content)
            if own is not None:
                if event.author == "user" and not event.get_function_responses():
                    self.turn_start = len(self.contents)
                self.contents.append(own)
            return
        self.turn_start = len(self.contents)
        self.contents.append(_as_context(event, content))

    def _without_framework_calls(self, event: Event, content: Content) -> Content | None:
        """``content`` without what is between the framework and the client: confirmation
        requests and answers (R-LRO-5), a paused agent tool's calls and their answers."""
        hidden = hidden_calls(event)
        if hidden:
            self.hidden.update(hidden)
            return None
        kept = _without_confirmations(content)
        if kept is None or not self.hidden or event.author != "user":
            return kept
        parts = [
            p
            for p in kept.parts
            if p.function_response is None or p.function_response.id not in self.hidden
        ]
        if len(parts) == len(kept.parts):
            return kept
        return attrs.evolve(kept, parts=parts) if parts else None

    def _own_content(self, event: Event, content: Content) -> Content | None:
        parts: list[Part] = []
        for part in content.parts:
            if part.function_call is not None and part.function_call.id:
                self.call_index[part.function_call.id] = len(self.contents)
            response = part.function_response
            if response is not None and response.id:
                if response.id not in self.call_index:
                    continue  # an orphan response: its call is not in this history
                if response.id in self.closed and self._supersede(response.id, part):
                    continue  # a resumed run's result, put where the closing response was
                if is_closing_response(response):
                    self.closed[response.id] = len(self.contents)
            parts.append(part)
        if not parts:
            return None
        return content if len(parts) == len(content.parts) else attrs.evolve(content, parts=parts)

    def _supersede(self, call_id: str, part: Part) -> bool:
        """Replace the runtime's closing response to ``call_id`` by ``part`` (the result of the
        call run again when the invocation resumed); False if it cannot be found."""
        index = self.closed.pop(call_id)
        content = self.contents[index]
        parts = list(content.parts)
        for at, old in enumerate(parts):
            if old.function_response is not None and old.function_response.id == call_id:
                parts[at] = part
                self.contents[index] = attrs.evolve(content, parts=parts)
                return True
        return False

    def request_contents(self, include: str) -> list[Content]:
        """The contents for the next model call.

        When the newest content answers a call made earlier (a long-running tool completed by
        the client), the model sees that call directly followed by this latest answer
        (R-LRO-3, R-LLM-8.3).
        """
        contents = self.contents
        late = self._late_answer()
        if late is not None:
            return [*contents[: late + 1], self._answers_to(late)]
        if include == "none":
            return contents[self.turn_start :]
        return list(contents)

    def _answers_to(self, late: int) -> Content:
        """The latest answer merged with the latest answers to its sibling calls.

        The calls of the content at ``late`` keep one response each, in call order, so that the
        model never sees a call without its response (providers that pair them reject that).
        """
        last = self.contents[-1]
        ids = [p.function_call.id for p in self.contents[late].parts if p.function_call]
        latest: dict[str | None, Part] = {}
        for content in self.contents[late + 1 :]:  # later answers win; the newest is last
            for part in content.parts:
                if part.function_response is not None and part.function_response.id in ids:
                    latest[part.function_response.id] = part
        merged = [latest[i] for i in ids if i in latest]
        others = [
            p
            for p in last.parts
            if p.function_response is None or p.function_response.id not in ids
        ]
        return attrs.evolve(last, parts=[*merged, *others])

    def _late_answer(self) -> int | None:
        if len(self.contents) < 3:
            return None
        last = self.contents[-1]
        for part in last.parts:
            response = part.function_response
            if response is not None and response.id:
                index = self.call_index.get(response.id)
                if index is not None and index < len(self.contents) - 2:
                    return index
        return None


def _is_confirmation(part: Part) -> bool:
    call, response = part.function_call, part.function_response
    return (call is not None and call.name == REQUEST_CONFIRMATION) or (
        response is not None and response.name == REQUEST_CONFIRMATION
    )


def _without_confirmations(content: Content) -> Content | None:
    """``content`` without the confirmation requests and answers (None if nothing is left)."""
    if not any(_is_confirmation(p) for p in content.parts):
        return content
    parts = [p for p in content.parts if not _is_confirmation(p)]
    return attrs.evolve(content, parts=parts) if parts else None


def _as_context(event: Event, content: Content) -> Content:
    """Another agent's event, retold to this agent as user-role context (R-LLM-8.2)."""
    lines = [CONTEXT_PREAMBLE]
    for part in content.parts:
        if part.thought:
            continue
        if part.text is not None:
            lines.append(f"[{event.author}] said: {part.text}")
        elif part.function_call is not None:
            call = part.function_call
            args = json.dumps(dict(call.args), sort_keys=True)
            lines.append(f"[{event.author}] called tool `{call.name}` with parameters: {args}")
        elif part.function_response is not None:
            answer = part.function_response
            result = json.dumps(dict(answer.response), sort_keys=True)
            lines.append(f"[{event.author}] `{answer.name}` tool returned result: {result}")
    return Content(role="user", parts=[Part(text=line) for line in lines])


HISTORY_CACHE_SIZE = 1024
"""How many (session, branch) histories one LLM agent keeps between invocations (LRU)."""

HistoryCache = collections.OrderedDict[tuple[str, str, str, str | None], History]
_CACHE_ATTR = "_llm_history_cache"
"""Where an LLM agent keeps its histories (an attribute of the agent, found in one dict read)."""


def history_for(ctx: InvocationContext) -> History:
    """The (cached) history of the running agent on its branch, brought up to date.

    Each LLM agent keeps the histories of its most recent sessions, so a new turn converts only
    the events committed since the last one; a history that does not match the session's events
    (another store, a recreated session) starts over (:meth:`History.update`).
    """
    agent = ctx.agent
    cache: HistoryCache | None = vars(agent).get(_CACHE_ATTR)
    if cache is None:
        cache = collections.OrderedDict()
        setattr(agent, _CACHE_ATTR, cache)
    session = ctx.session
    key = (session.app_name, session.user_id, session.id, ctx.branch)
    history = cache.pop(key, None)
    if history is None:
        history = History(agent.name, ctx.branch)
    cache[key] = history
    if len(cache) > HISTORY_CACHE_SIZE:
        cache.popitem(last=False)
    history.update(session.events)
    return history
