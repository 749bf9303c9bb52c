"""Memory kept in process memory, with ADK's keyword matching (R-MEM-1)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

import attrs
import trio

from .._events import Event
from ..sessions import Session
from ._base import (
    NO_SESSION,
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
    order. Re-adding a session replaces its events and keeps its place. A deleted memory stays
    forgotten (:meth:`delete_memory`).
    """

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], dict[str, list[_Indexed]]] = {}
        self._forgotten: dict[tuple[str, str], set[str]] = {}

    def _entries(
        self, user: tuple[str, str], events: Sequence[Event], session_id: str | None
    ) -> list[_Indexed]:
        forgotten = self._forgotten.get(user, set())
        return [
            _index(MemoryEntry.from_event(e, session_id=session_id))
            for e in remembered_events(events)
            if e.id not in forgotten
        ]

    async def add_session_to_memory(self, session: Session) -> None:
        await trio.lowlevel.checkpoint()
        user = (session.app_name, session.user_id)
        indexed = self._entries(user, session.events, session.id)
        self._sessions.setdefault(user, {})[session.id] = indexed

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await trio.lowlevel.checkpoint()
        user = (app_name, user_id)
        kept = self._sessions.setdefault(user, {}).setdefault(session_id or NO_SESSION, [])
        known = {item.entry.id for item in kept}
        for item in self._entries(user, events, session_id or None):
            if item.entry.id not in known:
                kept.append(item)
                known.add(item.entry.id)

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        await trio.lowlevel.checkpoint()
        if not memory_id:
            return
        user = (app_name, user_id)
        for session_id, items in self._sessions.get(user, {}).items():
            kept = [item for item in items if item.entry.id != memory_id]
            if len(kept) != len(items):
                self._sessions[user][session_id] = kept
                self._forgotten.setdefault(user, set()).add(memory_id)

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
