"""The event logs a persistent session service has read, kept so a re-read costs O(new events).

A stored session's history only grows: events are never rewritten, and a session's events are
numbered by the table's sequence column in commit order. So a service that has read a session
once only needs the rows numbered after the last one it read (its *cursor*). Two facts keep the
cache honest without any extra bookkeeping in the store:

- The sequence never hands a number out twice (SQLite ``AUTOINCREMENT``, a PostgreSQL
  sequence), so the events of a session deleted and created again under the same id are all
  numbered after the cursor.
- A session's revision is the number of events it has committed. A read that finds
  ``cached + new != revision`` is therefore looking at another incarnation of the session (or at
  a store edited by hand): the read job then reads the whole history again, in the same snapshot.

The cache hands out :class:`~._base.EventLog` views of its lists. Appending through a view at the
tip of a list (``append_event`` on a snapshot) adds the event to the list itself, past the part
the cache vouches for; the next read checks those events against the rows it read and keeps them
when they are equal, or copies the vouched part to a new list when they are not. A caller
therefore never sees a cached history change under it, and the cache never serves an event the
store does not hold.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import attrs

from .._errors import ConfigurationError
from .._events import Event
from ._base import EventLog, GetSessionConfig

__all__: list[str] = []  # internal: used by the SQLite and PostgreSQL session services

Key = tuple[str, str, str]
"""(app name, user id, session id)."""

DEFAULT_CACHED_SESSIONS = 1024
"""How many sessions' event logs a persistent service keeps by default (least recently read
first out), like the Runner's history cache."""


@attrs.frozen(eq=False)
class Loaded:
    """One cached log: ``items[:count]`` are the session's events up to sequence ``cursor``.

    ``items`` only ever grows: its first ``count`` items never change, the items past them are
    unverified (appended through a snapshot, or by a concurrent read of the same session).
    """

    items: list[Event]
    count: int
    cursor: int


@attrs.frozen
class Fresh:
    """What a read job found: the session's events after the cursor it was given, or, when
    ``full``, its whole history (the cached part belonged to another incarnation)."""

    events: list[Event]
    cursor: int
    full: bool


Rows = list[tuple[int, Event]]
"""(sequence number, event) rows in commit order."""


def read_fresh(
    revision: int, cursor: int, known: int, after: Callable[[], Rows], up_to: Callable[[], Rows]
) -> Fresh:
    """What a read job finds, inside one snapshot of the store: the rows ``after`` the cursor,
    ``known`` events being cached, or the whole history (``up_to`` the cursor too) when those do
    not add up to the session's ``revision`` (another incarnation of the session)."""
    read = after()
    full = cursor == 0 or known + len(read) != revision
    if full and cursor:  # what the cache holds is not this session's: read the rest too
        read[:0] = up_to()
    last = read[-1][0] if read else (0 if full else cursor)
    return Fresh([event for _, event in read], last, full)


class EventCache:
    """Event logs of up to ``capacity`` sessions, least recently read dropped first.

    Used on the Trio thread only, so a merge runs uninterrupted; reads of one session awaiting the
    store at the same time each merge their own snapshot's rows in turn.
    """

    def __init__(self, capacity: int = DEFAULT_CACHED_SESSIONS) -> None:
        if capacity < 0:
            raise ConfigurationError(f"the cache capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[Key, Loaded] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> Loaded | None:
        """The cached log of ``key``, if any: the base to read on from."""
        return self._entries.get(key)

    def discard(self, key: Key) -> None:
        """Forget ``key`` (the session was deleted or created again)."""
        self._entries.pop(key, None)

    def merge(self, key: Key, base: Loaded | None, fresh: Fresh) -> EventLog:
        """The whole history: ``base`` (what the read started from) followed by ``fresh``.

        Another read of the same session may have merged into ``base.items`` meanwhile: it only
        appended past ``base.count``, and what it appended is checked like any other event there.
        """
        if fresh.full or base is None:
            return self._store(key, Loaded(fresh.events, len(fresh.events), fresh.cursor))
        items = base.items
        if not _confirms(items, base.count, fresh.events):
            items = [*items[: base.count], *fresh.events]
        elif len(items) - base.count < len(fresh.events):
            items.extend(fresh.events[len(items) - base.count :])
        return self._store(key, Loaded(items, base.count + len(fresh.events), fresh.cursor))

    def _store(self, key: Key, loaded: Loaded) -> EventLog:
        if self.capacity:
            self._entries[key] = loaded
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return EventLog(loaded.items, 0, loaded.count)


def _confirms(items: list[Event], count: int, read: Sequence[Event]) -> bool:
    """Whether the events appended to ``items`` past ``count`` agree with the rows ``read``."""
    overlap = min(len(items) - count, len(read))
    return all(items[count + i] == read[i] for i in range(overlap))


def windowed(log: EventLog, config: GetSessionConfig | None) -> EventLog:
    """The part of ``log`` that ``config`` asks for (R-ST-8): the timestamp filter first, then
    the most recent ``num_recent_events``."""
    if config is None:
        return log
    if config.after_timestamp is not None:
        log = log.since(config.after_timestamp)
    if config.num_recent_events is not None:
        log = log.tail(config.num_recent_events)
    return log


def needs_window(config: GetSessionConfig | None) -> bool:
    """Whether ``config`` asks for less than the whole history."""
    return config is not None and (
        config.num_recent_events is not None or config.after_timestamp is not None
    )
