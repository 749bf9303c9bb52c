"""The SQLite session schema: how a file is recognised, opened and brought up to date.

A trio_agents session database carries :data:`APPLICATION_ID` in its header
(``PRAGMA application_id``) and its schema version in ``PRAGMA user_version``. Opening a file
refuses anything else (another application's database, a file that is not a database, a newer
schema) before writing a byte, and migrates an older schema in one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .._errors import ConfigurationError
from .._sqlite_thread import LOCK_SLICE, is_busy

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "connection_setup"]

APPLICATION_ID = 0x74726167  # "trag"

MIGRATIONS: list[tuple[str, ...]] = [
    (  # 0 -> 1: the first schema
        "CREATE TABLE app_state (app_name TEXT PRIMARY KEY, state TEXT NOT NULL)",
        "CREATE TABLE user_state (app_name TEXT, user_id TEXT, state TEXT NOT NULL,"
        " PRIMARY KEY (app_name, user_id))",
        "CREATE TABLE sessions (app_name TEXT, user_id TEXT, id TEXT, state TEXT NOT NULL,"
        " revision INTEGER NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,"
        " PRIMARY KEY (app_name, user_id, id))",
        "CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, app_name TEXT NOT NULL,"
        " user_id TEXT NOT NULL, session_id TEXT NOT NULL, timestamp REAL NOT NULL,"
        " body TEXT NOT NULL)",
        "CREATE INDEX events_by_session ON events (app_name, user_id, session_id, seq)",
        "CREATE TABLE leases (app_name TEXT, user_id TEXT, session_id TEXT, owner TEXT NOT NULL,"
        " expires REAL NOT NULL, PRIMARY KEY (app_name, user_id, session_id))",
    ),
]
"""The schema as an ordered list: entry ``i`` takes a database from version ``i`` to ``i + 1``.

A new version appends an entry; entries already released never change.
"""

SCHEMA_VERSION = len(MIGRATIONS)


def connection_setup(path: str, *, durable: bool) -> Callable[[sqlite3.Connection], None]:
    """What a new connection to ``path`` runs first (on its own thread)."""

    def setup(conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(LOCK_SLICE * 1000)}")
        check_and_migrate(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")

    return setup


def check_and_migrate(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a file that is not ours (or is newer) untouched, then bring ours up to date."""
    version = _checked_version(conn, path)
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _checked_version(conn, path)  # another connection may have migrated first
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _checked_version(conn: sqlite3.Connection, path: str) -> int:
    """The file's schema version; raises :class:`ConfigurationError` when it is not ours."""
    try:
        app_id: int = conn.execute("PRAGMA application_id").fetchone()[0]
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        tables: int = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        if is_busy(exc):
            raise
        raise ConfigurationError(f"{path!r} is not a trio_agents session database ({exc})") from exc
    if app_id != APPLICATION_ID and (app_id != 0 or tables):
        raise ConfigurationError(
            f"{path!r} is not a trio_agents session database "
            f"(application id {app_id:#x}, {tables} schema objects)"
        )
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"{path!r} has session schema version {version}, newer than this trio_agents "
            f"understands ({SCHEMA_VERSION}); upgrade trio_agents to open it"
        )
    return version
