"""Waiting for another PostgreSQL connection to reach a point, by asking the server.

A test that needs "the other connection now waits for the lock" polls ``pg_stat_activity`` on a
connection of its own every few milliseconds, up to a generous limit: it goes on as soon as the
state is reached (no guessed sleep), and fails, rather than passing without the race, if the state
never comes.
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg
import trio

POLL = 0.005  # seconds between two looks
LIMIT = 30.0  # seconds before the wait is a failure: the state never came

_BLOCKED = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND cardinality(pg_blocking_pids(pid)) > 0 AND query LIKE %s"
)
_GONE = (
    "SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = current_database()"
    " AND application_name = %s"
)
_RUNNING = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND state = 'active' AND query LIKE %s"
)


async def until_blocked(dsn: str, query: str) -> None:
    """Until a statement starting with ``query`` waits for a lock another connection holds."""
    await _until(dsn, _BLOCKED, query + "%")


async def until_running(dsn: str, query: str) -> None:
    """Until a statement starting with ``query`` is executing on the server."""
    await _until(dsn, _RUNNING, query + "%")


async def until_gone(dsn: str, application_name: str) -> None:
    """Until no connection named ``application_name`` is open on the server."""
    await _until(dsn, _GONE, application_name)


async def _until(dsn: str, sql: str, pattern: str) -> None:
    connect = functools.partial(psycopg.connect, dsn, autocommit=True)
    conn = await trio.to_thread.run_sync(connect)
    try:
        with trio.fail_after(LIMIT):
            while True:  # another system's state: no event to wait for
                if await trio.to_thread.run_sync(_count, conn, sql, pattern):
                    return
                await trio.sleep(POLL)
    finally:
        await trio.to_thread.run_sync(conn.close)


def _count(conn: Any, sql: str, pattern: str) -> int:
    return int(conn.execute(sql, (pattern,)).fetchone()[0])  # a boolean counts as 0 or 1
