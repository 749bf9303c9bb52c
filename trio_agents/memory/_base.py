"""The memory interface: what an agent can recall from past sessions (ADK §2.5, R-MEM-1)."""

from __future__ import annotations

import abc
import datetime
import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Self

import attrs
import trio

from .._content import Content
from .._errors import ConfigurationError
from .._events import Event
from ..sessions import Session

__all__ = ["MemoryEntry", "MemoryService", "SearchMemoryResponse"]

_WORD = re.compile(r"\w+")


def query_words(text: str) -> set[str]:
    """The words of a query: lower-cased Unicode ``\\w+`` tokens of its NFC form (R-MEM-1)."""
    return {w.lower() for w in _WORD.findall(unicodedata.normalize("NFC", text))}


def _is_latin(char: str) -> bool:
    if char.isascii():
        return char.isalnum() or char == "_"
    return unicodedata.name(char, "").startswith("LATIN")


def script_runs(word: str) -> list[str]:
    """``word`` cut where it switches between Latin and other scripts ("私はPython" → 私は, Python).

    Japanese and Chinese are written without spaces, so an embedded Latin word would otherwise
    never be a token of its own (ADK 2.13 does the same).
    """
    if word.isascii():
        return [word]
    return ["".join(run) for _, run in itertools.groupby(word, _is_latin)]


def searchable_words(text: str) -> set[str]:
    """The words an event can be matched on: :func:`query_words` plus single-script runs."""
    found = query_words(text)
    for word in list(found):
        found.update(script_runs(word))
    return found


def event_text(content: Content) -> str:
    """The text of ``content`` that memory indexes: non-thought text parts, joined by spaces."""
    return " ".join(p.text for p in content.parts if p.text and not p.thought)


def _read_only(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat()


@attrs.frozen(kw_only=True)
class MemoryEntry:
    """One remembered event: its content, who said it and when (ISO 8601, UTC), its event id.

    ``custom_metadata`` holds backend details; both shipped backends put the ``session_id``
    there.
    """

    content: Content
    author: str | None = None
    timestamp: str | None = None
    id: str | None = None
    custom_metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_read_only)

    @classmethod
    def from_event(cls, event: Event, *, session_id: str | None = None) -> Self:
        """The entry remembering ``event``'s content (``session_id`` goes into the metadata).

        Raises:
            ConfigurationError: the event has no content.
        """
        if event.content is None:
            raise ConfigurationError(f"event {event.id!r} has no content to remember")
        metadata = {} if session_id is None else {"session_id": session_id}
        return cls(
            content=event.content,
            author=event.author,
            timestamp=_iso(event.timestamp),
            id=event.id,
            custom_metadata=metadata,
        )

    @property
    def text(self) -> str:
        """The entry's text (non-thought text parts joined by spaces)."""
        return event_text(self.content)


@attrs.frozen(kw_only=True)
class SearchMemoryResponse:
    """What :meth:`MemoryService.search_memory` found, best first."""

    memories: list[MemoryEntry] = attrs.field(factory=list)


def remembered_events(session: Session | Sequence[Event]) -> list[Event]:
    """The events (of a session, or given) worth remembering: final content with some text."""
    events = session.events if isinstance(session, Session) else session
    return [
        e
        for e in events
        if e.content is not None and not e.partial and event_text(e.content).strip()
    ]


NO_SESSION = "\x00"
"""Where events added without a session id are kept (no session id holds a NUL)."""


class MemoryService(abc.ABC):
    """Stores what was said in sessions and finds it again by a text query.

    Memory is scoped to ``(app_name, user_id)``: a search sees every session that user added.
    A search returns at most :attr:`limit` entries (10, as ADK), best first.
    """

    limit: int = 10

    @abc.abstractmethod
    async def add_session_to_memory(self, session: Session) -> None:
        """Index ``session``'s events; adding a session again replaces what it added before."""

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Remember some events (say, the latest turn) without re-adding a whole session.

        As google-adk: ``events`` add to what the session (or, with no ``session_id``, the
        user's events added without one) already has; an event whose id is already remembered
        there is skipped. The events remembered are those :meth:`add_session_to_memory` keeps.
        ``custom_metadata`` is for backends that have settings of their own; the shipped ones
        have none and ignore it. A backend that cannot add events raises
        :class:`NotImplementedError` (both shipped backends can).
        """
        raise NotImplementedError(f"{type(self).__name__} does not support add_events_to_memory")

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forget the memory whose :attr:`MemoryEntry.id` is ``memory_id`` (no id: nothing).

        As google-adk's in-memory service: adding it again later (with its session or as an
        event) does not bring it back. A backend that cannot delete raises
        :class:`NotImplementedError`, as :class:`~trio_agents.memory.SqliteMemoryService` does.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support delete_memory")

    @abc.abstractmethod
    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The memories matching ``query``, best first (at most :attr:`limit`).

        Any query is valid: punctuation and operators are plain text; a query without words
        finds nothing.
        """

    async def aclose(self) -> None:
        """Release resources (nothing by default); the service is unusable afterwards."""
        await trio.lowlevel.checkpoint()
