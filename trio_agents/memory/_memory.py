"""Memory kept in process memory, with ADK's keyword matching (R-MEM-1)."""

from __future__ import annotations

import unicodedata

import attrs
import trio

from ..sessions import Session
from ._base import (
    MemoryEntry,
    MemoryService,
    SearchMemoryResponse,
    event_text,
    query_words,
    remembered_events,
    searchable_words,
)

__all__ = ["InMemoryMemoryService"]


@attrs.frozen
class _Indexed:
    entry: MemoryEntry
    words: frozenset[str]
    folded: str  # NFC, lower-cased text: non-ASCII query words also match inside it


def _index(entry: MemoryEntry) -> _Indexed:
    text = event_text(entry.content)
    folded = unicodedata.normalize("NFC", text).lower()
    return _Indexed(entry, frozenset(searchable_words(text)), folded)


def _score(item: _Indexed, wanted: set[str]) -> int:
    """How many query words ``item`` contains (a non-ASCII word may sit inside another)."""
    return sum(1 for w in wanted if w in item.words or (not w.isascii() and w in item.folded))


class InMemoryMemoryService(MemoryService):
    """ADK's keyword matching: each event scores the number of query words it contains.

    Words are lower-cased Unicode ``\\w+`` tokens of the NFC text; an event's words also include
    the single-script pieces of mixed-script words, and a non-ASCII query word also matches
    inside the event's text (for languages written without spaces). At most :attr:`limit`
    results, best first; among equal scores, sessions in the order first added, events in session
    order. Re-adding a session replaces its events and keeps its place.
    """

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], dict[str, list[_Indexed]]] = {}

    async def add_session_to_memory(self, session: Session) -> None:
        await trio.lowlevel.checkpoint()
        indexed = [
            _index(MemoryEntry.from_event(e, session_id=session.id))
            for e in remembered_events(session)
        ]
        self._sessions.setdefault((session.app_name, session.user_id), {})[session.id] = indexed

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        await trio.lowlevel.checkpoint()
        wanted = query_words(query)
        scored: list[tuple[int, MemoryEntry]] = []
        for items in self._sessions.get((app_name, user_id), {}).values():
            for item in items:
                if score := _score(item, wanted):
                    scored.append((score, item.entry))
        scored.sort(key=lambda pair: -pair[0])  # stable: ties keep their order
        return SearchMemoryResponse(memories=[entry for _, entry in scored[: self.limit]])
