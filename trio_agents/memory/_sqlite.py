"""Memory in a SQLite file with FTS5 full-text search, ranked by bm25."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Self, TypeVar

import trio

from .._content import Content
from .._errors import ConfigurationError
from .._events import Event
from .._serde import dumps, loads, structure, unstructure
from .._sqlite_thread import LOCK_SLICE, SqliteThread
from ..sessions import Session
from ._base import (
    NO_SESSION,
    MemoryEntry,
    MemoryService,
    SearchMemoryResponse,
    event_text,
    remembered_events,
    script_runs,
)

__all__ = ["SqliteMemoryService"]

T = TypeVar("T")

APPLICATION_ID = 0x74726D6D  # "trmm"
SCHEMA_VERSION = 1
MIGRATIONS: list[list[str]] = [
    [  # 0 -> 1 (IF NOT EXISTS: files of the first release have these tables, version 0)
        "CREATE TABLE IF NOT EXISTS memories (id INTEGER PRIMARY KEY, app_name TEXT NOT NULL,"
        " user_id TEXT NOT NULL, session_id TEXT NOT NULL, event_id TEXT, author TEXT,"
        " timestamp TEXT, content TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS memories_by_session"
        " ON memories (app_name, user_id, session_id)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS memory_text USING fts5(text, tokenize='unicode61')",
    ],
]
_WORD = re.compile(r"\w+")
BUSY_PATIENCE = 10.0
"""Seconds a call waits for other connections (processes) holding the file's lock."""


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; on error ``ROLLBACK`` unless SQLite already did.

    An interrupted write (a cancelled caller) is rolled back by SQLite itself; rolling back
    again would fail and hide the "interrupted" error the caller's cancellation relies on.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _schema_version(conn: sqlite3.Connection) -> int:
    """Our schema version of the file (0: empty); refuse files that are not ours, or newer."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if app_id != APPLICATION_ID and (app_id != 0 or tables):
        raise ConfigurationError("not a trio_agents memory database (other application id)")
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"the memory database has schema version {version}, newer than this trio_agents "
            f"understands ({SCHEMA_VERSION}); upgrade trio_agents"
        )
    return version


def _setup(conn: sqlite3.Connection) -> None:
    """Check the file (changing nothing if it is not ours), then bring ours up to date.

    The checks read in one transaction (another process may be creating the file meanwhile),
    and a migration checks again under the write lock: one process migrates, the others see
    its result.
    """
    conn.execute(f"PRAGMA busy_timeout = {int(LOCK_SLICE * 1000)}")
    try:
        conn.execute("BEGIN")
        try:
            version = _schema_version(conn)
        finally:
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise ConfigurationError(f"not a trio_agents memory database: {exc}") from exc
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    if version == SCHEMA_VERSION:
        return
    try:
        with _transaction(conn):
            version = _schema_version(conn)
            for statement in (s for step in MIGRATIONS[version:] for s in step):
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc):
            raise ConfigurationError(f"this SQLite has no FTS5: {exc}") from exc
        raise


def _fts_text(text: str) -> str:
    """What FTS5 indexes (and queries are cut into): NFC, mixed-script words split, lower case."""
    words = unicodedata.normalize("NFC", text).split()
    return " ".join(run for word in words for run in script_runs(word)).lower()


def _match(query: str) -> str | None:
    """An FTS5 query matching any of ``query``'s words, each quoted: no syntax can leak in."""
    terms = dict.fromkeys(_WORD.findall(_fts_text(query)))  # unique, in query order
    return " OR ".join(f'"{t}"' for t in terms) or None  # \w+ never holds a quote


_Row = tuple[str | None, str | None, str | None, str, str]
"""A memory to insert: event id, author, timestamp, content JSON, indexed text."""


def _rows(events: Sequence[Event]) -> list[_Row]:
    rows = []
    for event in remembered_events(events):
        entry = MemoryEntry.from_event(event)
        text = _fts_text(event_text(entry.content))
        content = dumps(unstructure(entry.content), path="memory content")
        rows.append((entry.id, entry.author, entry.timestamp, content, text))
    return rows


def _insert(conn: sqlite3.Connection, key: tuple[str, str, str], rows: list[_Row]) -> None:
    for event_id, author, when, content, text in rows:
        cursor = conn.execute(
            "INSERT INTO memories (app_name, user_id, session_id, event_id, author,"
            " timestamp, content) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*key, event_id, author, when, content),
        )
        conn.execute(
            "INSERT INTO memory_text (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text)
        )


class SqliteMemoryService(MemoryService):
    """Memories in the SQLite file at ``path``; searches use FTS5 and rank by bm25.

    Any word of the query may match; events with more of them, and with rarer ones, rank first
    (ties: the order they were added). Tokens are FTS5 ``unicode61`` ones: case and Latin
    diacritics are folded ("emigre" finds "émigré"); mixed-script words are split as in
    :class:`~trio_agents.memory.InMemoryMemoryService`. Punctuation and FTS operators in queries
    are plain text. Re-adding a session replaces its memories in one transaction;
    :meth:`add_events_to_memory` adds to them. :meth:`delete_memory` is not supported
    (:class:`NotImplementedError`, as google-adk's SQLite memory).

    Commits are durable (WAL, ``synchronous=FULL``). The connection lives on a thread of its own,
    opened on first use; a file that is not a trio_agents memory database, or one written by a
    newer version, raises :class:`~trio_agents.ConfigurationError` and is left untouched. Call
    :meth:`aclose` (or use ``async with``) when done.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._db = SqliteThread(self.path, _setup)

    async def aclose(self) -> None:
        await self._db.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._db.run_patiently(fn, patience=BUSY_PATIENCE)

    async def add_session_to_memory(self, session: Session) -> None:
        rows = _rows(session.events)
        key = (session.app_name, session.user_id, session.id)

        def replace(conn: sqlite3.Connection) -> None:
            old = "SELECT id FROM memories WHERE app_name=? AND user_id=? AND session_id=?"
            with _transaction(conn):
                conn.execute(f"DELETE FROM memory_text WHERE rowid IN ({old})", key)
                conn.execute(old.replace("SELECT id", "DELETE"), key)
                _insert(conn, key, rows)

        await self._run(replace)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        rows = _rows(events)
        key = (app_name, user_id, session_id or NO_SESSION)

        def add(conn: sqlite3.Connection) -> None:
            with _transaction(conn):
                known = {
                    event_id
                    for (event_id,) in conn.execute(
                        "SELECT event_id FROM memories WHERE app_name=? AND user_id=?"
                        " AND session_id=?",
                        key,
                    )
                }
                fresh = []
                for row in rows:
                    if row[0] not in known:
                        fresh.append(row)
                        known.add(row[0])
                _insert(conn, key, fresh)

        await self._run(add)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        match = _match(query)
        if match is None:
            await trio.lowlevel.checkpoint()
            return SearchMemoryResponse()
        limit = self.limit

        def search(conn: sqlite3.Connection) -> list[tuple[str, str, str, str, str]]:
            rows: list[tuple[str, str, str, str, str]] = conn.execute(
                "SELECT m.session_id, m.event_id, m.author, m.timestamp, m.content"
                " FROM memory_text t JOIN memories m ON m.id = t.rowid"
                " WHERE memory_text MATCH ? AND m.app_name = ? AND m.user_id = ?"
                " ORDER BY bm25(memory_text), m.id LIMIT ?",
                (match, app_name, user_id, limit),
            ).fetchall()
            return rows

        found = await self._run(search)
        return SearchMemoryResponse(
            memories=[
                MemoryEntry(
                    content=structure(loads(content), Content, path="memory content"),
                    author=author,
                    timestamp=when,
                    id=event_id,
                    custom_metadata={} if session_id == NO_SESSION else {"session_id": session_id},
                )
                for session_id, event_id, author, when, content in found
            ]
        )
