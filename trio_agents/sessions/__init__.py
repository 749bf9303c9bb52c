"""Session storage: the :class:`SessionService` interface and its backends."""

from __future__ import annotations

from ._base import (
    EventLog as EventLog,
    GetSessionConfig as GetSessionConfig,
    Session as Session,
    SessionService as SessionService,
)
from ._memory import InMemorySessionService as InMemorySessionService
from ._postgres import PostgresSessionService as PostgresSessionService
from ._sqlite import SqliteSessionService as SqliteSessionService

__all__ = [
    "EventLog",
    "GetSessionConfig",
    "InMemorySessionService",
    "PostgresSessionService",
    "Session",
    "SessionService",
    "SqliteSessionService",
]
