"""Session storage: the :class:`SessionService` interface and its backends."""

from __future__ import annotations

from ._base import (
    EventLog as EventLog,
    GetSessionConfig as GetSessionConfig,
    Session as Session,
    SessionService as SessionService,
)
from ._memory import InMemorySessionService as InMemorySessionService

__all__ = [
    "EventLog",
    "GetSessionConfig",
    "InMemorySessionService",
    "Session",
    "SessionService",
]
