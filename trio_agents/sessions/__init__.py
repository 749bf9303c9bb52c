"""Session storage: the :class:`SessionService` interface and its backends.

:class:`PostgresSessionService` (and psycopg with it) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._exports import publish as _publish, publish_one as _publish_one
from ._base import (
    EventLog as EventLog,
    GetSessionConfig as GetSessionConfig,
    ListSessionsResponse as ListSessionsResponse,
    Session as Session,
    SessionService as SessionService,
)
from ._memory import InMemorySessionService as InMemorySessionService
from ._sqlite import SqliteSessionService as SqliteSessionService

if TYPE_CHECKING:
    from ._postgres import PostgresSessionService as PostgresSessionService

__all__ = [
    "EventLog",
    "GetSessionConfig",
    "InMemorySessionService",
    "ListSessionsResponse",
    "PostgresSessionService",
    "Session",
    "SessionService",
    "SqliteSessionService",
]

_publish(__name__, globals(), __all__)


def __getattr__(name: str) -> Any:
    if name != "PostgresSessionService":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ._postgres import PostgresSessionService

    _publish_one(__name__, PostgresSessionService)
    globals()[name] = PostgresSessionService
    return PostgresSessionService


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
